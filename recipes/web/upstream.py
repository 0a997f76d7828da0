"""The training's upstream backend: a small, fast HTTP/1.1 keep-alive server (asyncio, raw protocol).

Run as ``python3 -m recipes.web.upstream [--port N]``; it prints ``listening PORT`` once bound, and stops on
SIGTERM. Paths (anything after the prefix is free, so the proxy's cache sees many keys):

- ``/page/…``  200, a 5 KB HTML page, ``Cache-Control: public, max-age=300`` (the server may cache it)
- ``/img/…``   200, a 200 KB image-like blob, cacheable
- ``/api/…``   200, small JSON (echoes the method and the body length), ``Cache-Control: no-store``
- ``/slow/…``  like /api/ after 2 ms
- ``/large/…`` 200, 1 MiB, ``Cache-Control: no-store``
- ``/error/NNN`` status NNN (e.g. 500, 503), no-store
- anything else: 404

A request it cannot read (a request line not of three words, a Content-Length or a chunk size that is not a
number) is answered 400 and its connection closed, as an HTTP server answers one: never a traceback in its log.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import re
import signal
import socket
import sys
from typing import cast

PAGE = (
    b"<!doctype html><html><head><title>upstream</title></head><body>"
    + b"".join(b"<p>paragraph %04d: the quick brown fox jumps over the lazy dog</p>\n" % i for i in range(80))
)[:5120] + b"</body></html>\n"
IMAGE = b"".join(hashlib.sha256(b"img%d" % i).digest() for i in range(200 * 1024 // 32))
LARGE = b"".join(hashlib.sha256(b"large%d" % i).digest() for i in range(1024 * 1024 // 32))
REASONS = {
    200: b"OK",
    400: b"Bad Request",
    404: b"Not Found",
    500: b"Internal Server Error",
    502: b"Bad Gateway",
    503: b"Unavailable",
}
MAX_HEAD = 64 * 1024
#: a Content-Length (decimal digits) and a chunk's size (hex digits, before any chunk extension)
LENGTH = re.compile(rb"[0-9]+")
CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]+")


def response(status: int, body: bytes, content_type: bytes, cache: bytes, *, keep_alive: bool, head: bool) -> bytes:
    reason = REASONS.get(status, b"Status")
    lines = [
        b"HTTP/1.1 %d %s" % (status, reason),
        b"content-type: " + content_type,
        b"content-length: %d" % len(body),
        b"cache-control: " + cache,
        b"x-upstream: training",
    ]
    if not keep_alive:
        lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + (b"" if head else body)


def route(method: bytes, path: bytes, body_length: int) -> tuple[int, bytes, bytes, bytes, float]:
    """status, body, content type, cache-control, delay in seconds."""
    if path.startswith(b"/page/"):
        return 200, PAGE, b"text/html", b"public, max-age=300", 0.0
    if path.startswith(b"/img/"):
        return 200, IMAGE, b"image/png", b"public, max-age=300", 0.0
    if path.startswith((b"/api/", b"/slow/")):
        body = b'{"method":"%s","path_length":%d,"body_length":%d}\n' % (method, len(path), body_length)
        return 200, body, b"application/json", b"no-store", 0.002 if path.startswith(b"/slow/") else 0.0
    if path.startswith(b"/large/"):
        return 200, LARGE, b"application/octet-stream", b"no-store", 0.0
    if path.startswith(b"/error/"):
        code = path[7:10]
        status = int(code) if code.isdigit() and 400 <= int(code) <= 599 else 500
        return status, b"upstream error\n", b"text/plain", b"no-store", 0.0
    return 404, b"not found\n", b"text/plain", b"no-store", 0.0


class Http1(asyncio.Protocol):
    """One keep-alive connection: parses requests (Content-Length or chunked bodies) and answers in order."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a TCP server's transports are stream transports

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self.process()

    def process(self) -> None:
        while self.transport is not None and not self.transport.is_closing():
            request = self.parse()
            if request is None:
                return
            method, path, body_length, keep_alive = request
            status, body, ctype, cache, delay = route(method, path, body_length)
            payload = response(status, body, ctype, cache, keep_alive=keep_alive, head=method == b"HEAD")
            if delay:
                self.busy = True
                asyncio.get_running_loop().call_later(
                    delay, functools.partial(self.finish_delayed, payload, keep_alive=keep_alive)
                )
                return
            self.transport.write(payload)
            if not keep_alive:
                self.transport.close()
                return

    def finish_delayed(self, payload: bytes, *, keep_alive: bool) -> None:
        self.busy = False
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(payload)
        if not keep_alive:
            self.transport.close()
            return
        self.process()

    def parse(self) -> tuple[bytes, bytes, int, bool] | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEAD and self.transport is not None:
                self.transport.close()
            return None
        head = bytes(self.buffer[:end]).split(b"\r\n")
        parts = head[0].split(b" ")
        if len(parts) != 3:
            self.refuse()
            return None
        method, target, version = parts
        length = 0
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        for line in head[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"content-length":
                if not LENGTH.fullmatch(value):
                    self.refuse()
                    return None
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value:
                chunked = True
            elif name == b"connection":
                keep_alive = value != b"close" if version == b"HTTP/1.1" else value == b"keep-alive"
        start = end + 4
        if chunked:
            decoded = self.chunked_length(start)
        else:
            decoded = (length, start + length) if len(self.buffer) >= start + length else None
        if decoded is None:
            return None
        body_length, consumed = decoded
        del self.buffer[:consumed]
        return method, target.split(b"?")[0], body_length, keep_alive

    def refuse(self) -> None:
        """Answer a request that cannot be read 400 and close the connection (what follows it cannot be read)."""
        self.buffer.clear()
        if self.transport is not None:
            bad = response(400, b"bad request\n", b"text/plain", b"no-store", keep_alive=False, head=False)
            self.transport.write(bad)
            self.transport.close()

    def chunked_length(self, start: int) -> tuple[int, int] | None:
        """(body length, bytes consumed up to the end of the chunked body) or None when incomplete."""
        position = start
        total = 0
        while True:
            line_end = self.buffer.find(b"\r\n", position)
            if line_end < 0:
                return None
            field = bytes(self.buffer[position:line_end]).split(b";")[0].strip()
            if not CHUNK_SIZE.fullmatch(field):
                self.refuse()
                return None
            size = int(field, 16)
            position = line_end + 2
            if size == 0:
                trailer_end = self.buffer.find(b"\r\n", position)
                # trailers end with an empty line
                while trailer_end >= 0 and trailer_end != position:
                    position = trailer_end + 2
                    trailer_end = self.buffer.find(b"\r\n", position)
                if trailer_end < 0:
                    return None
                return total, trailer_end + 2
            if len(self.buffer) < position + size + 2:
                return None
            total += size
            position += size + 2


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    server = await loop.create_server(Http1, sock=sock)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
