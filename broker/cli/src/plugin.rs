//! `sluice plugin`: deploy, list, describe, read the logs of (`logs [--follow]`) and delete
//! plugins through the broker's admin HTTP API (`/v1/plugins`, see docs/plugins.md); scaffold
//! (`new`) and build (`build`, the SDK's guest build scripts) a plugin in `plugin/scaffold.rs`,
//! with the SDK `plugin/sdk.rs` finds (or unpacks from the binary); and try one (`test`, runs a
//! plugin locally on sample records with the same host the broker uses).

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sluice_server::plugins::parse_params;

use crate::common::{Output, emit};

mod scaffold;
mod sdk;
mod test;

/// Longest admin API response read, in bytes (a plugin list is a few hundred per plugin).
const RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Connect and I/O timeout of one admin request (an upload is compiled before the answer).
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    command: PluginCommand,
    #[command(flatten)]
    admin: crate::common::Admin,
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, clap::Subcommand)]
enum PluginCommand {
    /// Upload a .wasm to the broker (validated and compiled before it replaces anything).
    Deploy {
        file: PathBuf,
        /// Plugin name (default: the file name without .wasm).
        #[arg(long)]
        name: Option<String>,
    },
    /// List deployed plugins.
    List,
    /// Kind, WIT version, sha256, size and users of one plugin.
    Describe { name: String },
    /// What a plugin logged (through the WIT `log` import), oldest first.
    Logs {
        name: String,
        /// Keep printing new lines as the plugin logs them (polls the admin API).
        #[arg(short, long)]
        follow: bool,
        /// Only lines after this sequence number (each line's `seq`).
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Delete a plugin; one a topic uses needs --force.
    Delete {
        name: String,
        #[arg(long)]
        force: bool,
    },
    /// Scaffold a plugin in Rust (a crate whose Cargo.toml lists only sluice-sdk), Python
    /// or JavaScript, with a native unit test in its own language. Works anywhere: without
    /// a Sluice SDK directory, the plugin gets the SDK it needs (built into this binary)
    /// in NAME/.sluice-sdk/.
    New {
        name: String,
        #[arg(long, value_parser = ["partitioner", "filter", "transform", "validator"], default_value = "partitioner")]
        kind: String,
        #[arg(long, value_parser = ["rust", "python", "js"], default_value = "rust")]
        lang: String,
        /// A Sluice sdk/ directory to scaffold from (optional; default: ./sdk in a Sluice
        /// checkout, else the SDK built into this binary).
        #[arg(long, env = "SLUICE_SDK")]
        sdk: Option<PathBuf>,
    },
    /// Build a plugin, in whatever language (Cargo.toml: Rust for wasm32; pyproject.toml
    /// with [tool.sluice]: componentize-py; package.json with "sluice": componentize-js),
    /// with the SDK's build scripts, into DIR/target/wasm/.
    Build {
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Cargo's target dir for a Rust guest build (default: DIR/target). Point several
        /// plugin crates at one so the wasm32 std is built once.
        #[arg(long)]
        target_dir: Option<PathBuf>,
        /// A Sluice sdk/ directory whose build scripts to use (optional; default: ./sdk in a
        /// Sluice checkout, else the SDK built into this binary, unpacked once into
        /// $XDG_CACHE_HOME/sluice or ~/.cache/sluice).
        #[arg(long, env = "SLUICE_SDK")]
        sdk: Option<PathBuf>,
    },
    /// Run a plugin locally on sample records: a partitioner prints each record's
    /// partition, a filter the records it keeps, a transform the records it returns, a
    /// validator the records it refuses and why.
    Test {
        /// The plugin (.wasm).
        file: PathBuf,
        /// Sample records: JSON lines {"key": .., "value": .., "headers": {..}}, or plain
        /// lines as keyless values.
        #[arg(long)]
        records: PathBuf,
        /// Plugin parameter (repeatable).
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Partition count a partitioner is asked to place records in.
        #[arg(long, default_value_t = 6)]
        partitions: u32,
        /// A transform's output topic, in order (repeatable): each output record shows the
        /// output it is routed to, as a materialized transform writes it. Without `--to`,
        /// the transform runs as a view does (its first output only).
        #[arg(long = "to", value_name = "OUTPUT")]
        outputs: Vec<String>,
    },
}

pub fn run(args: PluginArgs) -> anyhow::Result<()> {
    let (admin, output) = (&args.admin, args.output);
    match args.command {
        PluginCommand::Deploy { file, name } => {
            let name = match name {
                Some(n) => n,
                None => stem(&file)?,
            };
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let info = http(admin, "PUT", &format!("/v1/plugins/{name}"), &bytes)?;
            emit(output, &info, |v| {
                format!("deployed {}\n", describe_text(v))
            })
        }
        PluginCommand::List => {
            let list = http(admin, "GET", "/v1/plugins", &[])?;
            emit(output, &list, |v| {
                let rows: Vec<String> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(describe_text)
                    .collect();
                rows.iter().map(|r| format!("{r}\n")).collect()
            })
        }
        PluginCommand::Describe { name } => {
            let info = http(admin, "GET", &format!("/v1/plugins/{name}"), &[])?;
            emit(output, &info, |v| {
                format!("{}\n{}\n", describe_text(v), stats_text(&v["stats"]))
            })
        }
        PluginCommand::Logs {
            name,
            follow,
            after,
        } => logs(admin, output, &name, after, follow),
        PluginCommand::Delete { name, force } => {
            let path = format!(
                "/v1/plugins/{name}{}",
                if force { "?force=true" } else { "" }
            );
            http(admin, "DELETE", &path, &[])?;
            emit(output, &json!({"deleted": name}), |_| {
                format!("deleted {name}\n")
            })
        }
        PluginCommand::New {
            name,
            kind,
            lang,
            sdk,
        } => scaffold::new(&name, &kind, &lang, sdk, output),
        PluginCommand::Build {
            dir,
            target_dir,
            sdk,
        } => scaffold::build(&dir, target_dir.as_deref(), sdk, output),
        PluginCommand::Test {
            file,
            records,
            params,
            partitions,
            outputs,
        } => test::run(&file, &records, &params, partitions, &outputs, output),
    }
}

/// How often `plugin logs --follow` asks for new lines.
const LOG_FOLLOW_POLL: Duration = Duration::from_millis(500);

/// `plugin logs`: one page (JSON: the API's document), or with `--follow` every line as it
/// comes (JSON: one object per line). A gap (lines the ring dropped before they were read)
/// is said, not hidden.
fn logs(
    admin: &crate::common::Admin,
    output: Output,
    name: &str,
    mut after: u64,
    follow: bool,
) -> anyhow::Result<()> {
    loop {
        let page = http(
            admin,
            "GET",
            &format!("/v1/plugins/{name}/logs?after={after}"),
            &[],
        )?;
        let first = page["first_seq"].as_u64().unwrap_or(0);
        let lines = page["lines"].as_array().cloned().unwrap_or_default();
        let mut out = String::new();
        if output == Output::Text && first > after + 1 && !lines.is_empty() {
            let missed = first - after - 1;
            out.push_str(&format!(
                "({missed} older lines were dropped from the plugin's log)\n"
            ));
        }
        for line in &lines {
            match output {
                Output::Json if follow => out.push_str(&format!("{line}\n")),
                Output::Json => {}
                Output::Text => out.push_str(&format!(
                    "{} {:<5} [{}] {}\n",
                    crate::datetime::format_rfc3339_ms(line["time_ms"].as_i64().unwrap_or(0)),
                    line["level"].as_str().unwrap_or("?"),
                    line["version"].as_str().unwrap_or("?"),
                    line["message"].as_str().unwrap_or_default(),
                )),
            }
        }
        if !follow {
            if output == Output::Text {
                let dropped = page["dropped"].as_u64().unwrap_or(0);
                if dropped > 0 {
                    out.push_str(&format!(
                        "({dropped} messages cut by the plugin log limits)\n"
                    ));
                }
                return crate::common::write_stdout(out.as_bytes());
            }
            return emit(output, &page, |_| String::new());
        }
        crate::common::write_stdout(out.as_bytes())?;
        after = page["next_after"].as_u64().unwrap_or(after);
        std::thread::sleep(LOG_FOLLOW_POLL);
    }
}

fn stem(file: &Path) -> anyhow::Result<String> {
    file.file_stem()
        .and_then(|s| s.to_str())
        .map(|s| {
            s.strip_prefix("sluice-plugin-")
                .unwrap_or(s)
                .replace('_', "-")
        })
        .context("the file has no name to deploy it under: pass --name")
}

/// `calls=N errors=timeout:1,trap:2 mean_latency_us=M records_in=.. records_out=.. cpu_us=..`
/// (only the error kinds that happened).
fn stats_text(stats: &Value) -> String {
    let calls = stats["calls"].as_u64().unwrap_or(0);
    let errors: Vec<String> = stats["errors"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
        .map(|(kind, n)| format!("{kind}:{n}"))
        .collect();
    let mean_us = stats["latency_sum_us"].as_u64().unwrap_or(0) / calls.max(1);
    let errors = if errors.is_empty() {
        "0".to_owned()
    } else {
        errors.join(",")
    };
    format!(
        "  calls={calls} errors={errors} mean_latency_us={mean_us} records_in={} records_out={} cpu_us={}",
        stats["records_in"].as_u64().unwrap_or(0),
        stats["records_out"].as_u64().unwrap_or(0),
        stats["cpu_us"].as_u64().unwrap_or(0),
    )
}

fn describe_text(v: &Value) -> String {
    format!(
        "{} {} wit={} wasi={} size={} sha256={} users={}",
        v["name"].as_str().unwrap_or("?"),
        v["kind"].as_str().unwrap_or("?"),
        v["wit_version"].as_str().unwrap_or("?"),
        v["wasi"].as_bool().unwrap_or(false),
        v["size_bytes"],
        v["sha256"].as_str().unwrap_or("?"),
        v["users"]
    )
}

/// A request with a `.wasm` body (or none); see [`request`].
fn http(
    admin: &crate::common::Admin,
    method: &str,
    path: &str,
    body: &[u8],
) -> anyhow::Result<Value> {
    request(admin, method, path, "application/wasm", body)
}

/// A request with a JSON body (`Value::Null`: none); see [`request`].
pub fn http_json(
    admin: &crate::common::Admin,
    method: &str,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body)?
    };
    request(admin, method, path, "application/json", &bytes)
}

/// One HTTP/1.1 request to the admin API; the JSON body of a 2xx answer, else an error with
/// the API's message.
fn request(
    admin: &crate::common::Admin,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> anyhow::Result<Value> {
    let endpoint = admin.endpoint()?;
    let addr = &endpoint.addr;
    let tcp = TcpStream::connect(addr.as_str()).map_err(|e| {
        anyhow::Error::new(e).context(crate::common::Unreachable(format!(
            "no admin API at {addr} (the broker's admin.listen; pass --admin-url http://HOST:PORT)"
        )))
    })?;
    tcp.set_read_timeout(Some(HTTP_TIMEOUT))?;
    tcp.set_write_timeout(Some(HTTP_TIMEOUT))?;
    let mut stream: Box<dyn crate::tls::HttpStream> = if endpoint.tls {
        Box::new(admin_tls(admin, tcp, &endpoint.host)?)
    } else {
        Box::new(tcp)
    };
    let auth = admin
        .authorization()?
        .map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let raw = read_response(stream)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("malformed HTTP status line")?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    let value: Value = if body.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&body).unwrap_or(Value::String(body.clone()))
    };
    if !(200..300).contains(&status) {
        bail!(
            "{method} {path}: HTTP {status}: {}",
            value["error"]
                .as_str()
                .map_or_else(|| body.clone(), str::to_owned)
        );
    }
    Ok(value)
}

/// TLS to an https:// admin URL, as the client properties and `--admin-ca-file` say.
fn admin_tls(
    admin: &crate::common::Admin,
    tcp: TcpStream,
    host: &str,
) -> anyhow::Result<crate::tls::TlsStream> {
    crate::tls::connect(tcp, host, admin.tls_config()?).map_err(|e| {
        let what = format!("TLS handshake with the admin API at {host}");
        match crate::tls::hint(&e) {
            Some(hint) => anyhow::anyhow!("{what}: {e:#} ({hint})"),
            None => e.context(what),
        }
    })
}

/// The whole response, up to `RESPONSE_BYTES_MAX` (the request said `Connection: close`). A
/// TLS peer that closes without close_notify after sending a response ends it too.
fn read_response(stream: Box<dyn crate::tls::HttpStream>) -> anyhow::Result<Vec<u8>> {
    let mut raw = Vec::new();
    match stream.take(RESPONSE_BYTES_MAX).read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e.into()),
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

pub fn params(raw: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    parse_params(&raw.join(",")).map_err(|e| anyhow::anyhow!("--param: {e}"))
}
