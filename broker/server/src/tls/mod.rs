//! TLS for SSL listeners (rustls, ring as the crypto provider): the server config built from
//! Kafka's keys (`ssl.keystore.location`, one PEM file with the private key and the
//! certificate chain; `ssl.truststore.location`, the PEM CA bundle for client certificates;
//! `ssl.client.auth`), the handshake with its timeout, the client's principal, and reload
//! when the files change.
//!
//! Reload: a watcher thread (notify) on the files' directories gathers changes for
//! `TLS_RELOAD_DEBOUNCE_MS`, then builds a new server config; a build that fails keeps the
//! old one and logs why. Open connections keep the config they shook hands with; only new
//! handshakes see the new certificates.

pub mod principal;

use sluice_security::principal::KafkaPrincipal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::config::{BrokerConfig, ClientAuth};
use crate::error::ConfigError;
use crate::limits;

/// The TLS side of every SSL listener: the current server config, swapped on reload.
pub struct Tls {
    /// What the next handshake uses.
    current: Arc<ArcSwap<ServerConfig>>,
    /// Keeps the file watch alive; dropping it ends the watcher thread.
    _watcher: Option<RecommendedWatcher>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

/// The files a server config is built from.
#[derive(Debug, Clone)]
struct Sources {
    keystore: PathBuf,
    truststore: Option<PathBuf>,
    client_auth: ClientAuth,
}

impl Tls {
    /// Builds the server config from `config` (errors name the key and the file) and starts
    /// watching its files.
    pub fn open(config: &BrokerConfig) -> Result<Self, ConfigError> {
        let keystore = config.ssl_keystore_location.clone().ok_or_else(|| {
            ConfigError::Inconsistent("an SSL listener needs ssl.keystore.location".into())
        })?;
        let sources = Sources {
            keystore,
            truststore: config.ssl_truststore_location.clone(),
            client_auth: config.ssl_client_auth,
        };
        let current = Arc::new(ArcSwap::from(build(&sources)?));
        let watcher = match watch(&sources, &current) {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!(error = %e, "not watching the certificate files: they will not reload");
                None
            }
        };
        Ok(Self {
            current,
            _watcher: watcher,
        })
    }

    /// The TLS handshake on an accepted connection, bounded by `TLS_HANDSHAKE_TIMEOUT_MS`.
    pub async fn accept(&self, stream: TcpStream) -> Result<TlsStream<TcpStream>, String> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current.load_full());
        let timeout = Duration::from_millis(limits::TLS_HANDSHAKE_TIMEOUT_MS);
        match tokio::time::timeout(timeout, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "no finished handshake within {} ms (TLS_HANDSHAKE_TIMEOUT_MS)",
                limits::TLS_HANDSHAKE_TIMEOUT_MS
            )),
        }
    }
}

/// The principal of a finished handshake: the client certificate's subject, if it sent one.
pub fn principal_of(stream: &TlsStream<TcpStream>) -> KafkaPrincipal {
    let (_, connection) = stream.get_ref();
    connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| principal::subject_rfc2253(leaf.as_ref()))
        .map_or_else(KafkaPrincipal::anonymous, KafkaPrincipal::user)
}

fn bad(key: &str, path: &Path, reason: impl Into<String>) -> ConfigError {
    ConfigError::BadValue {
        key: key.into(),
        value: path.display().to_string(),
        reason: reason.into(),
    }
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|e| bad(key, path, format!("cannot read it: {e}")))
}

fn certificates(
    key: &str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(key, path, format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(key, path, "no -----BEGIN CERTIFICATE----- block in it"));
    }
    Ok(certs)
}

/// A rustls server config from the files.
fn build(sources: &Sources) -> Result<Arc<ServerConfig>, ConfigError> {
    const KEYSTORE: &str = "ssl.keystore.location";
    let path = &sources.keystore;
    let pem = read(KEYSTORE, path)?;
    let chain = certificates(KEYSTORE, path, &pem)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        bad(
            KEYSTORE,
            path,
            format!("no usable -----BEGIN PRIVATE KEY----- block in it: {e}"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Inconsistent(format!("TLS: {e}")))?;
    let builder = match (&sources.truststore, sources.client_auth) {
        (_, ClientAuth::None) | (None, _) => builder.with_no_client_auth(),
        (Some(trust), auth) => {
            const TRUSTSTORE: &str = "ssl.truststore.location";
            let mut roots = rustls::RootCertStore::empty();
            for ca in certificates(TRUSTSTORE, trust, &read(TRUSTSTORE, trust)?)? {
                roots
                    .add(ca)
                    .map_err(|e| bad(TRUSTSTORE, trust, format!("not a usable CA: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| bad(TRUSTSTORE, trust, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        bad(
            KEYSTORE,
            path,
            format!("the key and certificate do not fit: {e}"),
        )
    })?;
    Ok(Arc::new(config))
}

/// TLS between the brokers of a cluster: the controller listener's server side (a client
/// certificate signed by `ssl.truststore.location` is required, whatever `ssl.client.auth`
/// says: the quorum has no other authentication) and the client side every broker dials its
/// peers with (their certificates checked against the same truststore, this broker's own
/// certificate from `ssl.keystore.location` presented). Built once at start (not reloaded).
#[derive(Debug, Clone)]
pub struct PeerTls {
    pub server: Arc<ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

impl PeerTls {
    /// # Errors
    /// A key or file missing or unusable, named.
    pub fn open(config: &BrokerConfig) -> Result<Self, ConfigError> {
        const KEYSTORE: &str = "ssl.keystore.location";
        const TRUSTSTORE: &str = "ssl.truststore.location";
        let keystore = config.ssl_keystore_location.clone().ok_or_else(|| {
            ConfigError::Inconsistent("TLS between brokers needs ssl.keystore.location".into())
        })?;
        let truststore = config.ssl_truststore_location.clone().ok_or_else(|| {
            ConfigError::Inconsistent(
                "TLS between brokers needs ssl.truststore.location (the CA that signed every broker's certificate)"
                    .into(),
            )
        })?;
        let server = build(&Sources {
            keystore: keystore.clone(),
            truststore: Some(truststore.clone()),
            client_auth: ClientAuth::Required,
        })?;
        let pem = read(KEYSTORE, &keystore)?;
        let chain = certificates(KEYSTORE, &keystore, &pem)?;
        let key = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|e| bad(KEYSTORE, &keystore, format!("no usable private key: {e}")))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in certificates(TRUSTSTORE, &truststore, &read(TRUSTSTORE, &truststore)?)? {
            roots
                .add(ca)
                .map_err(|e| bad(TRUSTSTORE, &truststore, format!("not a usable CA: {e}")))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ConfigError::Inconsistent(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                bad(
                    KEYSTORE,
                    &keystore,
                    format!("the key and certificate do not fit: {e}"),
                )
            })?;
        Ok(Self {
            server,
            client: Arc::new(client),
        })
    }
}

/// Watches the directories of the certificate files; rebuilds on change.
fn watch(
    sources: &Sources,
    current: &Arc<ArcSwap<ServerConfig>>,
) -> Result<RecommendedWatcher, String> {
    let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(tx).map_err(|e| e.to_string())?;
    let files: Vec<PathBuf> = std::iter::once(&sources.keystore)
        .chain(sources.truststore.as_ref())
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
        .collect();
    for file in &files {
        let dir = file.parent().unwrap_or(Path::new("/"));
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let sources = sources.clone();
    let current = Arc::downgrade(current);
    std::thread::Builder::new()
        .name("tls-reload".into())
        .spawn(move || run(&sources, &files, &current, &rx))
        .map_err(|e| e.to_string())?;
    Ok(watcher)
}

/// Ends when the watcher (the sender) or the config is dropped.
fn run(
    sources: &Sources,
    files: &[PathBuf],
    current: &std::sync::Weak<ArcSwap<ServerConfig>>,
    events: &mpsc::Receiver<notify::Result<notify::Event>>,
) {
    let debounce = Duration::from_millis(limits::TLS_RELOAD_DEBOUNCE_MS);
    while let Ok(event) = events.recv() {
        if !touches(&event, files) {
            continue;
        }
        // Gather the rest of this change (a key and a chain written one after the other):
        // until our files are quiet for the debounce time. Other files of the directories
        // (a log being written) do not extend it.
        let mut quiet_at = Instant::now() + debounce;
        loop {
            let left = quiet_at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match events.recv_timeout(left) {
                Ok(event) if touches(&event, files) => quiet_at = Instant::now() + debounce,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        let Some(current) = current.upgrade() else {
            return;
        };
        match build(sources) {
            Ok(config) => {
                current.store(config);
                tracing::info!(keystore = %sources.keystore.display(), "TLS certificates reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS certificates not reloaded; keeping the old ones")
            }
        }
    }
}

/// Whether a watch event is a write, rename or removal of one of `files`.
fn touches(event: &notify::Result<notify::Event>, files: &[PathBuf]) -> bool {
    let Ok(event) = event else {
        return false;
    };
    // Our own reads show up as opens and closes; only a closed writer means new bytes.
    if matches!(event.kind, EventKind::Access(a) if a != AccessKind::Close(AccessMode::Write)) {
        return false;
    }
    event.paths.iter().any(|p| files.iter().any(|f| f == p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_with(keystore: &str) -> Result<Tls, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.pem");
        std::fs::write(&path, keystore).unwrap();
        let mut config = BrokerConfig::default();
        config.set("listeners", "SSL://127.0.0.1:0").unwrap();
        config
            .set("ssl.keystore.location", path.to_str().unwrap())
            .unwrap();
        Tls::open(&config)
    }

    #[test]
    fn a_keystore_without_a_certificate_is_refused_naming_the_key() {
        let err = open_with("not pem at all\n").unwrap_err().to_string();
        assert!(err.contains("ssl.keystore.location"), "{err}");
        assert!(err.contains("BEGIN CERTIFICATE"), "{err}");
    }

    #[test]
    fn a_certificate_without_its_key_is_refused_naming_the_key() {
        // A syntactically valid PEM certificate block (its DER is not checked until use).
        let pem = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";
        let err = open_with(pem).unwrap_err().to_string();
        assert!(err.contains("ssl.keystore.location"), "{err}");
        assert!(err.contains("PRIVATE KEY"), "{err}");
    }

    #[test]
    fn a_missing_keystore_file_is_refused_naming_the_key() {
        let mut config = BrokerConfig::default();
        config
            .set("ssl.keystore.location", "/nonexistent/broker.pem")
            .unwrap();
        let err = Tls::open(&config).unwrap_err().to_string();
        assert!(
            err.contains("ssl.keystore.location") && err.contains("cannot read"),
            "{err}"
        );
    }
}
