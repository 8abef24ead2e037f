//! The `sluice` binary. `sluice serve` runs the broker; `sluice group` inspects consumer
//! groups and resets their offsets over the Kafka protocol (`client.rs`, `group.rs`).
//!
//! Contract with scripts and tests: after binding, `serve` prints exactly one line to stdout,
//! `sluice listening kafka=HOST:PORT admin=HOST:PORT` (without ` admin=...` when the admin API
//! is off; `kafka=` is the first of `listeners`); every log line goes to stderr. With several
//! listeners, one `sluice listener NAME=HOST:PORT` line per listener comes before it.
//!
//! The operator commands (`topic`, `produce`, `consume`, `group`, `cluster`, `acl`, `quota`,
//! `user`) talk the Kafka protocol through `client.rs`; each takes `--brokers`, Kafka's client
//! properties (`-X KEY=VALUE`, `--command-config FILE`: TLS and SASL, `properties.rs`,
//! `tls.rs`), `--user` (SASL, `client/sasl.rs`; the password from SLUICE_PASSWORD) and
//! `--output text|json`, prints errors as one line on stderr and exits 1 when the operation
//! failed (a TLS or SASL refusal too), 2 on bad usage, 3 when no broker is reachable. `plugin`,
//! `view` and `transform` talk to the admin HTTP API (`https://` with the same properties).
//!
//! # Layout
//! - `common`: what every operator command shares (`--brokers`, `--output`, the admin API's
//!   address and login, Metadata and ListOffsets look-ups); `client` (with `client/`): the
//!   small blocking Kafka client (plain, TLS or SASL; `client/sasl.rs`, `client/settings.rs`,
//!   `client/stream.rs`); `properties` (with `properties/`): Kafka client properties from
//!   `-X` and `--command-config`, checked against one table of keys; `tls` (with `tls/`):
//!   the rustls client config those properties make.
//! - The commands, one module each: `topic`, `produce`, `consume` (with `consume/`: a group
//!   member's fetching), `group`, `member` (a real consumer-group member: join, heartbeat,
//!   rejoin) with `assignor` (range, roundrobin), `acl`, `user` (with `user/`), `quota`,
//!   `cluster`, `plugin` (with `plugin/`: scaffold, the embedded SDK, local test), `view`,
//!   `transform`, `debug` (a data dir's files as they are: `dump-log`).
//! - `datetime`: RFC 3339 times to epoch milliseconds and back; `effective_config`: where
//!   each key of `sluice serve --print-config` came from.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use sluice_server::{BrokerConfig, Server};

mod acl;
mod assignor;
mod client;
mod cluster;
mod common;
mod consume;
mod datetime;
mod debug;
mod effective_config;
mod group;
mod member;
mod plugin;
mod produce;
mod properties;
mod quota;
mod tls;
mod topic;
mod transform;
mod user;
mod view;

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "A Kafka-compatible stream broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the broker. Config: defaults < --config file < SLUICE_* env < flags.
    Serve(ServeArgs),
    /// Topics: create, list, describe, alter-config, add-partitions, delete.
    Topic(topic::TopicArgs),
    /// Produce records from stdin lines or a file.
    Produce(produce::ProduceArgs),
    /// Consume records to stdout (kcat-style format, or JSON lines).
    Consume(consume::ConsumeArgs),
    /// Consumer groups: list, describe (lag per partition), reset-offsets, delete-offsets.
    Group(group::GroupArgs),
    /// The cluster: id, brokers, supported APIs.
    Cluster(cluster::ClusterArgs),
    /// WebAssembly plugins: deploy, list, describe, delete, new, build, test.
    Plugin(plugin::PluginArgs),
    /// Views: read-only topics filtered and transformed by plugins at fetch time.
    View(view::ViewArgs),
    /// Materialized transforms: topic-to-topic plugin pipelines with exactly-once output.
    Transform(transform::TransformArgs),
    /// SCRAM users: create, delete, list (in a stopped broker's data dir for now).
    User(user::UserArgs),
    /// ACLs: create, list, delete (Kafka's CreateAcls, DescribeAcls, DeleteAcls).
    Acl(acl::AclArgs),
    /// Client byte-rate quotas: set, remove, list (AlterClientQuotas, DescribeClientQuotas).
    Quota(quota::QuotaArgs),
    /// A data dir's files as they are: `dump-log` prints a segment's record batches.
    Debug(debug::DebugArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// TOML config file (Kafka key names; see the shipped sluice.toml).
    #[arg(long, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (`data.dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Kafka listener host:port (`listeners`); port 0 picks a free one.
    #[arg(long)]
    listen: Option<String>,
    /// Admin HTTP API host:port (`admin.listen`); port 0 picks a free one, "" turns it off.
    #[arg(long)]
    admin_listen: Option<String>,
    /// Print the effective configuration, and where each value came from, then exit.
    #[arg(long)]
    print_config: bool,
    /// Set any config key by its Kafka name, e.g. --set num.partitions=3 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Log format on stderr (filter with SLUICE_LOG, e.g. SLUICE_LOG=debug).
    #[arg(long, value_enum, default_value_t = LogFormat::Human, env = "SLUICE_LOG_FORMAT")]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

fn main() -> anyhow::Result<()> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Serve(args) => return serve(args),
        Command::Topic(args) => topic::run(args),
        Command::Produce(args) => produce::run(args),
        Command::Consume(args) => consume::run(args, matches.subcommand_matches("consume")),
        Command::Group(args) => group::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::Plugin(args) => plugin::run(args),
        Command::User(args) => user::run(args),
        Command::Acl(args) => acl::run(args),
        Command::Quota(args) => quota::run(args),
        Command::Debug(args) => debug::run(args),
        Command::Transform(args) => transform::run(args),
        Command::View(args) => {
            // The stage order of `view create` is read from the matches.
            let create = matches
                .subcommand_matches("view")
                .and_then(|m| m.subcommand_matches("create"));
            view::run(args, create)
        }
    };
    // An operator error is one line on stderr and a meaningful exit code, not a backtrace.
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        let unreachable = e.downcast_ref::<common::Unreachable>().is_some();
        std::process::exit(if unreachable {
            common::EXIT_UNREACHABLE
        } else {
            common::EXIT_FAILED
        });
    }
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let (config, sources) = load_config(&args)?;
    if args.print_config {
        return common::write_stdout(effective_config::render(&config, &sources).as_bytes());
    }
    init_logging(args.log_format);
    // Every connection and partition is a file: the soft limit goes to the hard one (logged).
    sluice_server::descriptors::raise_nofile_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal()?;
        // A dedicated controller (`process.roles=controller`) serves no clients: its line
        // names its controller listener.
        let role = if config.process_roles.broker {
            "kafka"
        } else {
            "controller"
        };
        let mut server = Server::bind(config).await?;
        let addr = server.local_addr();
        let admin = server.bind_admin().await?;
        tracing::info!(%addr, ?admin, "listening");
        let mut stdout = std::io::stdout().lock();
        // With several listeners, one line each before the `listening` line (which names
        // the first); with one, that line stays the only one.
        let listeners = server.listener_addrs();
        if listeners.len() > 1 {
            for (name, bound) in listeners {
                writeln!(stdout, "sluice listener {name}={bound}")?;
            }
        }
        match admin {
            Some(admin) => writeln!(stdout, "sluice listening {role}={addr} admin={admin}")?,
            None => writeln!(stdout, "sluice listening {role}={addr}")?,
        }
        stdout.flush()?;
        drop(stdout);
        server.run(shutdown).await?;
        anyhow::Ok(())
    })
}

/// The config from every source, and which source set each key.
fn load_config(args: &ServeArgs) -> anyhow::Result<(BrokerConfig, effective_config::Sources)> {
    let mut sets = Vec::new();
    for set in &args.sets {
        let Some((key, value)) = set.split_once('=') else {
            bail!("--set {set:?}: expected KEY=VALUE");
        };
        sets.push((key.trim().to_owned(), value.to_owned()));
    }
    if let Some(dir) = &args.data_dir {
        sets.push(("data.dir".into(), dir.display().to_string()));
    }
    if let Some(listen) = &args.listen {
        sets.push(("listeners".into(), listen.clone()));
    }
    if let Some(admin) = &args.admin_listen {
        sets.push(("admin.listen".into(), admin.clone()));
    }
    effective_config::load(args.config.as_deref(), std::env::vars(), &sets)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    // A log line that cannot be written (stderr is a file on a full disk) is dropped. By
    // default tracing-subscriber reports the failure with `eprintln!` to the same stderr,
    // which panics when that write fails too: the thread that logged (a request handler in
    // the middle of a topic deletion, the shutdown) died with it.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Installs the SIGINT and SIGTERM handlers now (before the listener binds, so a signal is
/// never handled by the default disposition) and returns a future resolving on either.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}
