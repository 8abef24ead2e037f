//! `sluice user create | delete | list`: SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512), stored as
//! Kafka stores them (salted, iterated; never the password). With `--data-dir DIR` the command
//! writes into a stopped broker's data dir (it takes the data dir's lock, so it refuses while a
//! broker runs there): that is how the first super user is made before the first start, as
//! `kafka-storage format --add-scram` does. Without `--data-dir` it goes over the wire to a
//! running broker (AlterUserScramCredentials and DescribeUserScramCredentials, which need
//! ALTER and DESCRIBE on the cluster: log in as a super user with `--user`). Either way the
//! password never leaves this process: the salted password is derived here, as Kafka's
//! admin client does.
//!
//! ```text
//! echo -n 's3cret' | sluice user create admin --mechanism SCRAM-SHA-512 --password-stdin --data-dir /var/lib/sluice
//! echo -n 'alice-pw' | SLUICE_PASSWORD=s3cret sluice user create alice --mechanism SCRAM-SHA-256 \
//!     --password-stdin --user admin --sasl-mechanism SCRAM-SHA-512
//! ```

use std::io::Read as _;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sluice_security::principal::SuperUsers;
use sluice_security::records::SecurityRecord;
use sluice_security::scram::{ScramCredential, ScramMechanism};
use sluice_server::random::OsRng;
use sluice_server::security::SecurityStore;

use crate::common::{Common, Output, emit};

mod wire;

/// Iterations of a new credential when `--iterations` is not given (Kafka's tools use 4096,
/// the minimum Kafka accepts).
const DEFAULT_ITERATIONS: u32 = 4096;
/// Longest password read from stdin, in bytes.
const PASSWORD_BYTES_MAX: u64 = 1024;

#[derive(Debug, clap::Args)]
pub struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
    /// The stopped broker's data directory (`data.dir`) to read or write users in; without
    /// it, the running broker at --brokers.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum UserCommand {
    /// Create a user, or set its password for one mechanism.
    Create {
        name: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long)]
        mechanism: String,
        /// Read the password from stdin (one line; a trailing newline is dropped).
        #[arg(long, required = true)]
        password_stdin: bool,
        /// PBKDF2 iterations (4096..=16384, Kafka's bounds).
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a user's credential for one mechanism.
    Delete {
        name: String,
        #[arg(long)]
        mechanism: String,
    },
    /// List users and their mechanisms.
    List,
}

pub fn run(args: UserArgs) -> anyhow::Result<()> {
    let output = args.common.output;
    let Some(data_dir) = args.data_dir else {
        let mut client = args.common.connect()?;
        return wire::run(&mut client, args.command, output);
    };
    let _lock = sluice_server::data_dir::lock(&data_dir)?;
    let store = SecurityStore::open(&data_dir, SuperUsers::default(), true)?;
    let result = match args.command {
        UserCommand::Create {
            name,
            mechanism,
            iterations,
            ..
        } => {
            let mechanism = parse_mechanism(&mechanism)?;
            let password = read_password()?;
            let mut rng = OsRng;
            let credential = ScramCredential::generate(mechanism, &password, iterations, &mut rng)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            store.append(&[SecurityRecord::ScramCredentialUpsert {
                user: name.clone(),
                credential,
            }])?;
            emit(
                output,
                &json!({"user": name, "mechanism": mechanism.name(), "iterations": iterations}),
                |d| {
                    format!(
                        "user {} created ({})\n",
                        d["user"].as_str().unwrap_or(""),
                        mechanism.name()
                    )
                },
            )
        }
        UserCommand::Delete { name, mechanism } => {
            let mechanism = parse_mechanism(&mechanism)?;
            if store.read(|s| s.credential(&name, mechanism).is_none()) {
                bail!("user {name:?} has no {} credential", mechanism.name());
            }
            store.append(&[SecurityRecord::ScramCredentialDelete {
                user: name.clone(),
                mechanism,
            }])?;
            emit(
                output,
                &json!({"user": name, "mechanism": mechanism.name(), "deleted": true}),
                |d| {
                    format!(
                        "user {} deleted ({})\n",
                        d["user"].as_str().unwrap_or(""),
                        mechanism.name()
                    )
                },
            )
        }
        UserCommand::List => list(&store, output),
    };
    store.close()?;
    result
}

/// Users and their mechanisms.
fn list(store: &SecurityStore, output: Output) -> anyhow::Result<()> {
    let users: Vec<Value> = store.read(|s| {
        s.users()
            .into_iter()
            .map(|(user, mechanisms)| {
                json!({
                    "user": user,
                    "mechanisms": mechanisms
                        .iter()
                        .map(|(m, i)| json!({"mechanism": m.name(), "iterations": i}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect()
    });
    emit_users(output, users)
}

/// Prints a user listing: `{"users": [{"user", "mechanisms": [{"mechanism", "iterations"}]}]}`.
pub(crate) fn emit_users(output: Output, users: Vec<Value>) -> anyhow::Result<()> {
    emit(output, &json!({ "users": users }), |d| {
        let mut out = String::from("USER\tMECHANISMS\n");
        for u in d["users"].as_array().into_iter().flatten() {
            let names: Vec<&str> = u["mechanisms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["mechanism"].as_str())
                .collect();
            out.push_str(&format!(
                "{}\t{}\n",
                u["user"].as_str().unwrap_or(""),
                names.join(",")
            ));
        }
        out
    })
}

pub(crate) fn parse_mechanism(name: &str) -> anyhow::Result<ScramMechanism> {
    ScramMechanism::from_name(name)
        .with_context(|| format!("--mechanism {name:?}: expected SCRAM-SHA-256 or SCRAM-SHA-512"))
}

pub(crate) fn read_password() -> anyhow::Result<String> {
    let mut raw = Vec::new();
    std::io::stdin()
        .take(PASSWORD_BYTES_MAX + 1)
        .read_to_end(&mut raw)
        .context("reading the password from stdin")?;
    if raw.len() as u64 > PASSWORD_BYTES_MAX {
        bail!("the password on stdin is over PASSWORD_BYTES_MAX ({PASSWORD_BYTES_MAX} bytes)");
    }
    let mut password = String::from_utf8(raw).context("the password is not UTF-8")?;
    while password.ends_with('\n') || password.ends_with('\r') {
        password.pop();
    }
    if password.is_empty() {
        bail!("an empty password on stdin (use --password-stdin and pipe the password in)");
    }
    Ok(password)
}
