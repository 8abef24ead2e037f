//! Kafka client properties, for every command that talks to a broker or to an `https://`
//! admin API: `-X KEY=VALUE` (repeatable, as kcat's) and `--command-config FILE` (a Java
//! properties file, as Kafka's scripts take it; `properties/java.rs`), read and checked once
//! into [`ClientProperties`]. Each key is one row of the table in `properties/keys.rs`: used
//! (with its value check), ignored with a warning (client tuning that changes nothing for a
//! one-request-at-a-time command), or refused with the reason; any other key is refused by
//! name.
//!
//! Later wins: the file's lines in order, then each `-X` in order. Values are trimmed, as
//! Kafka's clients trim them. `client/settings.rs` falls back to `--user`,
//! `SLUICE_PASSWORD` and `--sasl-mechanism` for what the properties leave unset.
//! `sasl.jaas.config` (`properties/jaas.rs`) stands for `sasl.username` and `sasl.password`.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, anyhow, bail};

mod jaas;
mod java;
mod keys;

use keys::{check, endpoint_identification, is_secret};

/// Largest `--command-config` file read, in bytes: a client properties file is a few
/// hundred bytes; this leaves room for comments and a long `sasl.jaas.config`.
pub const COMMAND_CONFIG_BYTES_MAX: u64 = 64 * 1024;
/// Most properties taken from `-X` and `--command-config` together (Kafka's client has
/// about 150 keys; a file that names more is not a client properties file).
pub const PROPERTIES_MAX: usize = 256;

/// `-X` and `--command-config`, on every command that talks to a broker or admin API.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Client properties (TLS, SASL)")]
pub struct PropertyArgs {
    /// A Kafka client property KEY=VALUE (repeatable; as kcat's -X).
    ///
    /// Wins over --command-config, which wins over --user, SLUICE_PASSWORD and
    /// --sasl-mechanism. Keys: security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL);
    /// ssl.ca.location or ssl.truststore.location (the PEM CA bundle, ssl.truststore.type=PEM;
    /// default: the system's); for mutual TLS ssl.certificate.location and ssl.key.location,
    /// or ssl.keystore.location (one PEM file, key and chain; ssl.keystore.type=PEM);
    /// ssl.endpoint.identification.algorithm (https, the default: check the host name; empty:
    /// don't); sasl.mechanism or sasl.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
    /// sasl.username and sasl.password, or sasl.jaas.config (PlainLoginModule or
    /// ScramLoginModule with username="..." password="..."); client.id. Unknown keys are
    /// errors; client tuning keys (request.timeout.ms, ...) are ignored with a warning. A
    /// value given here shows in `ps`: keep passwords in --command-config or SLUICE_PASSWORD.
    /// The admin API commands use the ssl.* keys for an https:// --admin-url.
    #[arg(
        short = 'X',
        long = "property",
        value_name = "KEY=VALUE",
        global = true
    )]
    pub properties: Vec<String>,
    /// A Java properties file of Kafka client properties (as the Kafka scripts'
    /// --command-config): key=value lines, # comments; the keys of -X.
    #[arg(
        long,
        global = true,
        env = "SLUICE_COMMAND_CONFIG",
        value_name = "FILE"
    )]
    pub command_config: Option<PathBuf>,
    /// The properties, once read.
    #[arg(skip)]
    loaded: OnceLock<ClientProperties>,
}

impl PropertyArgs {
    /// The properties, read and checked on the first call (warnings go to stderr then).
    pub fn load(&self) -> anyhow::Result<&ClientProperties> {
        if let Some(loaded) = self.loaded.get() {
            return Ok(loaded);
        }
        let file = match &self.command_config {
            Some(path) => Some((path.as_path(), read_command_config(path)?)),
            None => None,
        };
        let file = file.as_ref().map(|(path, text)| (*path, text.as_str()));
        let (properties, warnings) = ClientProperties::parse(&self.properties, file)?;
        for warning in warnings {
            eprintln!("warning: {warning}");
        }
        Ok(self.loaded.get_or_init(|| properties))
    }
}

/// The text of a `--command-config` file, at most [`COMMAND_CONFIG_BYTES_MAX`].
fn read_command_config(path: &Path) -> anyhow::Result<String> {
    let shown = path.display();
    let file = std::fs::File::open(path).with_context(|| format!("--command-config {shown}"))?;
    let mut bytes = Vec::new();
    file.take(COMMAND_CONFIG_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading --command-config {shown}"))?;
    if bytes.len() as u64 > COMMAND_CONFIG_BYTES_MAX {
        bail!(
            "--command-config {shown} is larger than COMMAND_CONFIG_BYTES_MAX ({COMMAND_CONFIG_BYTES_MAX} bytes): not a client properties file?"
        );
    }
    String::from_utf8(bytes).map_err(|_| anyhow!("--command-config {shown} is not UTF-8 text"))
}

/// Where a property was given, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `-X KEY=VALUE`.
    Flag,
    /// A line of the `--command-config` file.
    File { path: PathBuf, line: usize },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag => f.write_str("from -X"),
            Self::File { path, line } => write!(f, "in {} line {line}", path.display()),
        }
    }
}

/// One property as given.
#[derive(Clone)]
pub struct Entry {
    pub key: String,
    value: String,
    pub origin: Origin,
}

impl Entry {
    /// `key=value (origin)`, or `key (origin)` for a secret.
    pub fn describe(&self) -> String {
        if is_secret(&self.key) {
            format!("{} ({})", self.key, self.origin)
        } else {
            format!("{}={} ({})", self.key, self.value, self.origin)
        }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Kafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's names, any case (librdkafka writes them in lower case).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err("expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL".into()),
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// The connection is TLS.
    pub const fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// The connection logs in with SASL.
    pub const fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// A file a property names, and which property, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProperty {
    pub path: PathBuf,
    pub key: String,
    pub origin: Origin,
}

impl fmt::Display for FileProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={} ({})", self.key, self.path.display(), self.origin)
    }
}

/// The client's own certificate, for mutual TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Kafka's `ssl.keystore.location` (PEM): the private key and the chain in one file.
    Keystore(FileProperty),
    /// librdkafka's `ssl.certificate.location` (the chain) and `ssl.key.location`.
    Pair {
        certificate: FileProperty,
        key: FileProperty,
    },
}

/// The TLS part of the properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProperties {
    /// The CA bundle (`ssl.ca.location` or `ssl.truststore.location`, whichever came last);
    /// `None`: the system's.
    pub ca: Option<FileProperty>,
    /// The client certificate, if any.
    pub identity: Option<Identity>,
    /// Check the broker's certificate names the host connected to.
    pub check_hostname: bool,
    /// `ssl.key.password` is given (the key may be encrypted).
    pub key_password_given: bool,
}

/// The SASL part of the properties (`None`: not given).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SaslProperties {
    pub mechanism: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl fmt::Debug for SaslProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslProperties")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "..."))
            .finish()
    }
}

/// The client properties, checked; the ignored ones dropped.
#[derive(Debug, Clone, Default)]
pub struct ClientProperties {
    /// In precedence order: the file's, then the flags'; the last of a key wins.
    entries: Vec<Entry>,
}

impl ClientProperties {
    /// Checks the `-X` values and the `--command-config` text (its path, for messages);
    /// returns the properties and the warnings about ignored keys.
    pub fn parse(
        flags: &[String],
        file: Option<(&Path, &str)>,
    ) -> anyhow::Result<(Self, Vec<String>)> {
        let mut entries = Vec::new();
        if let Some((path, text)) = file {
            let lines = java::parse(text)
                .map_err(|e| anyhow!("--command-config {}: {e}", path.display()))?;
            entries.extend(lines.into_iter().map(|line| Entry {
                key: line.key.trim().to_owned(),
                value: line.value.trim().to_owned(),
                origin: Origin::File {
                    path: path.to_owned(),
                    line: line.number,
                },
            }));
        }
        for flag in flags {
            let (key, value) = flag
                .split_once('=')
                .ok_or_else(|| anyhow!("-X {flag:?}: expected KEY=VALUE"))?;
            entries.push(Entry {
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
                origin: Origin::Flag,
            });
        }
        if entries.len() > PROPERTIES_MAX {
            bail!(
                "{} client properties: more than PROPERTIES_MAX ({PROPERTIES_MAX})",
                entries.len()
            );
        }
        let mut warnings = Vec::new();
        let mut kept = Vec::with_capacity(entries.len());
        for entry in entries {
            match check(&entry)? {
                Some(warning) => warnings.push(warning),
                None => kept.push(entry),
            }
        }
        Ok((Self { entries: kept }, warnings))
    }

    /// The last given of these keys (they are synonyms).
    fn last(&self, keys: &[&str]) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| keys.contains(&e.key.as_str()))
    }

    /// `security.protocol`, if given, and the entry that gave it.
    pub fn security_protocol(&self) -> Option<(SecurityProtocol, &Entry)> {
        let entry = self.last(&["security.protocol"])?;
        let protocol = SecurityProtocol::parse(&entry.value).ok()?;
        Some((protocol, entry))
    }

    /// The first property whose key starts with `prefix` (`ssl.`, `sasl.`).
    pub fn first_with_prefix(&self, prefix: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.key.starts_with(prefix))
    }

    /// `client.id`, if given.
    pub fn client_id(&self) -> Option<&str> {
        self.last(&["client.id"]).map(|e| e.value.as_str())
    }

    /// The `ssl.*` properties.
    pub fn tls(&self) -> anyhow::Result<TlsProperties> {
        let check_hostname = self
            .last(&["ssl.endpoint.identification.algorithm"])
            .is_none_or(|e| endpoint_identification(&e.value).unwrap_or(true));
        Ok(TlsProperties {
            ca: self.file(&["ssl.ca.location", "ssl.truststore.location"]),
            identity: self.identity()?,
            check_hostname,
            key_password_given: self.last(&["ssl.key.password"]).is_some(),
        })
    }

    fn file(&self, keys: &[&str]) -> Option<FileProperty> {
        self.last(keys).map(|e| FileProperty {
            path: PathBuf::from(&e.value),
            key: e.key.clone(),
            origin: e.origin.clone(),
        })
    }

    fn identity(&self) -> anyhow::Result<Option<Identity>> {
        let keystore = self.file(&["ssl.keystore.location"]);
        let certificate = self.file(&["ssl.certificate.location"]);
        let key = self.file(&["ssl.key.location"]);
        match (keystore, certificate, key) {
            (None, None, None) => Ok(None),
            (Some(keystore), None, None) => Ok(Some(Identity::Keystore(keystore))),
            (None, Some(certificate), Some(key)) => Ok(Some(Identity::Pair { certificate, key })),
            (None, Some(certificate), None) => {
                bail!("{certificate} needs ssl.key.location (the certificate's private key)")
            }
            (None, None, Some(key)) => {
                bail!("{key} needs ssl.certificate.location (the certificate chain it signs for)")
            }
            (Some(keystore), _, _) => bail!(
                "{keystore} and ssl.certificate.location/ssl.key.location both give a client certificate: keep one"
            ),
        }
    }

    /// The `sasl.*` properties; `sasl.jaas.config` gives the user and password unless a later
    /// `sasl.username`/`sasl.password` does.
    pub fn sasl(&self) -> anyhow::Result<SaslProperties> {
        let mechanism = self
            .last(&["sasl.mechanism", "sasl.mechanisms"])
            .map(|e| e.value.to_ascii_uppercase());
        let from = |key: &str, pick: fn(jaas::JaasLogin) -> String| {
            let entry = self.last(&[key, "sasl.jaas.config"])?;
            if entry.key != "sasl.jaas.config" {
                return Some(Ok(entry.value.clone()));
            }
            Some(
                jaas::parse(&entry.value)
                    .map(pick)
                    .map_err(|e| anyhow!("sasl.jaas.config ({}): {e}", entry.origin)),
            )
        };
        Ok(SaslProperties {
            mechanism,
            username: from("sasl.username", |l| l.username).transpose()?,
            password: from("sasl.password", |l| l.password).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests;
