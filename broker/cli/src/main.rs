//! The `sluice` binary. `sluice serve` runs the broker; `sluice group` inspects consumer
//! groups and resets their offsets over the Kafka protocol (`client.rs`, `group.rs`).
//!
//! Contract with scripts and tests: after binding, `serve` prints exactly one line to stdout,
//! `sluice listening kafka=HOST:PORT`; every log line goes to stderr.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use sluice_server::{BrokerConfig, Server};

mod client;
mod datetime;
mod group;

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
    /// Consumer groups: list, describe (lag per partition), reset-offsets.
    Group(group::GroupArgs),
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
    match Cli::parse().command {
        Command::Serve(args) => serve(args),
        Command::Group(args) => {
            // An operator error is one line on stderr and exit code 1, not a backtrace.
            if let Err(e) = group::run(args) {
                eprintln!("error: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let config = load_config(&args)?;
    raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async move {
        let shutdown = shutdown_signal()?;
        let server = Server::bind(config).await?;
        let addr = server.local_addr();
        tracing::info!(%addr, "listening");
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "sluice listening kafka={addr}")?;
        stdout.flush()?;
        drop(stdout);
        server.run(shutdown).await?;
        anyhow::Ok(())
    })
}

fn load_config(args: &ServeArgs) -> anyhow::Result<BrokerConfig> {
    let mut config = BrokerConfig::default();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        config.apply_toml(path, &text)?;
    }
    config.apply_env(std::env::vars())?;
    for set in &args.sets {
        let Some((key, value)) = set.split_once('=') else {
            bail!("--set {set:?}: expected KEY=VALUE");
        };
        config.set(key.trim(), value)?;
    }
    if let Some(dir) = &args.data_dir {
        config.data_dir.clone_from(dir);
    }
    if let Some(listen) = &args.listen {
        config.set("listeners", listen)?;
    }
    config.validate()?;
    Ok(config)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Raises the open-file soft limit to the hard limit: every connection and segment is a file.
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            let wanted = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) != 0 {
                tracing::warn!(
                    soft = limit.rlim_cur,
                    hard = limit.rlim_max,
                    "could not raise RLIMIT_NOFILE"
                );
            }
        }
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
