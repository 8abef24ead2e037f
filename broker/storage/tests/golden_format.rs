//! Golden bytes: the segment, index, time index, checkpoint and clean-shutdown files that
//! `docs/format.md` decodes byte by byte are exactly what the log writes. A change here is
//! a format change: update docs/format.md first.

use sluice_storage::testing::{TestRecord, build_batch};
use sluice_storage::{Durability, Log, LogConfig};

const LOG: &str = "
0000 0000 0000 0000 0000 003f 0000 0000 0250 28da 9100 0000 0000 0000 0001 8bcf
e568 0000 0001 8bcf e568 00ff ffff ffff ffff ffff ffff ffff ff00 0000 011a 0000
0004 6b31 0a68 656c 6c6f 0000 0000 0000 0000 0100 0000 4500 0000 0002 b9e7 71f9
0000 0000 0001 0000 018b cfe5 6805 0000 018b cfe5 6808 ffff ffff ffff ffff ffff
ffff ffff 0000 0002 1600 0000 0102 6102 0268 0276 0e00 0602 0102 6200";
const INDEX: &str = "0000 0001 0000 004b";
const TIME_INDEX: &str = "0000 018b cfe5 6800 0000 0000 0000 018b cfe5 6808 0000 0002";
const CLEAN_SHUTDOWN: &str = "534c 4353 0001 0000 0000 0000 0000 0003 4a0f 2727";
const CHECKPOINT: &str = "534c 434b 0001 0000 0000 0000 0000 0000 0000 0000 0000 0003 8d9f 7593";

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn files_match_the_documented_hex_dump() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        index_interval_bytes: 0,
        ..LogConfig::default()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    let hello = TestRecord {
        key: Some(b"k1"),
        value: Some(b"hello"),
        timestamp_delta: 0,
        headers: vec![],
    };
    let mut first = build_batch(0, 1_700_000_000_000, &[hello]);
    log.append(&mut first, Durability::OsCache, 0).unwrap();
    let a = TestRecord {
        key: None,
        value: Some(b"a"),
        timestamp_delta: 0,
        headers: vec![(b"h", Some(b"v"))],
    };
    let b = TestRecord {
        key: None,
        value: Some(b"b"),
        timestamp_delta: 3,
        headers: vec![],
    };
    let mut second = build_batch(0, 1_700_000_000_005, &[a, b]);
    log.append(&mut second, Durability::OsCache, 0).unwrap();
    log.close().unwrap();
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert_eq!(read("00000000000000000000.log"), hex(LOG));
    assert_eq!(read("00000000000000000000.index"), hex(INDEX));
    assert_eq!(read("00000000000000000000.timeindex"), hex(TIME_INDEX));
    assert_eq!(read("clean-shutdown"), hex(CLEAN_SHUTDOWN));
    assert_eq!(read("partition.checkpoint"), hex(CHECKPOINT));
}
