//! The CLI's TLS client, rustls with the ring provider (as the broker links it): one
//! `ClientConfig` per command from the `ssl.*` client properties (`crate::properties`), for
//! the Kafka client (`security.protocol` SSL or SASL_SSL) and the admin API client
//! (`https://`). It trusts the CA bundle the properties name (else the caller's fallback,
//! else the system's), presents a client certificate when one is given, and checks that the
//! broker's certificate names the host unless `ssl.endpoint.identification.algorithm` is
//! empty (`tls/verify.rs`). `tls/pem.rs` reads the PEM files, bounded, each error naming the
//! property and the file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::properties::{Identity, TlsProperties};

mod pem;
mod verify;

/// Where Debian, Fedora and macOS keep the system CA bundle, tried in order.
const SYSTEM_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// A TLS connection over a blocking TCP stream (its timeouts apply to TLS reads and writes).
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A byte stream to the admin API, plain or TLS.
pub trait HttpStream: Read + Write {}
impl<T: Read + Write> HttpStream for T {}

/// The rustls config of `props`; `fallback_ca` (`--admin-ca-file`) is trusted when the
/// properties name no CA bundle, and the system's bundle when neither does.
pub fn client_config(
    props: &TlsProperties,
    fallback_ca: Option<&Path>,
) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(roots(props, fallback_ca)?);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS setup")?;
    let builder = if props.check_hostname {
        builder.with_root_certificates(roots)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(verify::without_host_name(roots, provider)?)
    };
    let config = match &props.identity {
        None => builder.with_no_client_auth(),
        Some(identity) => {
            let (chain, key) = pem::identity(identity, props.key_password_given)?;
            builder
                .with_client_auth_cert(chain, key)
                .with_context(|| format!("the client certificate of {}", describe(identity)))?
        }
    };
    Ok(Arc::new(config))
}

fn describe(identity: &Identity) -> String {
    match identity {
        Identity::Keystore(keystore) => keystore.to_string(),
        Identity::Pair { certificate, key } => format!("{certificate} and {key}"),
    }
}

/// The CAs to trust: the properties' bundle, else `fallback`, else the system's.
fn roots(props: &TlsProperties, fallback: Option<&Path>) -> anyhow::Result<RootCertStore> {
    if let Some(ca) = &props.ca {
        return pem::roots(&ca.path, &ca.to_string());
    }
    if let Some(path) = fallback {
        return pem::roots(path, &format!("--admin-ca-file {}", path.display()));
    }
    let system = SYSTEM_CA_BUNDLES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .context("no CA bundle given and no system CA bundle found: set ssl.ca.location (or ssl.truststore.location) to the PEM bundle of the CA that signed the broker's certificate")?;
    pem::roots(
        system,
        &format!("the system CA bundle {}", system.display()),
    )
}

/// TLS over `tcp` to `host` (a name or an IP literal: what the certificate is checked
/// against), the handshake done before it returns so its failures surface here.
pub fn connect(
    mut tcp: TcpStream,
    host: &str,
    config: Arc<ClientConfig>,
) -> anyhow::Result<TlsStream> {
    let name = ServerName::try_from(host.to_owned())
        .with_context(|| format!("{host:?} is not a host name to check a certificate against"))?;
    let mut connection = ClientConnection::new(config, name).context("TLS setup")?;
    while connection.is_handshaking() {
        connection.complete_io(&mut tcp).map_err(|e| {
            if is_closed(&e) {
                return anyhow::anyhow!("{e} ({CLOSED_IN_HANDSHAKE})");
            }
            anyhow::Error::new(e)
        })?;
    }
    Ok(StreamOwned::new(connection, tcp))
}

const CLOSED_IN_HANDSHAKE: &str = "the broker closed the connection during the TLS handshake: is this an SSL or SASL_SSL listener?";

fn is_closed(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | UnexpectedEof
    )
}

/// What to do about a TLS failure in `e`, if it is one we can explain.
pub fn hint(e: &anyhow::Error) -> Option<&'static str> {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
    match rustls_error(e)? {
        Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => Some(
            "the broker's certificate is not signed by a CA you trust: set ssl.ca.location (or ssl.truststore.location) to the PEM bundle of the CA that signed it",
        ),
        Error::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            Some(
                "the broker's certificate does not name the host connected to: use a name it has, or set ssl.endpoint.identification.algorithm= (empty) to skip the host name check",
            )
        }
        Error::AlertReceived(Alert::CertificateRequired) => Some(
            "the broker requires a client certificate: set ssl.certificate.location and ssl.key.location, or ssl.keystore.location",
        ),
        Error::AlertReceived(
            Alert::BadCertificate | Alert::UnknownCA | Alert::CertificateUnknown,
        ) => Some(
            "the broker refused the client certificate: is it signed by a CA of the broker's ssl.truststore.location?",
        ),
        _ => None,
    }
}

/// The rustls error in `e`'s chain (rustls hands it over inside an `io::Error`).
fn rustls_error(e: &anyhow::Error) -> Option<&rustls::Error> {
    e.chain().find_map(|cause| {
        cause.downcast_ref::<rustls::Error>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()?
                .get_ref()?
                .downcast_ref::<rustls::Error>()
        })
    })
}
