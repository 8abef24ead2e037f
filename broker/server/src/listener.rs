//! The accept loop over every listener (PLAINTEXT and SSL, with `admission`'s connection
//! limits), and graceful shutdown: stop accepting, let each connection finish the requests
//! it has read, write their responses, stop the background work (`background`), then close
//! every log (flush + clean-shutdown marker).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_storage::{Fs, RealFs};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::{AdminServer, AdminState};
use crate::admission::Admission;
use crate::background::{Background, Opened};
use crate::broker::{Broker, Seams};
use crate::config::{BrokerConfig, HostPort, SecurityProtocol};
use crate::connection;
use crate::error::ServerError;
use crate::limits;
use crate::tls::Tls;
use crate::wire::{Client, ConnectionContext};
use sluice_security::principal::KafkaPrincipal;

/// One bound listener of `listeners`.
#[derive(Debug)]
struct BoundListener {
    /// The listener name (Metadata advertises this listener's address to its clients).
    name: Arc<str>,
    /// PLAINTEXT or SSL.
    protocol: SecurityProtocol,
    /// The socket; dropped at shutdown so no new clients arrive.
    socket: TcpListener,
}

/// A bound, not yet running broker.
#[derive(Debug)]
pub struct Server {
    /// Shared broker state (topics, config).
    broker: Arc<Broker>,
    /// The Kafka listener sockets, in `listeners` order; dropped first at shutdown.
    listeners: Vec<BoundListener>,
    /// The controller listener's address, in a cluster.
    controller: Option<SocketAddr>,
    /// The TLS config of the SSL listeners (reloaded when its files change).
    tls: Option<Arc<Tls>>,
    /// Flipped to true at shutdown: readers stop, long polls return.
    shutdown_tx: watch::Sender<bool>,
    /// `max.connections`, `max.connections.per.ip` and the broker-wide request budget.
    admission: Arc<Admission>,
    /// The coordinators, the transforms and the log work (`background`); stopped after the
    /// connections, in its order.
    background: Background,
    /// The admin HTTP API, when [`Server::bind_admin`] bound it; stops with the listener.
    admin: Option<AdminServer>,
}

impl Server {
    /// Opens the data dir and binds the listener (port 0 picks a free port).
    pub async fn bind(config: BrokerConfig) -> Result<Self, ServerError> {
        Self::bind_with(config, Arc::new(RealFs)).await
    }

    /// Same, with partition logs on `fs` (a fault-injecting twin in tests).
    pub async fn bind_with(config: BrokerConfig, fs: Arc<dyn Fs>) -> Result<Self, ServerError> {
        Self::bind_seams(
            config,
            Seams {
                fs,
                ..Seams::default()
            },
        )
        .await
    }

    /// Same, reading the world through `seams` (a fault-injecting filesystem, a manual
    /// clock that the log ticker, retention, views and group sessions all read).
    pub async fn bind_seams(config: BrokerConfig, seams: Seams) -> Result<Self, ServerError> {
        config.validate()?;
        sluice_protocol::shape::assert_complete().map_err(ServerError::Internal)?;
        let specs = config.listener_specs()?;
        let tls = if specs.iter().any(|s| s.protocol.is_tls()) {
            Some(Arc::new(Tls::open(&config)?))
        } else {
            None
        };
        let (broker, opened) = tokio::task::spawn_blocking(move || {
            let broker = Broker::open_seams(config, seams)?;
            let opened = Opened::open(&broker)?;
            Ok::<_, ServerError>((broker, opened))
        })
        .await
        .map_err(|e| ServerError::Io {
            context: "opening the data dir".into(),
            source: std::io::Error::other(e),
        })??;
        let broker = Arc::new(broker);
        tracing::info!(
            data_dir = %broker.config.data_dir.display(),
            cluster_id = %broker.cluster_id,
            topics = broker.topics.topics().len(),
            "data dir open"
        );
        let mut listeners = Vec::with_capacity(specs.len());
        for spec in specs {
            let socket = TcpListener::bind(spec.bind)
                .await
                .map_err(ServerError::io(format!(
                    "binding {} ({})",
                    spec.bind, spec.name
                )))?;
            let bound = socket
                .local_addr()
                .map_err(ServerError::io("reading the bound address"))?;
            broker.set_bound_address(
                &spec.name,
                HostPort {
                    host: advertised_host(bound.ip()),
                    port: bound.port(),
                },
            );
            listeners.push(BoundListener {
                name: spec.name.into(),
                protocol: spec.protocol,
                socket,
            });
        }
        let controller = if broker.config.needs_format() {
            Some(start_kraft(&broker).await?)
        } else {
            None
        };
        let (shutdown_tx, _) = watch::channel(false);
        let admission = Admission::new(
            &broker.config,
            broker.topics.descriptor_budget().connections,
        );
        let background = Background::start(&broker, opened)?;
        serve_peer_messages(&broker, &background).await;
        Ok(Self {
            broker,
            listeners,
            controller,
            tls,
            shutdown_tx,
            admission,
            background,
            admin: None,
        })
    }

    /// Binds the admin HTTP API on `admin.listen` (if set) and returns its address. A
    /// separate step, so embedders and tests that only want Kafka never take port 9644.
    pub async fn bind_admin(&mut self) -> Result<Option<SocketAddr>, ServerError> {
        let Some(listen) = &self.broker.config.admin_listen else {
            return Ok(None);
        };
        let addr = listen
            .socket_addr()
            .map_err(|reason| crate::error::ConfigError::BadValue {
                key: "admin.listen".into(),
                value: listen.to_string(),
                reason,
            })?;
        let tls = if self.broker.config.admin_ssl_enabled {
            // The SSL listeners' certificates; the admin API asks for no client certificate.
            let mut config = (*self.broker.config).clone();
            config.ssl_client_auth = crate::config::ClientAuth::None;
            Some(Arc::new(Tls::open(&config)?))
        } else {
            None
        };
        if !addr.ip().is_loopback() && !self.broker.config.admin_authenticates() {
            tracing::warn!(%addr, "the admin API asks no credentials on a non-loopback address (admin.allow.insecure = true)");
        }
        let admin = AdminServer::bind(addr, tls).await?;
        let bound = admin.local_addr();
        self.admin = Some(admin);
        Ok(Some(bound))
    }

    /// The address the first client listener of `listeners` bound; a dedicated
    /// controller's (`process.roles=controller`, no client listener): its controller
    /// listener's.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener_addrs()
            .first()
            .map(|(_, addr)| *addr)
            .or(self.controller)
            .expect(
                "a broker binds a client listener, a dedicated controller its controller listener",
            )
    }

    /// Every listener's name and bound address, in `listeners` order.
    pub fn listener_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.listeners
            .iter()
            .map(|l| {
                let addr = l
                    .socket
                    .local_addr()
                    .expect("a bound listener has an address");
                (l.name.to_string(), addr)
            })
            .collect()
    }

    /// The shared broker (tests inspect it).
    pub fn broker(&self) -> Arc<Broker> {
        self.broker.clone()
    }

    /// Serves until `shutdown` resolves, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        let Self {
            broker,
            listeners,
            controller: _,
            tls,
            shutdown_tx,
            admission,
            mut background,
            admin,
        } = self;
        background.start_log_work(&broker, &shutdown_tx);
        let admin = admin.map(|admin| spawn_admin(admin, &broker, &background, &shutdown_tx));
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                permit = admission.connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                () = &mut shutdown => break,
            };
            let (index, (stream, peer)) = tokio::select! {
                (index, accepted) = accept_any(&listeners) => match accepted {
                    Ok(accepted) => (index, accepted),
                    Err(e) => {
                        // Out of file descriptors or memory: back off instead of spinning.
                        tracing::warn!(error = %e, backoff_ms = limits::ACCEPT_ERROR_BACKOFF_MS, "accept failed");
                        tokio::time::sleep(Duration::from_millis(limits::ACCEPT_ERROR_BACKOFF_MS)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let Some(ip_slot) = admit_ip(&admission, &broker, peer) else {
                continue;
            };
            let listener = &listeners[index];
            let ctx = context(
                &broker,
                listener,
                peer,
                &shutdown_tx,
                &background,
                &admission,
            );
            let tls = tls.clone().filter(|_| listener.protocol.is_tls());
            connections.spawn(serve_admitted(stream, tls, ctx, (permit, ip_slot)));
            while connections.try_join_next().is_some() {}
        }
        while connections.try_join_next().is_some() {}
        tracing::info!(
            open_connections = connections.len(),
            "shutting down: no longer accepting"
        );
        drop(listeners);
        shutdown_tx.send_replace(true);
        wait_for_connections(&mut connections).await;
        if let Some(kraft) = broker.kraft() {
            // The runners commit through other brokers' coordinators and leaders: they stop
            // while this broker still reaches them.
            background.transforms().stop().await;
            kraft.shutdown().await;
        }
        background.stop_log_work().await;
        if let Some(admin) = admin {
            stop_admin(admin).await;
        }
        background.stop_services().await;
        let closing = broker.clone();
        tokio::task::spawn_blocking(move || closing.close_all())
            .await
            .map_err(|e| ServerError::Io {
                context: "closing logs".into(),
                source: std::io::Error::other(e),
            })??;
        tracing::info!("shutdown complete");
        Ok(())
    }
}

/// In a cluster, other brokers' messages go to the transforms, then the coordinators and
/// the other services, from now on.
async fn serve_peer_messages(broker: &Arc<Broker>, background: &Background) {
    let Some(kraft) = broker.kraft() else {
        return;
    };
    let coordinators = crate::txn::peers::handler(
        Arc::clone(broker),
        background.txns().clone(),
        background.groups().clone(),
    );
    let handler = crate::transforms::handler(
        Arc::clone(broker),
        background.txns().clone(),
        background.groups().clone(),
        background.transforms().clone(),
        coordinators,
    );
    kraft.serve_messages(handler).await;
}

/// Binds the controller listener and starts this broker's side of the cluster, registering
/// the client listeners as they are advertised.
async fn start_kraft(broker: &Arc<Broker>) -> Result<SocketAddr, ServerError> {
    let config = &broker.config;
    let addr = crate::kraft::controller_listener(config)?;
    let socket = TcpListener::bind(addr)
        .await
        .map_err(ServerError::io(format!(
            "binding the controller listener {addr}"
        )))?;
    let listeners = config
        .listener_specs()?
        .into_iter()
        .map(|spec| {
            let advertised = broker.advertised(&spec.name);
            sluice_cluster::records::Listener {
                name: spec.name,
                host: advertised.host,
                port: advertised.port,
                security_protocol: spec.protocol.into(),
            }
        })
        .collect();
    let kraft = crate::kraft::Kraft::start(
        config,
        &broker.cluster_id,
        listeners,
        socket,
        Arc::clone(&broker.topics),
        Arc::clone(&broker.security),
        Arc::clone(&broker.plugins.registry),
    )
    .await?;
    broker.set_kraft(kraft);
    Ok(addr)
}

/// Waits for the open connections to finish, at most `SHUTDOWN_GRACE_MS`; then aborts them.
async fn wait_for_connections(connections: &mut JoinSet<()>) {
    let grace = Duration::from_millis(limits::SHUTDOWN_GRACE_MS);
    if tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tracing::warn!(
            grace_ms = limits::SHUTDOWN_GRACE_MS,
            "connections still open after the grace period; closing logs anyway"
        );
        connections.abort_all();
    }
}

/// The connection's slot of its address's `max.connections.per.ip`; `None` (the caller
/// drops the stream, closing it) when the address has them all.
fn admit_ip(
    admission: &Arc<Admission>,
    broker: &Broker,
    peer: SocketAddr,
) -> Option<crate::admission::IpSlot> {
    let slot = admission.admit_ip(peer.ip());
    if slot.is_none() {
        let limit = broker.config.max_connections_per_ip;
        tracing::warn!(%peer, limit, "closing connection: max.connections.per.ip reached");
        broker.metrics.connection_refused();
    } else {
        tracing::debug!(%peer, "connection accepted");
    }
    slot
}

/// A new connection's context; its principal is anonymous until a TLS handshake or SASL says more.
fn context(
    broker: &Arc<Broker>,
    listener: &BoundListener,
    peer: SocketAddr,
    shutdown_tx: &watch::Sender<bool>,
    background: &Background,
    admission: &Admission,
) -> ConnectionContext {
    ConnectionContext {
        client: Client {
            peer,
            listener_name: listener.name.clone(),
            security_protocol: listener.protocol,
            principal: KafkaPrincipal::anonymous(),
            host: peer.ip().to_string().into(),
            token_authenticated: false,
            mute_ms: Arc::default(),
            shutdown: shutdown_tx.subscribe(),
        },
        broker: broker.clone(),
        groups: background.groups().clone(),
        txns: background.txns().clone(),
        request_bytes: Arc::clone(&admission.request_bytes),
        client_software: Arc::new(std::sync::Mutex::new(
            broker.metrics.client_software.connect(
                crate::metrics::ClientSoftware::UNKNOWN,
                crate::metrics::ClientSoftware::UNKNOWN,
            ),
        )),
    }
}

/// The next connection on any listener, with the listener's index. Polling starts at a
/// different listener each time, so a busy one cannot starve the others.
async fn accept_any(
    listeners: &[BoundListener],
) -> (usize, std::io::Result<(tokio::net::TcpStream, SocketAddr)>) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let start = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let index = (start + i) % listeners.len();
            if let std::task::Poll::Ready(accepted) = listeners[index].socket.poll_accept(cx) {
                return std::task::Poll::Ready((index, accepted));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Serves one accepted connection (its TLS handshake first, on an SSL listener); its
/// admission slots go back when it closes.
async fn serve_admitted(
    stream: tokio::net::TcpStream,
    tls: Option<Arc<Tls>>,
    ctx: ConnectionContext,
    slots: (tokio::sync::OwnedSemaphorePermit, crate::admission::IpSlot),
) {
    let broker = ctx.broker.clone();
    let _open = broker.metrics.connection_opened();
    connection::serve(stream, tls.as_deref(), ctx).await;
    drop(slots);
}

/// Serves the admin API until the shutdown flag flips.
fn spawn_admin(
    admin: AdminServer,
    broker: &Arc<Broker>,
    background: &Background,
    shutdown_tx: &watch::Sender<bool>,
) -> tokio::task::JoinHandle<()> {
    let state = AdminState {
        broker: broker.clone(),
        groups: background.groups().clone(),
        transforms: background.transforms().clone(),
        shutdown: shutdown_tx.subscribe(),
    };
    let mut stop = shutdown_tx.subscribe();
    tokio::spawn(admin.run(state, async move {
        stop.wait_for(|stop| *stop).await.ok();
    }))
}

/// Waits for the admin API's graceful shutdown, at most `ADMIN_SHUTDOWN_GRACE_MS`.
async fn stop_admin(mut admin: tokio::task::JoinHandle<()>) {
    let grace = Duration::from_millis(limits::ADMIN_SHUTDOWN_GRACE_MS);
    if tokio::time::timeout(grace, &mut admin).await.is_err() {
        tracing::warn!(
            grace_ms = limits::ADMIN_SHUTDOWN_GRACE_MS,
            "admin API connections still open after the grace period; closing them"
        );
        admin.abort();
    }
}

/// The host to advertise for a bound IP. A wildcard bind (0.0.0.0, ::) is not an address a
/// client can dial, so, like Kafka, advertise the machine's host name instead.
fn advertised_host(ip: std::net::IpAddr) -> String {
    if !ip.is_unspecified() {
        return ip.to_string();
    }
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `name.len()` bytes into our buffer.
    let rc = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) };
    let host = if rc == 0 {
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        String::from_utf8_lossy(&name[..end]).into_owned()
    } else {
        String::new()
    };
    if host.is_empty() {
        tracing::warn!(
            "listening on a wildcard address and the host name is unknown: set advertised.listeners"
        );
        return "localhost".to_owned();
    }
    tracing::info!(
        host,
        "listening on a wildcard address: advertising the host name (set advertised.listeners to change it)"
    );
    host
}
