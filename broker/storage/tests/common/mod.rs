//! Shared helpers for the storage integration tests: a partition log opened on a
//! fault-injecting filesystem.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use sluice_storage::io::FaultyFs;
use sluice_storage::{Log, LogConfig, StorageError};

/// Opens (recovering) the log in `dir` of `fs` at time 0.
pub fn open_faulty(fs: &FaultyFs, dir: &str, config: LogConfig) -> Result<Log, StorageError> {
    Log::open_with(Arc::new(fs.clone()), Path::new(dir), config, 0)
}
