"""The baseline-CPU smoke check: a release binary must run on a processor with SSE2 and nothing later.

The binary runs under ``qemu-x86_64`` (Debian's qemu-user) with :data:`BASELINE_CPU`, qemu's ``qemu64`` model
without the features it has beyond baseline x86-64 (SSE3, CMPXCHG16B, LAHF/SAHF, SVM) and, so that a newer
qemu whose ``qemu64`` grew cannot hide anything, without every later one too. Before the binary is judged,
control programs prove the emulation refuses what it should: one SSE3 and one AVX2 instruction, compiled
here by gcc, must die with SIGILL under that model and run under ``-cpu max``.

A server (the demo server) must also declare, in ``--build-info``, exactly rustc's default target features
for its target, then start, answer HTTP/1.1, HTTP/2 (h2c and over TLS) and exit 0 on SIGTERM, all under
emulation. Any other binary is run with the given arguments and must exit 0.

An aarch64 binary is checked the same way against Armv8.0-A: under ``qemu-aarch64 -cpu cortex-a53``, after
two static control programs built by Debian's ``aarch64-linux-gnu-gcc`` (an Armv8.1 LSE ``ldadd``, an Armv8.2
``sdot``) died with SIGILL under that model and ran under ``-cpu max``. What differs per architecture is one
:class:`Baseline` (:data:`X86_64`, :data:`AARCH64`), chosen by the binary's ELF machine. On an x86_64 machine the
aarch64 server's ``--build-info`` is read under ``-cpu max`` (it cannot run natively). On a native aarch64 machine
the same code runs (qemu-user emulates the host's own architecture too, so ``-cpu cortex-a53`` still applies and
``--build-info`` runs natively): untested, as no aarch64 machine was at hand.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from recipes import procs, report
from recipes.claim import claim, identity_of_config, own_optimised_binary
from recipes.config import load_config
from recipes.errors import CheckFailed, CommandFailed, ConfigError, MissingInput, ToolchainError
from recipes.inputs import user_path
from recipes.llvm import elf
from recipes.results import CommandCheck, CpuBaselineResult, Failed, Report, ServerCheck
from recipes.runner import capture, query, quote, run, say
from recipes.stages.frame import StageFrame
from recipes.store import sha256_file
from recipes.toolchain import emulation
from recipes.toolchain.rustflags import rust_triple
from recipes.web import certs, net
from recipes.workdir import WorkDir

QEMU = "qemu-x86_64"
#: what qemu64 has beyond baseline x86-64 (pni is SSE3), then every later extension, all switched off
FEATURES_OFF = (
    "pni",
    "cx16",
    "lahf-lm",
    "svm",
    "ssse3",
    "sse4.1",
    "sse4.2",
    "popcnt",
    "abm",
    "movbe",
    "xsave",
    "avx",
    "f16c",
    "fma",
    "avx2",
    "bmi1",
    "bmi2",
)
BASELINE_CPU = "qemu64," + ",".join(f"-{name}" for name in FEATURES_OFF)
NEWER_CPU = "max"
SIGILL_EXIT = -int(signal.SIGILL)

#: control programs: one instruction each of the first extension after SSE2 and of AVX2
CONTROLS = {
    "sse3": 'int main(void) { __asm__ volatile("haddpd %%xmm0, %%xmm0" ::: "xmm0"); return 0; }\n',
    "avx2": (
        "int main(void) {\n"
        '    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\\n\\tvpaddd %%ymm0, %%ymm0, %%ymm0" ::: "xmm0");\n'
        "    return 0;\n"
        "}\n"
    ),
}


@dataclass(frozen=True)
class Control:
    """A one-instruction program: built by the baseline's compiler with ``flags``, it must die with SIGILL under
    the baseline model and exit 0 under the newer one."""

    name: str
    source: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Baseline:
    """Everything of the check that depends on the binary's architecture; the code is the same for each."""

    arch: str  # as elf.elf_arch names it
    qemu: str  # qemu-user's program for the architecture
    cpu: str  # the baseline model
    controls: tuple[Control, ...]
    compiler: str  # builds the controls
    #: the Debian package of ``compiler``, checked for before it runs; None: a set-up requirement (gcc)
    compiler_package: str | None
    described: str  # "an SSE2-only CPU": the processor the baseline model stands for
    beyond: str  # "beyond baseline x86-64": what a SIGILL under it says the binary uses
    #: where a dynamic binary's ld.so and libc are (``QEMU_LD_PREFIX``), on a machine not of this architecture
    sysroot: str | None = None
    newer_cpu: str = NEWER_CPU  # a model with every later extension: the controls must run under it


X86_64 = Baseline(
    arch="x86_64",
    qemu=QEMU,
    cpu=BASELINE_CPU,
    controls=tuple(Control(name, source, ("-O0",)) for name, source in CONTROLS.items()),
    compiler="gcc",
    compiler_package=None,
    described="an SSE2-only CPU",
    beyond="beyond baseline x86-64",
)

#: Armv8.1's LSE atomic add and Armv8.2's dot product; static, so they need no sysroot; the assembler takes them
#: for the ``-march`` given, which says nothing of the processor they run on
AARCH64_CONTROLS = (
    Control(
        "lse",
        "int main(void) {\n"
        "    long value = 0, one = 1, old;\n"
        '    __asm__ volatile("ldadd %x[one], %x[old], [%x[at]]" : [old] "=r"(old) : [one] "r"(one), [at] "r"(&value)'
        ' : "memory");\n'
        "    return value == 1 ? 0 : 1;\n"
        "}\n",
        ("-O0", "-static", "-march=armv8.1-a"),
    ),
    Control(
        "dotprod",
        'int main(void) { __asm__ volatile("sdot v0.4s, v1.16b, v2.16b" ::: "v0"); return 0; }\n',
        ("-O0", "-static", "-march=armv8.2-a+dotprod"),
    ),
)
AARCH64 = Baseline(
    arch="aarch64",
    qemu=emulation.ARCHES["aarch64"].qemu,
    cpu="cortex-a53",
    controls=AARCH64_CONTROLS,
    compiler=emulation.ARCHES["aarch64"].linker,
    compiler_package=emulation.ARCHES["aarch64"].linker_package,
    described="an Armv8.0 CPU",
    beyond="beyond Armv8.0-A",
    sysroot=emulation.ARCHES["aarch64"].sysroot,
)
#: the architectures with a baseline, by the ELF machine of the binary
BASELINES = {baseline.arch: baseline for baseline in (X86_64, AARCH64)}


def baseline_for(binary: Path, arch: str | None) -> Baseline:
    """The baseline of a binary of ``arch`` (None: not ELF, a script run natively: x86-64's), or one line."""
    if arch is None:
        return X86_64
    if arch not in BASELINES:
        raise ConfigError(
            f"{binary} is an {arch} binary: the baseline-CPU check is of x86-64 binaries (qemu64) and aarch64 ones "
            f"(cortex-a53), {arch} is not checked",
            "check it on an x86_64 or aarch64 binary of the same source, or leave the check out for this target",
        )
    return BASELINES[arch]


def baseline_env(baseline: Baseline, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with ``QEMU_LD_PREFIX`` set to the baseline's sysroot, unless it is set (as the plan's is)."""
    out = dict(env)
    if baseline.sysroot is not None:
        out.setdefault("QEMU_LD_PREFIX", baseline.sysroot)
    return out


def qemu_argv(baseline: Baseline, binary: Path, args: Sequence[str], model: str | None = None) -> list[str]:
    """The binary under the baseline's emulation (its model, or ``model``), never leaving a core file behind when it
    dies."""
    return ["prlimit", "--core=0", "--", baseline.qemu, "-cpu", model or baseline.cpu, str(binary), *args]


def describe_exit(returncode: int) -> str:
    """How an emulated program ended, a signal by its name: ``killed by SIGILL (illegal instruction)``."""
    return procs.describe_exit(returncode, numbered=False)


def check_qemu(env: Mapping[str, str], baseline: Baseline = X86_64) -> str:
    """qemu-user's version line (qemu-x86_64's by default), or a ToolchainError saying how to get it."""
    try:
        return capture([baseline.qemu, "--version"], env=env).splitlines()[0].strip()
    except ToolchainError as exc:
        raise ToolchainError(
            f"{baseline.qemu} not found: the baseline-CPU check needs it", "apt-get install qemu-user"
        ) from exc
    except OSError as exc:  # found on PATH but not a program this machine runs (no x bit, not ELF nor a script)
        raise ToolchainError(
            f"{baseline.qemu} on PATH cannot be run: {exc.strerror}",
            f"reinstall qemu-user with apt-get install qemu-user, or put a working {baseline.qemu} first on PATH",
        ) from exc


def check_controls(folder: Path, env: Mapping[str, str], baseline: Baseline = X86_64) -> dict[str, dict[str, str]]:
    """Compile the control programs; each must die with SIGILL under the baseline model and run under max."""
    if baseline.compiler_package is not None and shutil.which(baseline.compiler, path=env.get("PATH")) is None:
        raise ToolchainError(
            f"{baseline.compiler} not found: the baseline-CPU check of {baseline.arch} binaries builds its control "
            "programs with it",
            f"apt-get install {baseline.compiler_package}",
        )
    results: dict[str, dict[str, str]] = {}
    for control in baseline.controls:
        name = control.name
        c_file = folder / f"control-{name}.c"
        program = folder / f"control-{name}"
        c_file.write_text(control.source, encoding="utf-8")
        run(
            [baseline.compiler, *control.flags, "-o", str(program), str(c_file)],
            env=env,
            log=folder / f"control-{name}-gcc.log",
            what=baseline.compiler,
        )
        ended = {
            label: run(
                qemu_argv(baseline, program, [], model),
                env=env,
                log=folder / f"control-{name}-{label}.log",
                check=False,
            ).returncode
            for label, model in (("baseline", baseline.cpu), ("max", baseline.newer_cpu))
        }
        if ended["baseline"] != SIGILL_EXIT:
            raise CheckFailed(
                f"the emulation does not refuse {name}: the control program got {describe_exit(ended['baseline'])} "
                f"under -cpu {baseline.cpu}, not SIGILL",
                "this qemu cannot prove a baseline: use Debian's qemu-user 7.2 or newer",
            )
        if ended["max"] != 0:
            raise CheckFailed(
                f"the {name} control program got {describe_exit(ended['max'])} under -cpu {baseline.newer_cpu}, "
                "where it must run",
                "this qemu does not emulate the newer instructions, so its SIGILL proves nothing: use qemu 7.2+",
            )
        results[name] = {label: describe_exit(returncode) for label, returncode in ended.items()}
    return results


# --- what the binary says it was built for --------------------------------------------------------------


@dataclass(frozen=True)
class BuildInfo:
    """``demo-server --build-info``: the target and target features stamped at build time."""

    target: str
    target_features: tuple[str, ...]


def parse_build_info(text: str) -> BuildInfo:
    """Parse ``target=<triple>`` and ``target_features=<comma list>`` lines."""
    fields = {key: value.strip() for key, value in _assignments(text)}
    if "target" not in fields or "target_features" not in fields:
        raise CheckFailed(
            f"--build-info printed no target= and target_features= lines: {text.strip()[:120]!r}",
            "the binary must stamp its target and target features at build time",
        )
    features = tuple(sorted({f for f in fields["target_features"].split(",") if f}))
    return BuildInfo(fields["target"], features)


def parse_rustc_cfg_features(text: str) -> tuple[str, ...]:
    """The ``target_feature="…"`` values of ``rustc --print cfg``, sorted."""
    return tuple(sorted({value.strip('"') for key, value in _assignments(text) if key == "target_feature"}))


def _assignments(text: str) -> list[tuple[str, str]]:
    """The ``key=value`` lines of ``text`` (stripped; lines without ``=`` left out), in order."""
    split = (line.strip().partition("=") for line in text.splitlines())
    return [(key, value) for key, sep, value in split if sep]


def rustc_default_features(target: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """What rustc (``env["RUSTC"]``: the plan's resolved compiler, else ``rustc``) enables for ``target`` without any
    -Ctarget-cpu or -Ctarget-feature."""
    rustc = env.get("RUSTC", "rustc")
    return parse_rustc_cfg_features(capture([rustc, "--print", "cfg", "--target", rust_triple(target)], env=env))


#: target features that say how the binary is linked, not which instructions it may use: ``crt-static`` is in
#: ``rustc --print cfg`` for x86_64-unknown-linux-musl, but cargo leaves it out of a build script's
#: ``CARGO_CFG_TARGET_FEATURE`` (the demo server for musl stamps ``fxsr,sse,sse2``); the static link itself is
#: checked on the ELF file (recipes/llvm/elf.py)
NOT_INSTRUCTION_FEATURES = frozenset({"crt-static"})


def check_build_info(info: BuildInfo, defaults: Sequence[str], binary: Path) -> None:
    """The binary must declare exactly rustc's default instruction-set features for its target."""
    built = set(info.target_features) - NOT_INSTRUCTION_FEATURES
    wanted = set(defaults) - NOT_INSTRUCTION_FEATURES
    extra = sorted(built - wanted)
    missing = sorted(wanted - built)
    if extra or missing:
        parts = [f"beyond them: {','.join(extra)}"] if extra else []
        parts += [f"without: {','.join(missing)}"] if missing else []
        detail = "; ".join(parts)
        raise CheckFailed(
            f"{binary.name} was built for target features {','.join(info.target_features) or 'none'}, not rustc's "
            f"defaults for {info.target} ({','.join(defaults)}): {detail}",
            "a release build passes no -Ctarget-cpu or -Ctarget-feature (rustflags, .cargo/config.toml)",
        )


# --- a server under emulation ---------------------------------------------------------------------------


def parse_listening(line: str) -> dict[str, str]:
    """``listening http=127.0.0.1:8080 https=127.0.0.1:8443`` -> ``{"http": …, "https": …}``."""
    words = line.split()
    if not words or words[0] != "listening":
        return {}
    return dict(word.split("=", 1) for word in words[1:] if "=" in word)


def server_config(http_port: int, https_port: int, cert: Path, key: Path) -> str:
    return (
        "[server]\n"
        f'http = "127.0.0.1:{http_port}"\n'
        f'https = "127.0.0.1:{https_port}"\n'
        "workers = 1\n\n"
        "[tls]\n"
        f'cert = "{cert}"\n'
        f'key = "{key}"\n'
    )


#: (what, curl options, scheme, path, the HTTP version curl must report)
REQUESTS = (
    ("HTTP/1.1", ["--http1.1"], "http", "/health", "1.1"),
    ("HTTP/2 (h2c)", ["--http2-prior-knowledge"], "http", "/health", "2"),
    ("HTTP/2 over TLS", ["--http2"], "https", "/health", "2"),
    ("HTTP/1.1 over TLS", ["--http1.1"], "https", "/metrics", "1.1"),
)


def _read_line(stream: IO[bytes], deadline: float) -> str | None:
    """One line from the server's stdout, or None at EOF or the deadline."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    buffer = b""
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            byte = os.read(stream.fileno(), 1)
            if not byte:
                return None
            if byte == b"\n":
                return buffer.decode("utf-8", "replace")
            buffer += byte
        return None
    finally:
        selector.close()


def _last_line(log: Path) -> str:
    try:
        lines = [line.strip() for line in log.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    return next((line for line in reversed(lines) if line), "")[:200]


def _ask(
    child: procs.Child, what: str, options: list[str], url: str, version: str, *, env: Mapping[str, str], log: Path,
    cpu: str,
) -> None:  # fmt: skip
    """One request of the check by curl: 200 over ``version`` expected, else one line (with the server's state)."""
    try:
        got = capture(
            ["curl", "-sS", "--max-time", "30", *options, "-o", "/dev/null", "-w", "%{http_code} %{http_version}", url],
            env=env,
        ).strip()
    except CommandFailed as exc:
        code = child.returncode
        state = f" (the server: {describe_exit(code)})" if code is not None else ""
        raise CheckFailed(f"{what} request {url} failed under -cpu {cpu}{state}: {exc.message}", f"see {log}") from exc
    if got != f"200 {version}":
        raise CheckFailed(f"{what} {url}: got {got!r}, expected '200 {version}'", f"see {log}")


def check_server(
    binary: Path, folder: Path, env: Mapping[str, str], *, timeout: float = 120.0, baseline: Baseline = X86_64
) -> ServerCheck:
    """Start the server under the baseline model, send a few requests of each protocol, stop it with SIGTERM."""
    made = certs.make_certs(["ecdsa"], folder, env=env, logs=folder)
    cert, key = Path(made["ecdsa_cert"]), Path(made["ecdsa_key"])
    http_port, https_port = net.free_ports(2)
    config = folder / "server.toml"
    config.write_text(server_config(http_port, https_port, cert, key), encoding="utf-8")
    argv = qemu_argv(baseline, binary, ["--config", str(config)])
    log = folder / "server.log"
    answered: list[str] = []
    say(f"$ {quote(argv)}")
    with procs.Child.start(argv, env=env, log=log, pipe_stdout=True, label="the server under qemu") as child:
        deadline = time.monotonic() + timeout
        addresses: dict[str, str] = {}
        while not addresses:
            line = _read_line(child.stdout, deadline)
            if line is None:
                code = child.wait(5 if time.monotonic() < deadline else 0)  # at EOF it is exiting: its status
                state = describe_exit(code) if code is not None else f"no line in {timeout:.0f} s"
                sigill = code == SIGILL_EXIT
                said = _last_line(log)
                raise CheckFailed(
                    f"{binary.name} did not start under -cpu {baseline.cpu}: {state}"
                    + (f": it uses instructions {baseline.beyond}" if sigill else "")
                    + (f": {said}" if said and not sigill else ""),
                    f"see {log}",
                )
            addresses = parse_listening(line)
        for what, options, scheme, path, version in REQUESTS:
            url = f"{scheme}://{addresses[scheme]}{path}"
            for _ in range(3):
                _ask(child, what, [*options, "--cacert", str(cert)], url, version, env=env, log=log, cpu=baseline.cpu)
            answered.append(what)
        returncode = child.stop(timeout)
        if returncode is None:
            raise CheckFailed(f"{binary.name} did not exit {timeout:.0f} s after SIGTERM", f"see {log}")
        if returncode != 0:
            raise CheckFailed(f"{binary.name} got {describe_exit(returncode)} after SIGTERM, not exit 0", f"see {log}")
    return {"requests": [f"{what}: 3 x 200" for what in answered], "sigterm": "exit code 0", "config": str(config)}


# --- the whole check --------------------------------------------------------------------------------------


def check_command(
    binary: Path, args: Sequence[str], folder: Path, env: Mapping[str, str], baseline: Baseline = X86_64
) -> CommandCheck:
    """Run a command-line binary with ``args`` under the baseline model: it must exit 0."""
    done = run(qemu_argv(baseline, binary, args), env=env, log=folder / "command.log", check=False)
    if done.returncode == SIGILL_EXIT:
        raise CheckFailed(
            f"{binary.name} died with SIGILL (illegal instruction) under {baseline.described} (-cpu {baseline.cpu}): "
            f"it uses instructions {baseline.beyond}",
            "a release build passes no -Ctarget-cpu or -Ctarget-feature (rustflags, .cargo/config.toml)",
        )
    if done.returncode != 0:
        launch = _launch(baseline)
        native = query([*launch, str(binary), *args], env=env)
        how = f"under -cpu {baseline.newer_cpu}" if launch else "natively"
        raise CheckFailed(
            f"{binary.name} {' '.join(args)} got {describe_exit(done.returncode)} under -cpu {baseline.cpu} "
            f"({how}: {describe_exit(native.returncode)})",
            f"see {done.log}",
        )
    return {"args": list(args), "exit": describe_exit(done.returncode)}


def _launch(baseline: Baseline) -> list[str]:
    """What runs a binary of the baseline's architecture as the machine would: nothing on a machine of it, else
    qemu-user under the newer model (an aarch64 binary on x86_64)."""
    if baseline.arch == emulation.host_arch():
        return []
    return [baseline.qemu, "-cpu", baseline.newer_cpu]


ELF_MAGIC = b"\x7fELF"


def _magic(binary: Path) -> bytes:
    """The first four bytes of ``binary``: an ELF binary's are :data:`ELF_MAGIC`."""
    try:
        with binary.open("rb") as stream:
            return stream.read(4)
    except OSError as exc:
        raise MissingInput(f"{binary} cannot be read: {exc.strerror}", "pass --binary a file you may read") from exc


def _not_elf(binary: Path, magic: bytes) -> CheckFailed:
    return CheckFailed(
        f"{binary} is not an ELF binary (it starts with {magic!r})",
        "qemu-user emulates ELF binaries only: pass --binary the program cargo built",
    )


def check_binary(
    binary: Path, folder: Path, env: Mapping[str, str], *, args: Sequence[str] | None = None
) -> CpuBaselineResult:
    """The baseline-CPU check of one binary: the controls, then the server check, or a run with ``args``;
    ``folder``: the check's own (its control programs, certificates and logs, named here)."""
    if not binary.is_file():
        raise MissingInput(f"no binary at {binary}", "build it first, or pass --binary PATH")
    if not os.access(binary, os.X_OK):
        raise MissingInput(f"{binary} is not executable", "chmod +x it, or pass --binary the program cargo built")
    magic = _magic(binary)
    if magic != ELF_MAGIC and (args is not None or not magic.startswith(b"#!")):
        raise _not_elf(binary, magic)
    baseline = baseline_for(binary, elf.elf_arch_or_none(binary))
    env = baseline_env(baseline, env)
    folder.mkdir(parents=True, exist_ok=True)
    qemu = check_qemu(env, baseline)
    say(f"cpu-baseline: {binary} under {baseline.qemu} -cpu {baseline.cpu}")
    result = CpuBaselineResult(
        binary=binary,
        qemu=qemu,
        cpu=baseline.cpu,
        arch=baseline.arch,
        qemu_program=baseline.qemu,
        controls=check_controls(folder, env, baseline),
    )
    if args is not None:
        return replace(result, command=check_command(binary, args, folder, env, baseline))
    try:  # natively, or for another architecture under the newer model: what it was built for
        native = query([*_launch(baseline), str(binary), "--build-info"], env=env)
    except OSError as exc:  # not a program this machine runs: not ELF nor a script, or no interpreter
        raise CheckFailed(
            f"{binary} cannot be run: {exc.strerror}", "pass --binary the program cargo built for this machine"
        ) from exc
    if native.returncode != 0:
        raise CheckFailed(
            f"{binary.name} --build-info got {describe_exit(native.returncode)}: {native.stderr.strip()[:120]}",
            "for a binary that is not the demo server, give the arguments to run it with: --run ARG...",
        )
    if magic != ELF_MAGIC:  # a script may answer --build-info, but qemu-user runs ELF binaries only
        raise _not_elf(binary, magic)
    info = parse_build_info(native.stdout)
    defaults = rustc_default_features(info.target, env)
    result = replace(
        result,
        build_info={"target": info.target, "target_features": list(info.target_features)},
        rustc_default_features=list(defaults),
    )
    check_build_info(info, defaults, binary)
    emulated = run(qemu_argv(baseline, binary, ["--build-info"]), env=env, log=folder / "build-info.log", check=False)
    if emulated.returncode != 0:
        raise CheckFailed(
            f"{binary.name} --build-info got {describe_exit(emulated.returncode)} under -cpu {baseline.cpu}",
            f"see {emulated.log}",
        )
    return replace(result, server=check_server(binary, folder, env, baseline=baseline))


@dataclass(frozen=True)
class CpuArgs:
    """The posargs of ``nox -s cpu-baseline``."""

    binary: Path | None
    run_args: tuple[str, ...] | None


def parse_cpu_args(posargs: Sequence[str]) -> CpuArgs:
    """``--binary PATH`` (default: the work dir's optimised binary) and ``--run ARG...`` (not a server)."""
    # allow_abbrev=False: --b is not taken for --binary, nor is --= argparse's usage and exit 2 (it could be either)
    parser = argparse.ArgumentParser(
        prog="nox -s cpu-baseline --", add_help=False, allow_abbrev=False, exit_on_error=False
    )
    parser.add_argument("--binary", default=None)
    parser.add_argument("--run", nargs=argparse.REMAINDER, default=None)
    try:
        namespace, rest = parser.parse_known_args(list(posargs))
    except argparse.ArgumentError as exc:
        raise ConfigError(f"session arguments: {exc}", "write them as --binary PATH [--run ARG...]") from exc
    if rest:
        flag = rest[0].split("=", 1)[0]
        whole = [option for option in ("--binary", "--run") if len(flag) > 2 and option.startswith(flag)]
        if whole:
            raise ConfigError(f"session arguments: {flag} is an abbreviation of {whole[0]}", f"write {whole[0]} whole")
        raise ConfigError(f"session arguments: unknown argument {rest[0]!r}", "known: --binary PATH, --run ARG...")
    if namespace.binary is not None and not namespace.binary.strip():  # an empty one was the work dir's binary
        raise ConfigError("--binary needs a path", "write --binary PATH, or leave it out for the optimised binary")
    binary = user_path(namespace.binary, Path.cwd(), "--binary").absolute() if namespace.binary else None
    run_args = tuple(namespace.run) if namespace.run is not None else None
    return CpuArgs(binary, run_args)


def default_binary(work_report: Report, work: Path) -> Path:
    optimised = work_report.optimise
    if optimised is None or (isinstance(optimised, Failed) and "binary" not in optimised.partial):
        raise MissingInput(
            f"{WorkDir(work).report} names no optimised binary", "run `nox -s pgo` first, or pass --binary PATH"
        )
    if isinstance(optimised, Failed):
        raise MissingInput(
            f"the last optimised build failed its checks ({optimised.reason})", "build again, or pass --binary PATH"
        )
    return own_optimised_binary(WorkDir(work), optimised)


def cpu_baseline(project_dir: Path, environ: Mapping[str, str], args: CpuArgs) -> CpuBaselineResult:
    """``nox -s cpu-baseline``: check ``--binary`` or the work dir's optimised binary; recorded in report.json."""
    config = load_config(project_dir, environ)
    with claim(config.out, "cpu-baseline") as held:
        if args.binary is not None:  # a binary of one's own: not the work dir's, no record
            return _checked(args.binary, config.out, environ, args.run_args)
        held.identify(identity_of_config(config, environ, any_target=True))  # the work dir's binary: of this crate
        with StageFrame(config.out, "cpu_baseline", timed=False) as frame:
            binary = default_binary(report.load(config.out), config.out)
            return frame.done(_checked(binary, config.out, environ, args.run_args))


def _checked(binary: Path, work: Path, environ: Mapping[str, str], run_args: Sequence[str] | None) -> CpuBaselineResult:
    result = check_binary(binary, WorkDir(work).cpu_baseline(), environ, args=run_args)
    return replace(result, binary_sha256=sha256_file(binary))


def summary_lines(result: CpuBaselineResult) -> list[str]:
    qemu = result.qemu_program or QEMU
    lines = [f"cpu-baseline {result.binary} passed under {qemu} -cpu {result.cpu}"]
    if (baseline := BASELINES.get(result.arch or "x86_64", X86_64)) is not X86_64:  # x86-64's line as it was
        lines[0] += f" ({baseline.described}: nothing {baseline.beyond})"
    controls = ", ".join(f"{name} {r['baseline']} (max: {r['max']})" for name, r in result.controls.items())
    lines.append(f"  controls: {controls}")
    if result.build_info is not None:
        lines.append(f"  target features: {','.join(result.build_info['target_features'])} (rustc's defaults)")
    if result.server is not None:
        lines.append(f"  served: {'; '.join(result.server['requests'])}; SIGTERM: {result.server['sigterm']}")
    if result.command is not None:
        lines.append(f"  ran: {' '.join(result.command['args'])}: {result.command['exit']}")
    return lines
