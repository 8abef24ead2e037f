//! `ssl.endpoint.identification.algorithm=` (empty): the broker's certificate chain is
//! checked as always (a CA the client trusts, dates, key usage, signatures), only the check
//! that it names the host connected to is skipped, as Kafka's and librdkafka's clients do.

use std::sync::Arc;

use anyhow::Context;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

/// A verifier that accepts what rustls's WebPKI verifier accepts, whatever the host name.
pub fn without_host_name(
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
) -> anyhow::Result<Arc<dyn ServerCertVerifier>> {
    let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .context("TLS setup")?;
    Ok(Arc::new(NoHostNameCheck(inner)))
}

#[derive(Debug)]
struct NoHostNameCheck(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoHostNameCheck {
    /// The WebPKI verifier checks the chain first and the name last, so a name error means
    /// the chain passed.
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let verified =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
