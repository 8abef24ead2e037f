//! The admin listener under axum: accepts TCP connections, closes at once those past
//! `admin.max.connections` (counted in `sluice_admin_connections_refused_total`), runs the
//! TLS handshake when `admin.ssl.enabled` (with the Kafka listener's certificates, reloaded
//! the same way), each handshake on its own task so a slow one holds up no other client, and
//! hands the streams to `axum::serve` through a channel bounded by the same cap. A
//! connection that moves no byte either way for `connections.max.idle.ms` (the Kafka
//! listener's key, 10 minutes by default: longer than a plugin compile may take) is closed,
//! so idle clients cannot hold the cap's slots forever (axum sets no header-read timeout).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_rustls::server::TlsStream;

use crate::broker::Broker;
use crate::limits;
use crate::tls::Tls;

/// Both ends of an admin connection, as handlers see them (`ConnectInfo<Conn>`).
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    /// The client: its address is the login limiter's and the ACLs' host.
    pub peer: SocketAddr,
    /// The address the client reached (for a wildcard bind, the interface it came in on):
    /// a `Host` naming it is not a rebinding.
    pub local: SocketAddr,
}

impl Connected<IncomingStream<'_, AdminListener>> for Conn {
    fn connect_info(stream: IncomingStream<'_, AdminListener>) -> Self {
        *stream.remote_addr()
    }
}

/// An admitted connection: plain or TLS, holding its `admin.max.connections` slot until
/// axum drops it.
pub struct Admitted {
    stream: Stream,
    _slot: OwnedSemaphorePermit,
    /// Fires `idle` after the last byte read or written.
    deadline: Pin<Box<Sleep>>,
    idle: Duration,
}

impl Admitted {
    /// The stream's answer, with the idle deadline: progress moves it, and a stream that
    /// would wait past it fails with `TimedOut` instead.
    fn idle_bound<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
        moved: bool,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                if moved {
                    self.deadline.as_mut().reset(Instant::now() + self.idle);
                }
                Poll::Ready(result)
            }
            Poll::Pending if self.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "admin connection idle for connections.max.idle.ms",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// What `axum::serve` accepts from: the acceptor task's channel.
pub struct AdminListener {
    admitted: mpsc::Receiver<(Admitted, Conn)>,
    local: SocketAddr,
}

impl Listener for AdminListener {
    type Io = Admitted;
    type Addr = Conn;

    async fn accept(&mut self) -> (Admitted, Conn) {
        match self.admitted.recv().await {
            Some(admitted) => admitted,
            // The acceptor stopped (shutdown): nothing more arrives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Conn> {
        Ok(Conn {
            peer: self.local,
            local: self.local,
        })
    }
}

/// Starts accepting on `socket`; the task ends when the returned listener is dropped or
/// the task is aborted (at shutdown).
pub fn spawn_acceptor(
    socket: TcpListener,
    tls: Option<Arc<Tls>>,
    broker: Arc<Broker>,
) -> (AdminListener, tokio::task::JoinHandle<()>) {
    let max = broker.config.admin_max_connections as usize;
    let local = socket
        .local_addr()
        .expect("a bound listener has an address");
    let (tx, rx) = mpsc::channel(max);
    let slots = Arc::new(Semaphore::new(max));
    let task = tokio::spawn(accept_loop(socket, tls, broker, slots, tx));
    let listener = AdminListener {
        admitted: rx,
        local,
    };
    (listener, task)
}

async fn accept_loop(
    socket: TcpListener,
    tls: Option<Arc<Tls>>,
    broker: Arc<Broker>,
    slots: Arc<Semaphore>,
    tx: mpsc::Sender<(Admitted, Conn)>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = socket.accept() => accepted,
            // axum dropped the listener (shutdown, or the admin task aborted): stop, and
            // free the port.
            () = tx.closed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, backoff_ms = limits::ACCEPT_ERROR_BACKOFF_MS, "admin API accept failed");
                tokio::time::sleep(Duration::from_millis(limits::ACCEPT_ERROR_BACKOFF_MS)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            broker.metrics.admin_connection_refused();
            let limit = broker.config.admin_max_connections;
            tracing::warn!(%peer, limit, "closing admin API connection: admin.max.connections reached");
            continue;
        };
        let conn = Conn {
            peer,
            local: stream.local_addr().unwrap_or(peer),
        };
        tokio::spawn(admit(
            stream,
            conn,
            slot,
            tls.clone(),
            tx.clone(),
            broker.clone(),
        ));
    }
}

/// The TLS handshake (if any), then the hand-over to axum.
async fn admit(
    stream: TcpStream,
    conn: Conn,
    slot: OwnedSemaphorePermit,
    tls: Option<Arc<Tls>>,
    tx: mpsc::Sender<(Admitted, Conn)>,
    broker: Arc<Broker>,
) {
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => match tls.accept(stream).await {
            Ok(stream) => Stream::Tls(Box::new(stream)),
            Err(reason) => {
                broker.metrics.tls_handshake_failed();
                tracing::debug!(peer = %conn.peer, %reason, "admin API TLS handshake failed");
                return;
            }
        },
    };
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
    let admitted = Admitted {
        stream,
        _slot: slot,
        deadline: Box::pin(tokio::time::sleep(idle)),
        idle,
    };
    // Fails only at shutdown, when the connection is not wanted any more.
    let _ = tx.send((admitted, conn)).await;
}

impl AsyncRead for Admitted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = match &mut this.stream {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        };
        let moved = buf.filled().len() > before;
        this.idle_bound(cx, polled, moved)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = match &mut this.stream {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        };
        let moved = matches!(polled, Poll::Ready(Ok(n)) if n > 0);
        this.idle_bound(cx, polled, moved)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
