//! A connection's two halves, plain TCP or TLS: the reader and the writer are each an enum
//! that delegates `AsyncRead` / `AsyncWrite`, so the framing code is written once. Only the
//! plain writer reaches the socket itself (TCP_CORK, sendfile).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio_rustls::server::TlsStream;

/// An accepted connection, after its TLS handshake if its listener is SSL.
#[derive(Debug)]
pub enum Stream {
    /// PLAINTEXT.
    Plain(TcpStream),
    /// SSL (boxed: rustls's connection state is large).
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Splits into the reader's and the writer's halves.
    pub fn split(self) -> (Reader, Writer) {
        match self {
            Self::Plain(stream) => {
                let (read, write) = stream.into_split();
                (Reader::Plain(read), Writer::Plain(write))
            }
            Self::Tls(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (Reader::Tls(read), Writer::Tls(write))
            }
        }
    }
}

/// The read half.
#[derive(Debug)]
pub enum Reader {
    /// Plain TCP.
    Plain(OwnedReadHalf),
    /// TLS: decrypted bytes.
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The write half.
#[derive(Debug)]
pub enum Writer {
    /// Plain TCP: the sendfile and TCP_CORK paths.
    Plain(OwnedWriteHalf),
    /// TLS: every byte goes through rustls.
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(r) => Pin::new(r).poll_read(cx, buf),
            Self::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Writer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_write(cx, buf),
            Self::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            Self::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(w) => w.is_write_vectored(),
            Self::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_flush(cx),
            Self::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(w) => Pin::new(w).poll_shutdown(cx),
            Self::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
