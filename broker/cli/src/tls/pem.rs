//! Reading the PEM files the `ssl.*` properties name: CA bundles, certificate chains and
//! private keys, each file bounded by [`PEM_FILE_BYTES_MAX`] and checked to be PEM (a JKS or
//! PKCS12 store gets an error saying so), every error naming the property and the file.
//! Encrypted private keys are refused with the command that decrypts them.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, bail};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::properties::{FileProperty, Identity};

/// Largest PEM file read, in bytes: the system CA bundle is about 220 KB, a key and chain a
/// few KB.
pub const PEM_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// What a PEM file should hold, for the error that says how to make one.
#[derive(Clone, Copy)]
enum Holds {
    Certificates,
    Key,
    KeyAndChain,
}

impl Holds {
    const fn conversion(self) -> &'static str {
        match self {
            Self::Certificates => {
                "export the CA certificates as PEM (`keytool -exportcert -rfc -keystore FILE -alias CA`, or `openssl pkcs12 -in FILE -nokeys -out ca.pem`)"
            }
            Self::Key => "convert the key to PEM (`openssl pkey -in FILE -out key.pem`)",
            Self::KeyAndChain => {
                "convert the keystore to one PEM file with the key and the chain (`openssl pkcs12 -in FILE -nodes -out keystore.pem`; for JKS first `keytool -importkeystore -deststoretype PKCS12`)"
            }
        }
    }
}

/// The bytes of `path`, which must be PEM; `named` says which property gave it.
fn read(path: &Path, named: &str, holds: Holds) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path).with_context(|| format!("{named}: opening it"))?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{named}: reading it"))?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        bail!("{named}: larger than PEM_FILE_BYTES_MAX ({PEM_FILE_BYTES_MAX} bytes)");
    }
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        bail!(
            "{named}: not a PEM file (a JKS or PKCS12 store?): sluice reads PEM only; {}",
            holds.conversion()
        );
    }
    Ok(bytes)
}

/// The certificates of a PEM bundle, in file order.
fn certificates(bytes: &[u8], named: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{named}: reading its PEM certificates"))?;
    if certs.is_empty() {
        bail!("{named}: no certificate in it");
    }
    Ok(certs)
}

/// The trusted CAs of the bundle at `path`.
pub fn roots(path: &Path, named: &str) -> anyhow::Result<RootCertStore> {
    let bytes = read(path, named, Holds::Certificates)?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates(&bytes, named)?);
    if added == 0 {
        bail!("{named}: no usable CA certificate in it");
    }
    Ok(roots)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1, unencrypted).
fn private_key(
    bytes: &[u8],
    named: &str,
    key_password_given: bool,
) -> anyhow::Result<PrivateKeyDer<'static>> {
    if let Ok(key) = PrivateKeyDer::from_pem_slice(bytes) {
        return Ok(key);
    }
    let text = String::from_utf8_lossy(bytes);
    if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        let password = if key_password_given {
            "ssl.key.password is given, but sluice cannot decrypt keys"
        } else {
            "sluice cannot decrypt keys"
        };
        bail!(
            "{named}: the private key is encrypted and {password}: decrypt it to a file only you can read (`openssl pkey -in FILE -out key.pem`, then chmod 600 key.pem)"
        );
    }
    bail!("{named}: no private key in it (expected a PEM PRIVATE KEY block)")
}

/// The client's certificate chain and private key.
pub fn identity(
    identity: &Identity,
    key_password_given: bool,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    match identity {
        Identity::Keystore(keystore) => {
            let named = keystore.to_string();
            let bytes = read(&keystore.path, &named, Holds::KeyAndChain)?;
            let key = private_key(&bytes, &named, key_password_given)?;
            Ok((certificates(&bytes, &named)?, key))
        }
        Identity::Pair { certificate, key } => {
            let chain = file_certificates(certificate)?;
            let named = key.to_string();
            let bytes = read(&key.path, &named, Holds::Key)?;
            Ok((chain, private_key(&bytes, &named, key_password_given)?))
        }
    }
}

fn file_certificates(file: &FileProperty) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let named = file.to_string();
    let bytes = read(&file.path, &named, Holds::Certificates)?;
    certificates(&bytes, &named)
}
