//! One client connection; the only code that touches socket bytes.
//!
//! Three stages joined in one task, linked by bounded channels:
//! - the reader parses length-prefixed frames (refusing a length above
//!   `socket.request.max.bytes` before allocating, and growing the buffer only as bytes
//!   arrive), and queues them (at most `IN_FLIGHT_REQUESTS_PER_CONNECTION_MAX` frames and
//!   `READ_AHEAD_BYTES_PER_CONNECTION_MAX` bytes);
//! - the processor handles them one at a time, in order (Kafka's per-connection ordering:
//!   two produces to one partition must append in the order they were sent); an acks=all
//!   produce is appended in order but answered by a task once its group commit is done
//!   (`Reply::Later`), so the next requests go on meanwhile;
//! - the writer sends responses in order (awaiting a `Reply::Later` in its turn): encoded bytes with `write_all`, record sets
//!   straight from segment files with `sendfile(2)` (PLAINTEXT), or over TLS read from the
//!   file and written through rustls in pieces of `TLS_FILE_CHUNK_BYTES`.
//!
//! On a SASL listener the processor lets only ApiVersions and the SASL requests through
//! until the connection has authenticated (`sasl`).
//!
//! An SSL listener's connection first shakes hands (`tls`), within
//! `TLS_HANDSHAKE_TIMEOUT_MS`; the framing, idle and admission limits are the same after it.
//! `stream` holds the plain-or-TLS halves.
//!
//! A framing error (bad length, unknown API, undecodable request) closes the connection after
//! the responses already queued are written.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::admission::FrameBudget;
use crate::handler;
use crate::limits;
use crate::sasl::{Admit, Session};
use crate::tls::{self, Tls};
use crate::wire::{Chunk, ConnectionContext, FrameError, Reply, Response};

mod stream;

use stream::{Reader, Stream, Writer};

/// Bytes the reader asks the socket for at a time while filling a large frame.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// A frame up to this size gets its whole buffer at once: no reallocation (and copy of what
/// was read so far) while it arrives. Covers a default-sized produce request
/// (`message.max.bytes` is 1 MiB); larger frames grow as their bytes arrive, by doubling.
const FRAME_PREALLOC_BYTES: usize = 1024 * 1024 + 64 * 1024;

/// TLS handshake failures logged at WARN, per window of `TLS_FAILURE_WARNING_WINDOW_MS`.
static TLS_FAILURE_WARNINGS: WarnBudget = WarnBudget::new();

/// At most `TLS_FAILURE_WARNINGS_PER_WINDOW` warnings per window (lock-free; a race at the
/// window's edge lets one or two more through, which is harmless).
struct WarnBudget {
    window_start_ms: AtomicI64,
    used: AtomicU32,
}

impl WarnBudget {
    const fn new() -> Self {
        Self {
            window_start_ms: AtomicI64::new(i64::MIN),
            used: AtomicU32::new(0),
        }
    }

    fn allow(&self, now_ms: i64) -> bool {
        let start = self.window_start_ms.load(Relaxed);
        if now_ms.saturating_sub(start) >= limits::TLS_FAILURE_WARNING_WINDOW_MS {
            self.window_start_ms.store(now_ms, Relaxed);
            self.used.store(0, Relaxed);
        }
        self.used.fetch_add(1, Relaxed) < limits::TLS_FAILURE_WARNINGS_PER_WINDOW
    }
}

/// Serves one connection until the client closes it, a framing error, or shutdown; with
/// `tls` (an SSL listener), after the handshake, which also gives the client's principal.
pub async fn serve(stream: TcpStream, tls: Option<&Tls>, mut ctx: ConnectionContext) {
    let peer = ctx.client.peer;
    ctx.broker.metrics.connection_accepted();
    let _ = stream.set_nodelay(true);
    let stream = match tls {
        None => Stream::Plain(stream),
        Some(tls) => match tls.accept(stream).await {
            Ok(stream) => {
                ctx.client.principal = tls::principal_of(&stream);
                Stream::Tls(Box::new(stream))
            }
            Err(reason) => {
                // A scanner on the TLS port must not flood the log: the first failures of
                // each window are warnings, the rest debug (all are counted).
                if TLS_FAILURE_WARNINGS.allow(ctx.broker.now_ms()) {
                    tracing::warn!(%peer, listener = %ctx.client.listener_name, reason, "TLS handshake failed");
                } else {
                    tracing::debug!(%peer, listener = %ctx.client.listener_name, reason, "TLS handshake failed");
                }
                ctx.broker.metrics.tls_handshake_failed();
                return;
            }
        },
    };
    tracing::debug!(
        %peer,
        listener = %ctx.client.listener_name,
        protocol = ctx.client.security_protocol.as_str(),
        principal = %ctx.client.principal,
        "connection start"
    );
    let (reader, writer) = stream.split();
    let (request_tx, request_rx) = mpsc::channel(limits::IN_FLIGHT_REQUESTS_PER_CONNECTION_MAX);
    let (response_tx, response_rx) = mpsc::channel(limits::QUEUED_RESPONSES_PER_CONNECTION_MAX);
    let max = ctx.broker.config.socket_request_max_bytes;
    let mut shutdown = ctx.client.shutdown.clone();
    let idle = std::time::Duration::from_millis(ctx.broker.config.connections_max_idle_ms);
    let global = Arc::clone(&ctx.request_bytes);
    let read = read_loop(reader, request_tx, max, idle, &mut shutdown, global);
    let rest = async {
        tokio::join!(
            process_loop(&ctx, request_rx, response_tx),
            write_loop(writer, response_rx, idle)
        )
    };
    tokio::pin!(read, rest);
    tokio::select! {
        result = &mut read => {
            log_close(peer, "reader", result);
            let (processed, written) = rest.await;
            log_close(peer, "processor", processed);
            log_close(peer, "writer", written);
        }
        (processed, written) = &mut rest => {
            log_close(peer, "processor", processed);
            log_close(peer, "writer", written);
        }
    }
}

fn log_close(peer: SocketAddr, stage: &str, result: Result<(), FrameError>) {
    match result {
        Ok(()) => {}
        Err(FrameError::Io(e)) => tracing::debug!(%peer, stage, error = %e, "connection closed"),
        // Failed exchanges are logged by `sasl` (and limited per address there).
        Err(e @ FrameError::Authentication(_)) => {
            tracing::debug!(%peer, stage, error = %e, "closing connection")
        }
        Err(e) => tracing::warn!(%peer, stage, error = %e, "closing connection"),
    }
}

/// A request frame and its share of the connection's read-ahead and of the broker-wide
/// request budget, returned once the request is decoded (`handler::handle`).
type Queued = (Bytes, FrameBudget);

async fn read_loop(
    mut reader: Reader,
    requests: mpsc::Sender<Queued>,
    max_bytes: u32,
    idle: std::time::Duration,
    shutdown: &mut watch::Receiver<bool>,
    global: Arc<Semaphore>,
) -> Result<(), FrameError> {
    let budget = Arc::new(Semaphore::new(
        limits::READ_AHEAD_BYTES_PER_CONNECTION_MAX as usize,
    ));
    loop {
        let queued = tokio::select! {
            queued = read_frame(&mut reader, max_bytes, &budget, &global) => queued?,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            () = tokio::time::sleep(idle) => {
                tracing::debug!(idle_ms = idle.as_millis() as u64, "closing idle connection (connections.max.idle.ms)");
                return Ok(());
            }
        };
        let Some(queued) = queued else { return Ok(()) };
        if requests.send(queued).await.is_err() {
            return Ok(());
        }
    }
}

/// Reads one frame body once the connection's read-ahead budget has room for it (a frame
/// larger than the whole budget waits until it is alone) and the broker-wide budget
/// (`queued.max.request.bytes`, never below `socket.request.max.bytes`) has room for all of
/// it; `None` on a clean end of stream between frames.
async fn read_frame(
    reader: &mut Reader,
    max_bytes: u32,
    budget: &Arc<Semaphore>,
    global: &Arc<Semaphore>,
) -> Result<Option<Queued>, FrameError> {
    let Some(length) = read_length(reader, max_bytes).await? else {
        return Ok(None);
    };
    let share = length.min(limits::READ_AHEAD_BYTES_PER_CONNECTION_MAX as usize) as u32;
    let permit = budget
        .clone()
        .acquire_many_owned(share)
        .await
        .expect("the budget is never closed");
    let broker_share = global
        .clone()
        .acquire_many_owned(length as u32)
        .await
        .expect("the budget is never closed");
    let body = read_body(reader, length).await?;
    Ok(Some((body, FrameBudget::new(permit, broker_share))))
}

/// Reads and checks a length prefix (`sluice_protocol::frame::body_length`); `None` on a
/// clean end of stream.
async fn read_length(reader: &mut Reader, max_bytes: u32) -> Result<Option<usize>, FrameError> {
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    Ok(Some(sluice_protocol::frame::body_length(
        prefix, max_bytes,
    )?))
}

/// Reads a frame body of `length` bytes, growing the buffer only as bytes arrive.
async fn read_body(reader: &mut Reader, length: usize) -> Result<Bytes, FrameError> {
    let mut body = BytesMut::with_capacity(length.min(FRAME_PREALLOC_BYTES));
    while body.len() < length {
        body.reserve((length - body.len()).min(READ_CHUNK_BYTES.max(body.len())));
        let mut limited = (&mut *reader).take((length - body.len()) as u64);
        if limited.read_buf(&mut body).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed mid-frame",
            )
            .into());
        }
    }
    Ok(body.freeze())
}

/// Handles requests in order. The processor owns the connection's SASL session and its
/// copy of the context, whose principal a completed SASL exchange sets.
async fn process_loop(
    ctx: &ConnectionContext,
    mut requests: mpsc::Receiver<Queued>,
    responses: mpsc::Sender<Reply>,
) -> Result<(), FrameError> {
    let mut ctx = ctx.clone();
    let mut session = Session::new(ctx.client.security_protocol.is_sasl());
    while let Some((frame, budget)) = requests.recv().await {
        let api_key = sluice_protocol::frame::peek(&frame)?.api_key;
        let (reply, close) = match session.admit(api_key, ctx.broker.now_ms()) {
            Admit::Request => (handler::handle(&ctx, frame, budget).await?, false),
            Admit::Sasl => handler::handle_sasl(&mut ctx, &mut session, frame, budget).await?,
            Admit::Refuse(reason) => return Err(FrameError::Authentication(reason)),
        };
        if !matches!(reply, Reply::Now(None)) && responses.send(reply).await.is_err() {
            return Ok(());
        }
        // A client over its quota: read nothing more until its throttle time has passed.
        let mute = ctx
            .client
            .mute_ms
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        if mute > 0 {
            let mut shutdown = ctx.client.shutdown.clone();
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(mute)) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            }
        }
        if close {
            return Err(FrameError::Authentication(
                "closing after a failed SASL handshake or authentication".into(),
            ));
        }
    }
    Ok(())
}

async fn write_loop(
    mut writer: Writer,
    mut responses: mpsc::Receiver<Reply>,
    idle: std::time::Duration,
) -> Result<(), FrameError> {
    while let Some(reply) = responses.recv().await {
        let response = match reply {
            Reply::Now(response) => response,
            Reply::Later(task) => task.await.map_err(io::Error::other)??,
        };
        let Some(response) = response else { continue };
        // A client that stops reading is idle too: give up on it after connections.max.idle.ms.
        tokio::time::timeout(idle, write_response(&mut writer, response))
            .await
            .map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, "client stopped reading responses")
            })??;
    }
    writer.shutdown().await.ok();
    Ok(())
}

/// Writes one response frame: the length prefix, then each chunk.
async fn write_response(writer: &mut Writer, response: Response) -> io::Result<()> {
    let body_bytes: usize = response.chunks.iter().map(Chunk::len).sum();
    let length = i32::try_from(body_bytes).map_err(|_| io::Error::other("response above 2 GiB"))?;
    let prefix = Bytes::copy_from_slice(&length.to_be_bytes());
    // A response in several pieces (a fetch: headers around file ranges) is corked so the
    // kernel sends full segments rather than one small packet per piece.
    let corked = response.chunks.len() > 1 && set_cork(writer, true);
    let mut pending = Some(prefix);
    for chunk in response.chunks {
        match chunk {
            Chunk::Bytes(bytes) => {
                // The length prefix goes out with the first piece in one writev.
                let mut buf = pending.take().unwrap_or_default().chain(bytes);
                writer.write_all_buf(&mut buf).await?;
            }
            Chunk::File(slice) => {
                if let Some(mut prefix) = pending.take() {
                    writer.write_all_buf(&mut prefix).await?;
                }
                write_slice(writer, slice).await?;
            }
        }
    }
    if let Some(mut prefix) = pending.take() {
        writer.write_all_buf(&mut prefix).await?;
    }
    if corked {
        set_cork(writer, false);
    }
    // rustls holds what it has not yet written to the socket: push it out now.
    writer.flush().await
}

/// Sets TCP_CORK; false if the socket refused or is TLS (the response is still written,
/// just in more packets).
fn set_cork(writer: &Writer, on: bool) -> bool {
    let Writer::Plain(writer) = writer else {
        return false;
    };
    let stream: &TcpStream = writer.as_ref();
    let value: libc::c_int = on.into();
    // SAFETY: setsockopt on our open socket with a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

async fn write_slice(writer: &mut Writer, slice: sluice_storage::ReadSlice) -> io::Result<()> {
    if slice.len == 0 {
        return Ok(());
    }
    let writer = match writer {
        Writer::Plain(writer) => writer,
        tls @ Writer::Tls(_) => return write_slice_in_pieces(tls, slice).await,
    };
    if let Some(fd) = slice.raw_fd() {
        match send_file(writer, fd, slice.position, slice.len as usize).await {
            // The filesystem cannot sendfile (and nothing was sent): copy instead.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                tracing::debug!(error = %e, "sendfile unsupported; copying the record set");
            }
            other => return other,
        }
    }
    // The copying path (no file descriptor, or no sendfile) reads on the blocking pool.
    let bytes = tokio::task::spawn_blocking(move || slice.read_to_vec())
        .await
        .map_err(io::Error::other)??;
    writer.write_all(&bytes).await
}

/// Reads the slice from its file and writes it, `TLS_FILE_CHUNK_BYTES` at a time (TLS: the
/// bytes must pass through rustls, so no sendfile; one bounded buffer, reused).
async fn write_slice_in_pieces(
    writer: &mut Writer,
    slice: sluice_storage::ReadSlice,
) -> io::Result<()> {
    let end = slice.position + u64::from(slice.len);
    let mut position = slice.position;
    let mut buf = Vec::with_capacity(limits::TLS_FILE_CHUNK_BYTES.min(slice.len as usize));
    while position < end {
        let mut piece = slice.clone();
        piece.position = position;
        piece.len = (end - position).min(limits::TLS_FILE_CHUNK_BYTES as u64) as u32;
        let (filled, read) = tokio::task::spawn_blocking(move || {
            let read = piece.read_into(&mut buf);
            (buf, read)
        })
        .await
        .map_err(io::Error::other)?;
        read?;
        writer.write_all(&filled).await?;
        position += filled.len() as u64;
        buf = filled;
    }
    Ok(())
}

/// Copies `len` bytes of `fd` from `offset` to the socket inside the kernel.
async fn send_file(
    writer: &OwnedWriteHalf,
    fd: RawFd,
    mut offset: u64,
    mut len: usize,
) -> io::Result<()> {
    let stream: &TcpStream = writer.as_ref();
    let socket = stream.as_raw_fd();
    let mut sent_any = 0usize;
    while len > 0 {
        stream.writable().await?;
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            let mut file_offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
            // SAFETY: both descriptors are open for the duration of the call (the socket is
            // borrowed from `writer`, the file from the caller's ReadSlice), and
            // `file_offset` is a valid, exclusively borrowed off_t.
            let n = unsafe { libc::sendfile(socket, fd, &mut file_offset, len) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file shorter than the read slice",
                ));
            }
            Ok(n) => {
                offset += n as u64;
                len -= n;
                sent_any += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e)
                if sent_any == 0
                    && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) =>
            {
                return Err(io::Error::new(io::ErrorKind::Unsupported, e));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
