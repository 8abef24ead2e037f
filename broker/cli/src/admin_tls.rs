//! TLS to an `https://` admin URL (`admin.ssl.enabled`): a blocking rustls client (the
//! crate the broker already links), trusting the PEM CA bundle of `--admin-ca-file` or else
//! the system's bundle.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// Where Debian, Fedora and macOS keep the system CA bundle, tried in order.
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// A byte stream to the admin API, plain or TLS.
pub trait HttpStream: Read + Write {}
impl<T: Read + Write> HttpStream for T {}

/// Wraps `tcp` in TLS to `host` (the URL's host: a name or an IP literal), checking the
/// server's certificate against `ca_file` or the system bundle.
pub fn connect(
    tcp: TcpStream,
    host: &str,
    ca_file: Option<&Path>,
) -> anyhow::Result<Box<dyn HttpStream>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS setup")?
        .with_root_certificates(roots(ca_file)?)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .with_context(|| format!("{host:?} is not a host name to check a certificate against"))?;
    let connection = ClientConnection::new(Arc::new(config), name).context("TLS setup")?;
    Ok(Box::new(StreamOwned::new(connection, tcp)))
}

fn roots(ca_file: Option<&Path>) -> anyhow::Result<RootCertStore> {
    let path = match ca_file {
        Some(path) => path,
        None => SYSTEM_CA_BUNDLES
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .context("no system CA bundle found: pass --admin-ca-file FILE (PEM)")?,
    };
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the CA bundle {}", path.display()))?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        bail!("{}: no usable CA certificate in it", path.display());
    }
    Ok(roots)
}
