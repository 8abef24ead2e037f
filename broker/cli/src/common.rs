//! What every operator command shares: where the broker is, how to reach it (the client
//! properties of `crate::properties`, `--user`), the output format, printing a JSON document
//! or its text rendering, and Metadata/ListOffsets look-ups.

use std::collections::BTreeMap;
use std::io::Write as _;

use anyhow::bail;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

use crate::client::{Client, Login, Refused, Settings, error_name};
use crate::properties::PropertyArgs;

/// Output format of the operator commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Text,
    /// One JSON document for scripts.
    Json,
}

/// Kafka's ListOffsets sentinels.
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;

/// `--brokers`, `--output`, the client properties and `--user`, on every command that talks
/// to a broker.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Brokers to talk to (host:port, comma-separated; the first reachable one is used).
    #[arg(
        long,
        global = true,
        env = "SLUICE_BROKERS",
        default_value = "127.0.0.1:9092"
    )]
    pub brokers: String,
    /// Output format: text for people, json for scripts.
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// SASL login (`--user`, `--sasl-mechanism`; the password from SLUICE_PASSWORD).
    #[command(flatten)]
    pub login: Login,
    /// `-X KEY=VALUE` and `--command-config FILE`: TLS and SASL, as Kafka's clients take them.
    #[command(flatten)]
    pub properties: PropertyArgs,
}

/// Where the admin HTTP API is when no flag or variable says (the default `admin.listen`).
pub const DEFAULT_ADMIN_URL: &str = "http://127.0.0.1:9644";

/// `--admin-url`, `--admin-user` and `--admin-ca-file`: where the admin HTTP API is and who
/// calls it. [`Admin`] adds the client properties; `consume` takes these alone and shares its
/// `Common` properties.
#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// The broker's admin HTTP API (`admin.listen`) [default: http://127.0.0.1:9644].
    /// `--admin` and SLUICE_ADMIN are older names for the same thing.
    #[arg(
        long = "admin-url",
        visible_alias = "admin",
        global = true,
        env = "SLUICE_ADMIN_URL",
        value_name = "URL"
    )]
    admin_url: Option<String>,
    /// Log in to the admin API as this broker user (HTTP Basic, for `admin.auth = basic`);
    /// the password is read from SLUICE_ADMIN_PASSWORD, never from a flag.
    #[arg(
        long = "admin-user",
        global = true,
        env = "SLUICE_ADMIN_USER",
        value_name = "USER"
    )]
    admin_user: Option<String>,
    /// The PEM CA bundle that checks an https:// admin URL's certificate [default: the
    /// system's bundle]; -X ssl.ca.location (or ssl.truststore.location) wins over it.
    #[arg(
        long = "admin-ca-file",
        global = true,
        env = "SLUICE_ADMIN_CA_FILE",
        value_name = "FILE"
    )]
    admin_ca_file: Option<std::path::PathBuf>,
}

/// The admin API flags and the client properties (their `ssl.*` keys, for `https://`), on
/// every command that talks to the admin HTTP API (where Kafka has no API).
#[derive(Debug, Clone, clap::Args)]
pub struct Admin {
    #[command(flatten)]
    args: AdminArgs,
    /// `-X KEY=VALUE` and `--command-config FILE`: the ssl.* keys reach an https:// admin API.
    #[command(flatten)]
    properties: PropertyArgs,
    /// The TLS config of an `https://` URL, made on the first request.
    #[arg(skip)]
    tls: std::sync::OnceLock<std::sync::Arc<rustls::ClientConfig>>,
}

/// Where the admin API is, from `--admin-url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminEndpoint {
    /// `host:port` to connect to (and to send as `Host`).
    pub addr: String,
    /// The host alone (brackets of an IPv6 literal removed): TLS checks the certificate
    /// against it.
    pub host: String,
    /// `https://`.
    pub tls: bool,
}

/// The environment variable `--admin-user`'s password is read from.
pub const ADMIN_PASSWORD_ENV: &str = "SLUICE_ADMIN_PASSWORD";

impl Admin {
    /// The admin flags with the client properties of another set of flags (`consume`'s).
    pub fn with_properties(args: AdminArgs, properties: PropertyArgs) -> Self {
        Self {
            args,
            properties,
            tls: std::sync::OnceLock::new(),
        }
    }

    /// The URL from the flag, SLUICE_ADMIN_URL, the older SLUICE_ADMIN, or the default.
    pub fn url(&self) -> String {
        self.args
            .admin_url
            .clone()
            .or_else(|| std::env::var("SLUICE_ADMIN").ok())
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_owned())
    }

    /// Where to connect (`http://` or `https://`; a bare `host:port` is plain HTTP).
    pub fn endpoint(&self) -> anyhow::Result<AdminEndpoint> {
        admin_endpoint(&self.url())
    }

    /// The TLS config for an https:// URL: the properties' `ssl.*` keys, with
    /// `--admin-ca-file` (then the system's bundle) when they name no CA bundle. Their other
    /// keys (`security.protocol`, `sasl.*`) are for the Kafka listeners.
    pub fn tls_config(&self) -> anyhow::Result<std::sync::Arc<rustls::ClientConfig>> {
        if let Some(config) = self.tls.get() {
            return Ok(config.clone());
        }
        let props = self.properties.load()?.tls()?;
        let config = crate::tls::client_config(&props, self.args.admin_ca_file.as_deref())?;
        Ok(self.tls.get_or_init(|| config).clone())
    }
}

impl Admin {
    /// The `Authorization` header value: HTTP Basic for `--admin-user` (password from
    /// SLUICE_ADMIN_PASSWORD), else a bearer of SLUICE_ADMIN_TOKEN (`admin.token`), else none.
    pub fn authorization(&self) -> anyhow::Result<Option<String>> {
        if let Some(user) = self.args.admin_user.as_deref().filter(|u| !u.is_empty()) {
            let password = std::env::var(ADMIN_PASSWORD_ENV).map_err(|_| {
                anyhow::anyhow!("--admin-user {user}: put the password in {ADMIN_PASSWORD_ENV}")
            })?;
            return Ok(Some(basic_authorization(user, &password)));
        }
        Ok(std::env::var("SLUICE_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}")))
    }
}

/// `Basic base64(user:password)` (RFC 7617).
fn basic_authorization(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {encoded}")
}

fn admin_endpoint(url: &str) -> anyhow::Result<AdminEndpoint> {
    let url = url.trim();
    let (tls, rest) = match url.strip_prefix("https://") {
        Some(rest) => (true, rest),
        None => (false, url.strip_prefix("http://").unwrap_or(url)),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || rest.contains("://") {
        bail!("--admin-url {url:?}: expected http://HOST:PORT or https://HOST:PORT");
    }
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.contains(']'));
    let addr = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:{}", if tls { 443 } else { 80 })
    };
    let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Ok(AdminEndpoint { addr, host, tls })
}

impl Common {
    /// Connects as the client properties and `--user` say, with a hint when nothing listens
    /// there. Bad properties and refusals (TLS, SASL) are errors, not [`Unreachable`].
    pub fn connect(&self) -> anyhow::Result<Client> {
        let settings = Settings::resolve(self.properties.load()?, &self.login)?;
        Client::connect_as(&self.brokers, std::sync::Arc::new(settings)).map_err(|e| {
            if e.downcast_ref::<Refused>().is_some() {
                return e;
            }
            e.context(Unreachable(format!(
                "no broker reachable at {} (start one with `sluice serve`, or pass --brokers HOST:PORT)",
                self.brokers
            )))
        })
    }
}

/// No broker answered: `main` exits with [`EXIT_UNREACHABLE`] so scripts can retry.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Exit codes: 0 success, 1 the operation failed, 2 bad usage (clap), 3 no broker reachable.
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_UNREACHABLE: i32 = 3;

/// Prints `doc` as pretty JSON, or through `text` for people. A closed pipe is not an error.
pub fn emit(
    output: Output,
    doc: &Value,
    text: impl FnOnce(&Value) -> String,
) -> anyhow::Result<()> {
    let out = match output {
        Output::Json => format!("{}\n", serde_json::to_string_pretty(doc)?),
        Output::Text => text(doc),
    };
    write_stdout(out.as_bytes())
}

/// Writes to stdout, treating a closed pipe (`| head`) as success.
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Metadata for some topics (`None`: all).
pub fn metadata(
    client: &mut Client,
    topics: Option<&[String]>,
    auto_create: bool,
) -> anyhow::Result<MetadataResponse> {
    let mut request = MetadataRequest::default();
    request.topics = topics.map(|names| {
        names
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(StrBytes::from_string(n.clone())));
                t
            })
            .collect()
    });
    request.allow_auto_topic_creation = auto_create;
    let response = client.send(&request, 8)?;
    learn_leaders(client, &response);
    Ok(response)
}

/// Remembers each partition's leader's address from a Metadata response: on a cluster of
/// brokers, requests for a partition go to its leader ([`Client::at`]).
pub fn learn_leaders(client: &mut Client, response: &MetadataResponse) {
    let brokers: BTreeMap<i32, String> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect();
    for t in &response.topics {
        let Some(name) = &t.name else { continue };
        for p in &t.partitions {
            if let Some(addr) = brokers.get(&p.leader_id.0) {
                client.note_leader(name.0.as_str(), p.partition_index, addr.clone());
            }
        }
    }
}

/// `partitions` of `topic` by the address of their leader (`None`: the broker `client` is
/// connected to, or not known).
pub fn by_leader(
    client: &Client,
    topic: &str,
    partitions: &[i32],
) -> BTreeMap<Option<String>, Vec<i32>> {
    let mut out: BTreeMap<Option<String>, Vec<i32>> = BTreeMap::new();
    for &p in partitions {
        out.entry(client.leader(topic, p)).or_default().push(p);
    }
    out
}

/// The address of `group`'s coordinator (FindCoordinator), `None` if it is the broker
/// `client` is connected to.
pub fn coordinator_of(client: &mut Client, group: &str) -> anyhow::Result<Option<String>> {
    let mut request = kafka_protocol::messages::FindCoordinatorRequest::default();
    request.key = StrBytes::from_string(group.to_owned());
    request.key_type = 0;
    let response = client.send(&request, 2)?;
    if response.error_code != 0 {
        bail!(
            "FindCoordinator {group}: {}",
            error_name(response.error_code)
        );
    }
    let addr = format!("{}:{}", response.host, response.port);
    Ok((addr != client.addr()).then_some(addr))
}

/// The partition indexes of one topic, sorted; a clear error if it does not exist.
pub fn partitions_of(
    client: &mut Client,
    topic: &str,
    auto_create: bool,
) -> anyhow::Result<Vec<i32>> {
    let response = metadata(client, Some(&[topic.to_owned()]), auto_create)?;
    let Some(found) = response.topics.first() else {
        bail!("the broker returned no metadata for topic {topic:?}");
    };
    if found.error_code == 3 {
        bail!("topic {topic:?} does not exist: create it with `sluice topic create {topic}`");
    }
    if found.error_code != 0 {
        bail!("topic {topic:?}: {}", error_name(found.error_code));
    }
    let mut partitions: Vec<i32> = found.partitions.iter().map(|p| p.partition_index).collect();
    partitions.sort_unstable();
    Ok(partitions)
}

/// ListOffsets for one topic's partitions at `timestamp` (or [`EARLIEST`]/[`LATEST`]).
pub fn list_offsets(
    client: &mut Client,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader(client, topic, partitions) {
        let at = client.at(leader.as_deref())?;
        out.extend(list_offsets_at(at, topic, &partitions, timestamp)?);
    }
    Ok(out)
}

/// ListOffsets for partitions this broker leads.
fn list_offsets_at(
    client: &mut Client,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = partitions
        .iter()
        .map(|&p| {
            let mut partition = ListOffsetsPartition::default();
            partition.partition_index = p;
            partition.timestamp = timestamp;
            partition
        })
        .collect();
    request.topics = vec![t];
    let response = client.send(&request, 1)?;
    let mut out = BTreeMap::new();
    for p in response.topics.iter().flat_map(|t| &t.partitions) {
        if p.error_code != 0 {
            bail!(
                "ListOffsets {topic}-{}: {}",
                p.partition_index,
                error_name(p.error_code)
            );
        }
        out.insert(p.partition_index, p.offset);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{AdminEndpoint, admin_endpoint, basic_authorization};

    fn admin_addr(url: &str) -> anyhow::Result<String> {
        admin_endpoint(url).map(|e| e.addr)
    }

    #[test]
    fn basic_authorization_is_rfc_7617() {
        assert_eq!(
            basic_authorization("Aladdin", "open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
    }

    #[test]
    fn admin_urls_become_host_port() {
        assert_eq!(
            admin_addr("http://127.0.0.1:9644").unwrap(),
            "127.0.0.1:9644"
        );
        assert_eq!(
            admin_addr("http://localhost:9644/").unwrap(),
            "localhost:9644"
        );
        assert_eq!(admin_addr("127.0.0.1:1").unwrap(), "127.0.0.1:1");
        assert_eq!(admin_addr("http://admin.local").unwrap(), "admin.local:80");
        assert_eq!(
            admin_endpoint("https://localhost:9644/").unwrap(),
            AdminEndpoint {
                addr: "localhost:9644".into(),
                host: "localhost".into(),
                tls: true
            }
        );
        assert_eq!(
            admin_addr("https://admin.local").unwrap(),
            "admin.local:443"
        );
        assert_eq!(admin_endpoint("http://[::1]:9644").unwrap().host, "::1");
        assert_eq!(admin_addr("http://[::1]").unwrap(), "[::1]:80");
        assert!(admin_addr("ftp://x:1").is_err());
    }
}
