//! The broker's security state (SCRAM credentials now; ACLs and quotas as they are wired in),
//! kept as Sluice keeps everything it must not lose: records in a log, the state rebuilt by
//! replaying them. The records are `sluice_security::records::SecurityRecord`s, one per
//! Kafka record value, in a storage `Log` under `<data.dir>/security-log/` written with an
//! fsync before a change is answered. A replicated log can carry the same records later.
//!
//! `sluice user create --data-dir` writes here while the broker is stopped (holding the data
//! dir lock), which is how the first super user is made before the first start.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};

use bytes::Bytes;
use sluice_security::principal::SuperUsers;
use sluice_security::records::SecurityRecord;
use sluice_security::state::SecurityState;
use sluice_security::tokens::TokenConfig;
use sluice_storage::io as storage_io;
use sluice_storage::{Durability, Log, LogConfig, RealFs};

use crate::error::ServerError;
use crate::{clock, internal_log, limits};

mod login_limit;

pub use login_limit::LoginLimiter;

/// The sampled byte-rate windows of client quotas (`handler/produce_fetch/throttle.rs` records into
/// them): Kafka's default sampling, 11 windows of 1 s.
#[derive(Debug)]
pub struct QuotaWindows(Mutex<sluice_security::quota::QuotaTracker>);

impl Default for QuotaWindows {
    fn default() -> Self {
        let config = sluice_security::quota::QuotaConfig::default();
        Self(Mutex::new(
            sluice_security::quota::QuotaTracker::new(config).unwrap_or_default(),
        ))
    }
}

impl QuotaWindows {
    /// Records `bytes` and returns the throttle time in ms (`QuotaTracker::record`).
    pub fn record(
        &self,
        quotas: &sluice_security::quota::ClientQuotas,
        kind: sluice_security::quota::QuotaKind,
        user: &str,
        client_id: &str,
        bytes: u64,
        now_ms: i64,
    ) -> u32 {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(quotas, kind, user, client_id, bytes, now_ms)
    }
}

impl QuotaWindows {
    /// Takes back `bytes` recorded for a throttled request answered empty
    /// (`QuotaTracker::unrecord`).
    pub fn unrecord(
        &self,
        quotas: &sluice_security::quota::ClientQuotas,
        kind: sluice_security::quota::QuotaKind,
        user: &str,
        client_id: &str,
        bytes: u64,
        now_ms: i64,
    ) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unrecord(quotas, kind, user, client_id, bytes, now_ms);
    }
}

/// The broker's security service: the security log's state (SCRAM credentials, ACLs,
/// client quotas), the failed-login limiter, the quota windows. What `crate::authz`, the
/// SASL exchanges, the security APIs and the client quotas use; nothing here knows topics.
#[derive(Debug)]
pub struct Security {
    /// Users, ACLs and quotas, replayed from `<data.dir>/security-log`.
    pub store: SecurityStore,
    /// Failed SASL and admin-API logins per source address (`crate::sasl` refuses an
    /// address over its limit).
    pub login_failures: LoginLimiter,
    /// Client quotas' sampled byte rates (the quotas themselves are in `store`).
    pub quotas: QuotaWindows,
    /// `admin.token` is set: the views and transforms its bearer (`User:admin-token`) made
    /// act with every right, as the bearer does in the admin API (`authz::owner_lacks`).
    admin_token_set: bool,
    /// Delegation tokens' settings, `None` without `delegation.token.secret.key` (tokens
    /// disabled); the tokens themselves are in `store`.
    pub tokens: Option<TokenConfig>,
}

impl Security {
    /// Opens the security log under `data.dir` with the authorizer's config (`super.users`,
    /// `allow.everyone.if.no.acl.found`, `admin.token`).
    pub fn open(config: &crate::config::BrokerConfig) -> Result<Self, ServerError> {
        Ok(Self {
            store: SecurityStore::open(
                &config.data_dir,
                config.super_users.clone(),
                config.allow_everyone_if_no_acl_found(),
            )?,
            login_failures: LoginLimiter::default(),
            quotas: QuotaWindows::default(),
            admin_token_set: config.admin_token.is_some(),
            tokens: config
                .delegation_token_secret_key
                .as_deref()
                .filter(|key| !key.is_empty())
                .map(|key| {
                    TokenConfig::new(
                        key,
                        config.delegation_token_max_lifetime_ms,
                        config.delegation_token_expiry_time_ms,
                    )
                }),
        })
    }

    /// Whether `admin.token` is set (its bearer owns views and transforms with every right).
    pub fn admin_token_set(&self) -> bool {
        self.admin_token_set
    }
}

/// Directory of the security log, under `data.dir`.
pub const SECURITY_DIR: &str = "security-log";

/// The security log and the state replayed from it.
#[derive(Debug)]
pub struct SecurityStore {
    dir: PathBuf,
    /// `None` once closed.
    log: Mutex<Option<Log>>,
    state: RwLock<SecurityState>,
    /// How many changes were applied since open: what may see what was re-decided
    /// (consumer groups resolve their regexes again, `changes`).
    applied: tokio::sync::watch::Sender<u64>,
    /// Held from a decision to its append ([`SecurityStore::decide`]).
    deciding: Mutex<()>,
    /// In a cluster, where records go instead of this log: the metadata log (set by
    /// `crate::kraft`; it returns once the records are committed and this broker's state
    /// is the image's, [`SecurityStore::replace_state`]).
    remote: std::sync::OnceLock<RemoteAppend>,
    /// The authorizer's config, for a state rebuilt from the image.
    authorizer_config: (SuperUsers, bool),
}

/// Commits security records elsewhere (the metadata log): `Err` names why not.
pub struct RemoteAppend(pub Box<RemoteAppendFn>);

/// The function behind [`RemoteAppend`].
pub type RemoteAppendFn = dyn Fn(&[SecurityRecord]) -> Result<(), String> + Send + Sync;

impl std::fmt::Debug for RemoteAppend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteAppend")
    }
}

fn log_config() -> LogConfig {
    LogConfig {
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: sluice_storage::limits::BATCH_BYTES_MAX,
        segment_index_bytes: limits::INTERNAL_LOG_INDEX_BYTES,
        ..LogConfig::default()
    }
}

impl SecurityStore {
    /// Opens (creating) `<data_dir>/security-log` and replays it, with the authorizer's
    /// config (`super.users`, `allow.everyone.if.no.acl.found`). A record the state refuses
    /// is logged and skipped; a damaged log is an error naming it.
    pub fn open(
        data_dir: &Path,
        super_users: SuperUsers,
        allow_everyone_if_no_acl_found: bool,
    ) -> Result<Self, ServerError> {
        let dir = data_dir.join(SECURITY_DIR);
        storage_io::create_dir_durable(&RealFs, &dir)
            .map_err(ServerError::io(format!("creating {}", dir.display())))?;
        let log = Log::open(&dir, log_config(), clock::now_ms()).map_err(|source| {
            ServerError::Storage {
                context: format!("opening {}", dir.display()),
                source,
            }
        })?;
        let records =
            internal_log::read_all(&log, decode_chunk).map_err(|reason| ServerError::Io {
                context: format!("reading {}", dir.display()),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
            })?;
        let authorizer_config = (super_users.clone(), allow_everyone_if_no_acl_found);
        let mut state = SecurityState::new(super_users, allow_everyone_if_no_acl_found);
        for (i, e) in state.load(records) {
            tracing::warn!(dir = %dir.display(), record = i, error = %e, "skipping a refused security record");
        }
        tracing::info!(dir = %dir.display(), credentials = state.credential_count(), "loaded the security log");
        Ok(Self {
            dir,
            log: Mutex::new(Some(log)),
            state: RwLock::new(state),
            applied: tokio::sync::watch::Sender::new(0),
            deciding: Mutex::new(()),
            remote: std::sync::OnceLock::new(),
            authorizer_config,
        })
    }

    /// From now on records go to `remote` (a broker in a cluster: the metadata log).
    pub fn set_remote(&self, remote: RemoteAppend) {
        if self.remote.set(remote).is_err() {
            tracing::error!("the security store's remote was set twice; keeping the first");
        }
    }

    /// Makes the state the one `records` build (the image's, in a cluster), with this
    /// broker's authorizer config; unchanged records change nothing.
    pub fn replace_state(&self, records: Vec<SecurityRecord>) {
        let (super_users, allow) = self.authorizer_config.clone();
        if self.read(SecurityState::snapshot) == records {
            return;
        }
        let mut state = SecurityState::new(super_users, allow);
        for (i, e) in state.load(records) {
            tracing::warn!(record = i, error = %e, "skipping a refused security record of the metadata image");
        }
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
        self.applied.send_modify(|n| *n += 1);
    }

    /// Appends `records` durably (fsync), then applies them. Either all are appended or
    /// none is applied.
    pub fn append(&self, records: &[SecurityRecord]) -> Result<(), ServerError> {
        if records.is_empty() {
            return Ok(());
        }
        if let Some(remote) = self.remote.get() {
            return (remote.0)(records).map_err(|reason| ServerError::Io {
                context: "committing security records to the metadata log".into(),
                source: std::io::Error::other(reason),
            });
        }
        let pairs: Vec<(Bytes, Option<Bytes>)> = records
            .iter()
            .map(|r| {
                (
                    Bytes::from_static(b"security"),
                    Some(Bytes::from(r.encode())),
                )
            })
            .collect();
        let encoded =
            internal_log::encode(&pairs, clock::now_ms()).map_err(|e| ServerError::Io {
                context: "encoding security records".into(),
                source: std::io::Error::other(e),
            })?;
        let mut bytes = bytes::BytesMut::from(&encoded[..]);
        let mut guard = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let log = guard.as_mut().ok_or_else(|| ServerError::Io {
            context: format!("appending to {}", self.dir.display()),
            source: std::io::Error::other("the security log is closed (shutting down)"),
        })?;
        log.append(&mut bytes, Durability::Fsync, clock::now_ms())
            .map_err(|e| ServerError::Io {
                context: format!("appending to {}", self.dir.display()),
                source: std::io::Error::other(e.to_string()),
            })?;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for record in records {
            if let Err(e) = state.apply(record.clone()) {
                tracing::warn!(error = %e, "a stored security record was refused");
            }
        }
        drop(state);
        self.applied.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Decides records from the state and appends them, with no other append between the
    /// decision and the append (two token requests cannot both pass a limit, or renew a
    /// token one of them just expired). `decide` returns the records and its answer.
    pub fn decide<T>(
        &self,
        decide: impl FnOnce(&SecurityState) -> (Vec<SecurityRecord>, T),
    ) -> Result<T, ServerError> {
        let _serial = self.deciding.lock().unwrap_or_else(PoisonError::into_inner);
        let (records, answer) = self.read(decide);
        self.append(&records)?;
        Ok(answer)
    }

    /// Changes each time credentials, ACLs or quotas change.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Reads the state.
    pub fn read<T>(&self, f: impl FnOnce(&SecurityState) -> T) -> T {
        f(&self.state.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Flushes and closes the log (a clean shutdown).
    pub fn close(&self) -> Result<(), ServerError> {
        let log = self
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(log) = log else { return Ok(()) };
        log.close().map_err(|source| ServerError::Storage {
            context: format!("closing {}", self.dir.display()),
            source,
        })
    }
}

fn decode_chunk(bytes: Vec<u8>, out: &mut Vec<SecurityRecord>) -> Result<Option<i64>, String> {
    let mut last = None;
    for record in internal_log::decode(bytes)? {
        last = Some(record.offset);
        let Some(value) = record.value else { continue };
        match SecurityRecord::decode(&value) {
            Ok(decoded) => out.push(decoded),
            Err(e) => {
                tracing::warn!(offset = record.offset, error = %e, "skipping an undecodable security record")
            }
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests;
