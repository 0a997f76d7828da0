//! Response body types shared by every handler.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, ReadBuf};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The one body type the server hands to hyper.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

pub fn full(data: impl Into<Bytes>) -> Body {
    Full::new(data.into()).map_err(|never| match never {}).boxed_unsync()
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

pub fn boxed<B>(body: B) -> Body
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

const FILE_CHUNK: usize = 128 * 1024;

/// Streams `remaining` bytes of a file from its current position.
pub struct FileBody {
    file: tokio::fs::File,
    remaining: u64,
    buf: Box<[u8]>,
}

impl FileBody {
    pub fn new(file: tokio::fs::File, len: u64) -> FileBody {
        let cap = usize::try_from(len).unwrap_or(FILE_CHUNK).clamp(1, FILE_CHUNK);
        FileBody { file, remaining: len, buf: vec![0; cap].into_boxed_slice() }
    }
}

impl HttpBody for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.remaining).unwrap_or(usize::MAX).min(this.buf.len());
        let mut buf = ReadBuf::new(&mut this.buf[..want]);
        ready!(Pin::new(&mut this.file).poll_read(cx, &mut buf))?;
        let filled = buf.filled();
        if filled.is_empty() {
            return Poll::Ready(Some(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while being sent"))));
        }
        this.remaining -= filled.len() as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(filled)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Data already read from a body, followed by the rest of that body.
pub struct Prefixed<B> {
    prefix: std::collections::VecDeque<Bytes>,
    rest: B,
}

impl<B> Prefixed<B> {
    pub fn new(prefix: Vec<Bytes>, rest: B) -> Self {
        Prefixed { prefix: prefix.into(), rest }
    }
}

impl<B> HttpBody for Prefixed<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        match this.prefix.pop_front() {
            Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
            None => Pin::new(&mut this.rest).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let buffered: u64 = self.prefix.iter().map(|b| b.len() as u64).sum();
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + buffered);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + buffered);
        }
        hint
    }
}

/// Wraps a response body, counts the bytes that go out and calls `on_end`
/// with the total once the body is finished or dropped (client gone).
pub struct Counted<F: FnOnce(u64)> {
    inner: Body,
    sent: u64,
    on_end: Option<F>,
}

impl<F: FnOnce(u64)> Counted<F> {
    pub fn new(inner: Body, on_end: F) -> Self {
        Counted { inner, sent: 0, on_end: Some(on_end) }
    }
}

impl<F: FnOnce(u64) + Unpin> HttpBody for Counted<F> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame {
            if let Some(data) = frame.data_ref() {
                this.sent += data.len() as u64;
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<F: FnOnce(u64)> Drop for Counted<F> {
    fn drop(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end(self.sent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prefixed_then_rest() {
        let body = Prefixed::new(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"c")], Full::new(Bytes::from_static(b"de")));
        assert_eq!(body.size_hint().exact(), Some(5));
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(all, "abcde");
    }

    #[tokio::test]
    async fn counted_reports_bytes_on_drop() {
        let (tx, rx) = std::sync::mpsc::channel();
        let body = Counted::new(full("hello"), move |n| tx.send(n).unwrap());
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(all, "hello");
        assert_eq!(rx.recv().unwrap(), 5);
    }

    #[tokio::test]
    async fn file_body_streams_a_range() {
        use tokio::io::AsyncSeekExt;
        let path = std::env::temp_dir().join(format!("demo-server-fb-{}", std::process::id()));
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let mut file = tokio::fs::File::open(&path).await.unwrap();
        file.seek(io::SeekFrom::Start(10)).await.unwrap();
        let body = FileBody::new(file, 200_000);
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &data[10..200_010]);
        std::fs::remove_file(&path).unwrap();
    }
}
