//! Sluice's transaction coordinator and the records of its transaction log.
//!
//! Pure: no tokio, no sockets, no clock, no files, no wire format. The coordinator is a
//! deterministic state machine fed `(now_ms, request)`; every call that changes durable
//! state returns the [`TxnRecord`]s to persist instead of changing itself, and the
//! coordinator takes them on only when the server confirms the append with
//! [`Coordinator::apply`]. Its state is therefore always the replay of the confirmed log.
//!
//! # How the server drives it
//!
//! ```text
//! start:    let mut c = Coordinator::new(config);   // config.validate()? first
//!           c.load(log.map(|(key, value)| decode(key, value)))  // a DecodeError is a
//!                                               // corrupt log: refuse to start
//!           for m in c.recovery_effects() { write markers m, then persist c.markers_written(now, id) }
//! persist:  every call below that returns records (a Vec<TxnRecord>, in an outcome or a
//!           Tick): append them in order to the transaction-log partition (key =
//!           encode_key(), value = encode_value(), None = tombstone), fsync, then
//!           c.apply(&records) and only then answer the client / carry out the effects.
//!           If the append fails: c.persist_failed(&records) and answer
//!           COORDINATOR_NOT_AVAILABLE; the coordinator is as before the call. Empty
//!           records: nothing to persist. Until apply/persist_failed, further calls on
//!           that transactional id get CONCURRENT_TRANSACTIONS, so appends may be async.
//! request:  InitProducerId     -> c.init_producer_id(now, txn_id, timeout, expected)
//!             Done { producer_id, producer_epoch, records }  persist, answer the id/epoch
//!             AbortFirst { records, markers }   persist, answer CONCURRENT_TRANSACTIONS,
//!                                               then write the markers (below)
//!             Error(code)                       answer it
//!           AddPartitionsToTxn -> c.add_partitions(..)   (v4 verifyOnly: c.verify_partitions)
//!           Produce (KIP-890)  -> c.verify_partitions(..) before a partition takes a
//!                                 transactional batch it has no verified transaction for
//!                                 (Produce v12+, TxnProtocol::V2: c.add_partitions(..))
//!           AddOffsetsToTxn    -> c.add_offsets(..)
//!           TxnOffsetCommit    -> c.txn_offset_commit(.., protocol) (V2, v5+: adds the group)
//!             Ok(records) persist, answer NONE; Err(code) answer it
//!           EndTxn             -> c.end_txn(now, txn_id, pid, epoch, commit, protocol)
//!             Prepared { records, markers }     persist, answer NONE, write the markers
//!                                               (V2, v5+: the epoch is bumped; answer the
//!                                               id and epoch the transactional id then has)
//!             AlreadyDone { .. }                answer NONE (a retried EndTxn)
//!             Error(code)                       answer it
//!           DescribeTransactions -> c.describe(id) (None: TRANSACTIONAL_ID_NOT_FOUND;
//!                                   an empty id: INVALID_REQUEST, as Kafka answers)
//!           ListTransactions     -> c.list(states, producer_ids)
//! markers:  WriteMarkers { .. }: append a COMMIT/ABORT control batch with the producer
//!           id and epoch to every partition (idempotent in storage), for a commit apply
//!           offsets_to_commit to the group coordinator, then persist
//!           c.markers_written(now, txn_id) (CompleteCommit/CompleteAbort). If that
//!           append fails, the transaction stays Prepare*: retry later from
//!           c.recovery_effects() (or after the reopen that a storage failure forces).
//! timers:   sleep until c.next_deadline_ms(), then persist c.on_tick(now)'s records as
//!           one batch and write each of its markers; recompute the deadline after it.
//! compaction: c.snapshot() is the live content of the log (one record per key); write it
//!           as the new log with no records in flight.
//! ```
//!
//! `now_ms` is wall-clock milliseconds since the Unix epoch (transaction start times and
//! last-update times are persisted, and timeouts and expiry span restarts). Time going
//! backwards delays timeouts; nothing breaks. The coordinator is single-threaded: the
//! server owns it from one task and feeds it calls one at a time.
//!
//! The server owns what needs the outside world: `NOT_COORDINATOR`,
//! `COORDINATOR_LOAD_IN_PROGRESS` while it replays the log, FindCoordinator, authorization,
//! unknown topics (`UNKNOWN_TOPIC_OR_PARTITION` before calling add_partitions), the
//! idempotent producers' sequence state (`UNKNOWN_PRODUCER_ID`), and Kafka's
//! version mapping of `PRODUCER_FENCED` to `INVALID_PRODUCER_EPOCH` for old request
//! versions (InitProducerId < v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn < v2).
//! InitProducerId's `expected` is `None` when the request carries producer id -1.
//!
//! # Example
//!
//! ```
//! use sluice_txn::*;
//!
//! let mut c = Coordinator::new(TxnConfig::default());
//! let InitOutcome::Done { producer_id, producer_epoch, records } =
//!     c.init_producer_id(0, Some("t"), 60_000, None)
//! else {
//!     panic!("a new transactional id gets a producer id");
//! };
//! c.apply(&records); // after the server appended them
//! let tp = TopicPartition { topic: "orders".into(), partition: 0 };
//! let records = c.add_partitions(1, "t", producer_id, producer_epoch, &[tp.clone()]).unwrap();
//! c.apply(&records);
//! let EndOutcome::Prepared { records, markers } = c.end_txn(2, "t", producer_id, producer_epoch, true, TxnProtocol::V1)
//! else {
//!     panic!("an Ongoing transaction commits");
//! };
//! c.apply(&records);
//! assert_eq!(markers.partitions, vec![tp]);
//! let records = c.markers_written(3, "t");
//! c.apply(&records);
//! assert_eq!(c.describe("t").unwrap().state, "CompleteCommit");
//! ```
//!
//! # Where Sluice differs from Kafka's transaction coordinator (on purpose)
//! - Producer ids come from blocks this coordinator reserves in its own log (Kafka: from
//!   the controller); a restart skips the rest of the block.
//! - AddOffsetsToTxn records the group among the transaction's pending offsets instead of
//!   adding the group's `__consumer_offsets` partition, and TxnOffsetCommit is checked here
//!   (Ongoing, group added) instead of by the group coordinator; committed offsets reach
//!   the group coordinator in the commit's [`WriteMarkers`].
//! - Every collection has a cap ([`limits`]); Kafka has none per transaction.
//! - The epoch never overflows: fencing at `i16::MAX` keeps the epoch (Kafka throws).
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why.
//! - [`error`]: [`ErrorCode`] (Kafka's numbers, `sluice_kafka`'s one table) and
//!   [`DecodeError`] for log records.
//! - [`config`]: [`TxnConfig`], Kafka's `transaction.*` broker keys.
//! - [`state`]: [`TxnState`], Kafka's names and ids.
//! - [`records`]: [`TxnMetadata`], [`TxnRecord`] and their byte layout (written and read
//!   with `sluice_kafka::bytes`).
//! - [`api`]: outcomes, effects and views as plain types.
//! - [`coordinator`]: [`Coordinator`]: the persist round trip, producer ids, timers,
//!   recovery, describe/list; `coordinator/init.rs`: InitProducerId;
//!   `coordinator/txn.rs`: AddPartitions, AddOffsets, TxnOffsetCommit, EndTxn, markers.
//! - `fuzz` (feature `fuzz`, test scaffolding: never in the broker binary): the entry point
//!   of the `txn_records` cargo-fuzz target.
//!
//! Architecture Invariant: this crate depends on no other Sluice crate but the leaf
//! `sluice-kafka`, does no I/O and reads no clock.
//!
//! Architecture Invariant: durable state changes only in `load` and `apply`; a call that
//! returns records leaves it untouched, so a failed append needs no undo.

pub mod api;
pub mod config;
pub mod coordinator;
pub mod error;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod limits;
pub mod records;
pub mod state;

pub use api::{
    EndOutcome, InitOutcome, ListedTxn, PartitionVerification, Tick, TxnDescription, TxnProtocol,
    WriteMarkers,
};
pub use config::{ConfigError, TxnConfig};
pub use coordinator::Coordinator;
pub use error::{DecodeError, ErrorCode};
pub use records::{
    NO_PRODUCER_EPOCH, PendingOffset, PendingOffsets, ProducerId, TopicPartition, TxnMetadata,
    TxnRecord, decode,
};
pub use state::TxnState;
