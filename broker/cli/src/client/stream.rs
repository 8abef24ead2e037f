//! The bytes of one broker connection: plain TCP, or TLS over it (`security.protocol` SSL or
//! SASL_SSL). Timeouts are the TCP socket's, so they hold for TLS reads and writes too.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::tls::TlsStream;

/// A connection's byte stream.
#[derive(Debug)]
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            Self::Tls(tls) => &tls.sock,
        }
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.tcp().set_read_timeout(timeout)
    }

    pub fn read_timeout(&self) -> std::io::Result<Option<Duration>> {
        self.tcp().read_timeout()
    }

    pub const fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(tcp) => tcp.read(buf),
            Self::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(tcp) => tcp.write(buf),
            Self::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(tcp) => tcp.flush(),
            Self::Tls(tls) => tls.flush(),
        }
    }
}
