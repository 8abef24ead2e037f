//! KIP-110: zstd record batches need Produce v7+ and Fetch v10+. Clients older than that
//! cannot decode zstd, so Kafka refuses a zstd batch from an old producer and, to an old
//! fetcher, answers UNSUPPORTED_COMPRESSION_TYPE for a partition whose data holds one.

use kafka_protocol::ResponseError;
use sluice_storage::batch::iter_batches;
use sluice_storage::{Compression, ReadSlice};

use crate::error::KafkaError;

/// The first Produce version whose clients may send zstd batches.
pub const PRODUCE_ZSTD_MIN_VERSION: i16 = 7;
/// The first Fetch version whose clients may receive zstd batches.
pub const FETCH_ZSTD_MIN_VERSION: i16 = 10;

/// Refuses produced `records` holding a zstd batch when `version` predates zstd. Malformed
/// bytes pass through: the storage engine rejects them with the precise error.
pub fn check_produce(records: &[u8], version: i16) -> Result<(), KafkaError> {
    if version >= PRODUCE_ZSTD_MIN_VERSION {
        return Ok(());
    }
    let zstd = iter_batches(records)
        .map_while(Result::ok)
        .any(|(header, _)| header.compression() == Compression::Zstd);
    if zstd {
        return Err(unsupported(format!(
            "zstd record batches need Produce v{PRODUCE_ZSTD_MIN_VERSION}+ (request is v{version})"
        )));
    }
    Ok(())
}

/// Whether a fetch at `version` may not be sent `slice` because it holds a zstd batch.
pub fn fetch_refuses(slice: &ReadSlice, version: i16) -> std::io::Result<bool> {
    if version >= FETCH_ZSTD_MIN_VERSION || slice.is_empty() {
        return Ok(false);
    }
    let mut zstd = false;
    slice.for_each_header(|header| zstd |= header.compression() == Compression::Zstd)?;
    Ok(zstd)
}

fn unsupported(message: String) -> KafkaError {
    KafkaError::new(ResponseError::UnsupportedCompressionType, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_storage::testing;

    #[test]
    fn zstd_batch_is_refused_below_produce_v7_only() {
        let mut zstd = testing::build_value_batch(1, 1, b'a', 0);
        zstd[22] |= 4; // attributes low byte: compression 4 (zstd)
        let plain = testing::build_value_batch(1, 1, b'a', 0);
        let err = check_produce(&zstd, 6).unwrap_err();
        assert_eq!(err.code, ResponseError::UnsupportedCompressionType);
        assert!(check_produce(&zstd, 7).is_ok());
        assert!(check_produce(&plain, 3).is_ok());
        let mut both = plain.clone();
        both.extend_from_slice(&zstd);
        assert!(check_produce(&both, 3).is_err());
    }

    #[test]
    fn fetch_below_v10_refuses_a_slice_holding_a_zstd_batch() {
        use sluice_storage::{Durability, Log, LogConfig, Offset};
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
        let mut plain = testing::build_value_batch(2, 10, b'a', 0);
        log.append(&mut plain, Durability::OsCache, 0).unwrap();
        let mut zstd = testing::build_value_batch(1, 10, b'z', 0);
        zstd[22] |= 4;
        let crc = sluice_storage::batch::compute_crc(&zstd);
        zstd[17..21].copy_from_slice(&crc.to_be_bytes());
        log.append(&mut zstd, Durability::OsCache, 0).unwrap();
        let only_plain = log.read(Offset(0), 1).unwrap();
        assert!(!fetch_refuses(&only_plain, 4).unwrap());
        let everything = log.read(Offset(0), 1 << 20).unwrap();
        assert!(fetch_refuses(&everything, 9).unwrap());
        assert!(!fetch_refuses(&everything, 10).unwrap());
    }
}
