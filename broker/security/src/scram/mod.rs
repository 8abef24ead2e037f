//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them.
//!
//! - this file: [`ScramMechanism`] (Kafka's names, type bytes and iteration bounds) and
//!   [`ScramCredential`], derived exactly as Kafka's `ScramFormatter` derives it:
//!   `SaltedPassword = Hi(password, salt, i)`, `ClientKey = HMAC(SaltedPassword, "Client Key")`,
//!   `StoredKey = H(ClientKey)`, `ServerKey = HMAC(SaltedPassword, "Server Key")`. The
//!   password is its UTF-8 bytes (Kafka's `normalize` does no SASLprep).
//! - [`messages`]: strict parsers for the client-first and client-final messages.
//! - [`server`]: [`ScramServer`], the server side of one exchange as a state machine.
//! - [`client`]: [`ScramClient`], the client side, for Sluice's own tools.

pub mod client;
pub mod messages;
pub mod server;

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::limits;
use crate::rng::{SecurityRng, secure_random_string};

pub use client::ScramClient;
pub use server::{CredentialLookup, ScramServer, TokenLogin};

/// A SCRAM mechanism Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (Kafka type 1).
    Sha256,
    /// `SCRAM-SHA-512` (Kafka type 2).
    Sha512,
}

impl ScramMechanism {
    /// Both, in Kafka's type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name (`SCRAM-SHA-256`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's `ScramMechanism.type()`, the mechanism code of
    /// DescribeUserScramCredentials / AlterUserScramCredentials (0 is UNKNOWN).
    pub const fn type_code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    /// The mechanism with Kafka's type code `code`.
    pub const fn from_type_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(Self::Sha256),
            2 => Some(Self::Sha512),
            _ => None,
        }
    }

    /// The mechanism named `name` (exact, as Kafka's `forMechanismName`).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Output length of the hash, in bytes (32 or 64): the length of keys and proofs.
    pub const fn hash_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => Sha256::digest(data).to_vec(),
            Self::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `HMAC(key, data)`.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            Self::Sha256 => hmac_once::<Hmac<Sha256>>(key, data),
            Self::Sha512 => hmac_once::<Hmac<Sha512>>(key, data),
        }
    }

    /// `Hi(str, salt, i)` of RFC 5802 (PBKDF2 with HMAC as the PRF, one block).
    pub fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Self::Sha256 => hi_with::<Hmac<Sha256>>(password, salt, iterations),
            Self::Sha512 => hi_with::<Hmac<Sha512>>(password, salt, iterations),
        }
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn hmac_once<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac =
        <M as hmac::digest::KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hi_with<M: Mac + hmac::digest::KeyInit + Clone>(
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    assert!(iterations >= 1, "Hi with zero iterations");
    let keyed = <M as hmac::digest::KeyInit>::new_from_slice(password)
        .expect("HMAC takes keys of any length");
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut prev = mac.finalize().into_bytes().to_vec();
    let mut result = prev.clone();
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&prev);
        prev = mac.finalize().into_bytes().to_vec();
        result.iter_mut().zip(&prev).for_each(|(r, u)| *r ^= u);
    }
    result
}

/// A credential that cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// Iterations outside Kafka's bounds for the mechanism.
    #[error(
        "{mechanism} iterations {iterations} outside {min}..={max} (SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX)",
        min = limits::SCRAM_ITERATIONS_MIN,
        max = limits::SCRAM_ITERATIONS_MAX
    )]
    Iterations {
        /// The mechanism.
        mechanism: ScramMechanism,
        /// Iterations asked for.
        iterations: u32,
    },
    /// Salt empty or over its limit.
    #[error(
        "salt of {0} bytes outside {min}..={max} bytes (SCRAM_SALT_BYTES_MIN..=SCRAM_SALT_BYTES_MAX)",
        min = limits::SCRAM_SALT_BYTES_MIN,
        max = limits::SCRAM_SALT_BYTES_MAX
    )]
    Salt(usize),
    /// A key or salted password whose length is not the mechanism's hash length.
    #[error("{what} of {len} bytes; {mechanism} needs {want}")]
    KeyLength {
        /// Which field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The hash length.
        want: usize,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
}

/// What the broker stores for one user and mechanism: never the password. Exactly Kafka's
/// `ScramCredential` (salt, StoredKey, ServerKey, iterations).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The mechanism whose hash the keys were made with.
    pub mechanism: ScramMechanism,
    /// The salt given to Hi.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`: checks the client's proof.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`: signs the server-final message.
    pub server_key: Vec<u8>,
    /// Hi's iteration count.
    pub iterations: u32,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys let anyone impersonate the server to the client: keep them out of logs.
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("salt_bytes", &self.salt.len())
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// Derives the credential of `password` with the given salt (Kafka's
    /// `generateCredential(salt, saltedPassword, iterations)` after `saltedPassword`).
    pub fn derive(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_params(mechanism, salt, iterations)?;
        let salted = mechanism.hi(password.as_bytes(), salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// A new credential for `password` with a fresh salt: Kafka's salt, the UTF-8 bytes of
    /// a 130-bit base-36 random string.
    pub fn generate(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
        rng: &mut dyn SecurityRng,
    ) -> Result<Self, CredentialError> {
        let salt = secure_random_string(rng).into_bytes();
        Self::derive(mechanism, password, &salt, iterations)
    }

    /// The credential from a salted password, as AlterUserScramCredentials carries it
    /// (the client sends salt and SaltedPassword, never the password).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Result<Self, CredentialError> {
        check_params(mechanism, salt, iterations)?;
        check_key(mechanism, "salted password", salted_password.len())?;
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Ok(Self {
            mechanism,
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        })
    }

    /// Checks a credential read back from storage: Kafka's bounds, key lengths.
    pub fn validate(&self) -> Result<(), CredentialError> {
        check_params(self.mechanism, &self.salt, self.iterations)?;
        check_key(self.mechanism, "stored key", self.stored_key.len())?;
        check_key(self.mechanism, "server key", self.server_key.len())
    }

    /// Whether `password` is this credential's password: recomputes StoredKey with the
    /// stored salt and iterations and compares in constant time. Used by PLAIN, so one
    /// user store serves PLAIN and SCRAM.
    pub fn verify_password(&self, password: &str) -> bool {
        let salted = self
            .mechanism
            .hi(password.as_bytes(), &self.salt, self.iterations);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        bool::from(stored_key.ct_eq(&self.stored_key))
    }
}

fn check_params(
    mechanism: ScramMechanism,
    salt: &[u8],
    iterations: u32,
) -> Result<(), CredentialError> {
    if !(limits::SCRAM_ITERATIONS_MIN..=limits::SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(CredentialError::Iterations {
            mechanism,
            iterations,
        });
    }
    if !(limits::SCRAM_SALT_BYTES_MIN..=limits::SCRAM_SALT_BYTES_MAX).contains(&salt.len()) {
        return Err(CredentialError::Salt(salt.len()));
    }
    Ok(())
}

fn check_key(
    mechanism: ScramMechanism,
    what: &'static str,
    len: usize,
) -> Result<(), CredentialError> {
    if len != mechanism.hash_len() {
        return Err(CredentialError::KeyLength {
            what,
            len,
            want: mechanism.hash_len(),
            mechanism,
        });
    }
    Ok(())
}

/// Kafka's `ScramFormatter.saslName`: `=` becomes `=3D` and `,` becomes `=2C`.
pub fn sasl_name(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn mechanism_names_and_codes_are_kafkas() {
        for (m, name, code, len) in [
            (ScramMechanism::Sha256, "SCRAM-SHA-256", 1, 32),
            (ScramMechanism::Sha512, "SCRAM-SHA-512", 2, 64),
        ] {
            assert_eq!((m.name(), m.type_code(), m.hash_len()), (name, code, len));
            assert_eq!(ScramMechanism::from_name(name), Some(m));
            assert_eq!(ScramMechanism::from_type_code(code), Some(m));
        }
        assert_eq!(ScramMechanism::from_type_code(0), None);
        assert_eq!(ScramMechanism::from_name("scram-sha-256"), None);
    }

    #[test]
    fn hi_matches_pbkdf2_vectors() {
        // RFC 7914 section 11, PBKDF2-HMAC-SHA256 ("passwd", "salt", c = 1), first 32 bytes.
        let out = ScramMechanism::Sha256.hi(b"passwd", b"salt", 1);
        assert_eq!(
            hex(&out),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        );
        // ("password", "salt", 4096): the value of Python's hashlib.pbkdf2_hmac for the same input.
        let out = ScramMechanism::Sha256.hi(b"password", b"salt", 4096);
        assert_eq!(
            hex(&out),
            "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a"
        );
    }

    #[test]
    fn credential_bounds_are_kafkas() {
        let m = ScramMechanism::Sha256;
        assert!(ScramCredential::derive(m, "p", b"s", 4096).is_ok());
        assert!(ScramCredential::derive(m, "p", b"s", 16384).is_ok());
        let low = ScramCredential::derive(m, "p", b"s", 4095).unwrap_err();
        assert!(low.to_string().contains("SCRAM_ITERATIONS_MIN"), "{low}");
        assert!(ScramCredential::derive(m, "p", b"s", 16385).is_err());
        assert_eq!(
            ScramCredential::derive(m, "p", b"", 4096),
            Err(CredentialError::Salt(0))
        );
        let short = ScramCredential::from_salted_password(m, &[0; 31], b"s", 4096);
        assert!(matches!(
            short,
            Err(CredentialError::KeyLength { len: 31, .. })
        ));
    }

    #[test]
    fn verify_password_recomputes_stored_key() {
        let mut rng = SplitMix64::new(1);
        let c =
            ScramCredential::generate(ScramMechanism::Sha512, "pencil", 4096, &mut rng).unwrap();
        assert!(
            c.salt.iter().all(u8::is_ascii_alphanumeric),
            "Kafka's salt shape"
        );
        assert!(c.verify_password("pencil"));
        assert!(!c.verify_password("pencil "));
        assert!(!c.verify_password(""));
        assert!(c.validate().is_ok());
        assert!(
            !format!("{c:?}").contains("stored_key"),
            "keys stay out of Debug"
        );
    }

    #[test]
    fn sasl_name_escapes() {
        assert_eq!(sasl_name("a=b,c"), "a=3Db=2Cc");
    }

    pub(crate) fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
