//! Storage benchmarks (no criterion): each measurement runs its baseline and its subject in
//! the same process, alternating, several repetitions, and prints medians and ratios.
//!
//! Run: `cargo bench -p sluice-storage --bench storage` (add `-- --reps 7` to change the
//! repetitions, `--quick` for a smoke run). Files go to a temp dir under `$TMPDIR` (same
//! filesystem as the baseline files) and are removed at the end, the 1 GiB segment too.

use sluice_storage::testing::{build_value_batch, set_producer};
use sluice_storage::{Durability, Log, LogConfig, Offset};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1024 * 1024;
const VALUE_BYTES: usize = 100;

struct Settings {
    reps: usize,
    /// Bytes appended per repetition of the large-batch append benchmark.
    append_total_bytes: usize,
    recovery_segment_bytes: usize,
    single_record_appends: usize,
    open_segments: usize,
}

fn settings() -> Settings {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(7);
    if args.iter().any(|a| a == "--quick") {
        return Settings {
            reps: 3,
            append_total_bytes: 32 * MIB,
            recovery_segment_bytes: 64 * MIB,
            single_record_appends: 20_000,
            open_segments: 100,
        };
    }
    Settings {
        reps,
        append_total_bytes: 256 * MIB,
        recovery_segment_bytes: 1024 * MIB,
        single_record_appends: 200_000,
        open_segments: 1_000,
    }
}

/// CPU time of this thread (user + system): unlike wall time, it does not count the time
/// the machine's other tenants held the CPU.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Wall and thread-CPU time of `f`.
fn timed(f: impl FnOnce()) -> (Duration, Duration) {
    let (wall, cpu) = (Instant::now(), thread_cpu());
    f();
    (wall.elapsed(), thread_cpu() - cpu)
}

/// Medians of wall and CPU samples.
fn medians(samples: Vec<(Duration, Duration)>) -> (Duration, Duration) {
    let (wall, cpu): (Vec<_>, Vec<_>) = samples.into_iter().unzip();
    (median(wall), median(cpu))
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The largest batch of 100-byte-value records that is at most `bytes` long.
fn batch_of_at_most(bytes: usize) -> Vec<u8> {
    let one = build_value_batch(1, VALUE_BYTES, 0x42, 1_000).len();
    let mut count = bytes / (one - 61).max(1);
    loop {
        let batch = build_value_batch(count, VALUE_BYTES, 0x42, 1_000);
        if batch.len() <= bytes {
            return batch;
        }
        count -= (batch.len() - bytes) / 100 + 1;
    }
}

fn records_in(batch: &[u8]) -> u64 {
    u64::from(
        sluice_storage::batch::parse_header(batch)
            .unwrap()
            .records_count as u32,
    )
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}")
}

fn bench_append_large(dir: &Path, s: &Settings) {
    let mut batch = batch_of_at_most(MIB);
    let count = s.append_total_bytes / batch.len();
    let total = (count * batch.len()) as f64;
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    for rep in 0..s.reps {
        let path = dir.join(format!("raw-{rep}.bin"));
        raw.push(timed(|| {
            let mut file = File::create(&path).unwrap();
            for _ in 0..count {
                file.write_all(&batch).unwrap();
            }
        }));
        std::fs::remove_file(&path).unwrap();

        let log_dir = dir.join(format!("append-{rep}"));
        let mut log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
        ours.push(timed(|| {
            for _ in 0..count {
                log.append(&mut batch, Durability::OsCache, 0).unwrap();
            }
        }));
        drop(log);
        std::fs::remove_dir_all(&log_dir).unwrap();
    }
    let ((raw_wall, raw_cpu), (wall, cpu)) = (medians(raw), medians(ours));
    println!(
        "| append {} B batches ({} records), {count} per run, vs write(2) of the same bytes | {:.0} MB/s | {:.0} MB/s | {:.2}x wall, {:.2}x CPU |",
        batch.len(),
        records_in(&batch),
        total / secs(raw_wall) / 1e6,
        total / secs(wall) / 1e6,
        secs(raw_wall) / secs(wall),
        secs(raw_cpu) / secs(cpu)
    );
}

/// CPU cost of validating a 1 MiB batch (CRC-32C + record walk), no I/O.
fn bench_validate(s: &Settings) {
    let batch = batch_of_at_most(MIB);
    let mut times = Vec::new();
    for _ in 0..s.reps {
        let start = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(
                sluice_storage::batch::validate(std::hint::black_box(&batch)).unwrap(),
            );
        }
        times.push(start.elapsed() / 100);
    }
    let crc = Instant::now();
    for _ in 0..100 {
        std::hint::black_box(sluice_storage::batch::compute_crc(std::hint::black_box(
            &batch,
        )));
    }
    let crc = crc.elapsed() / 100;
    let t = median(times);
    println!(
        "| validate a {} B batch in memory (CRC-32C alone: {:.0} MB/s) | | {:.0} MB/s ({:.0} us) | |",
        batch.len(),
        batch.len() as f64 / secs(crc) / 1e6,
        batch.len() as f64 / secs(t) / 1e6,
        secs(t) * 1e6
    );
}

fn bench_append_small(dir: &Path, s: &Settings) {
    for records in [1usize, 10] {
        let mut batch = build_value_batch(records, VALUE_BYTES, 0x17, 1_000);
        let appends = s.single_record_appends / records;
        let mut times = Vec::new();
        for rep in 0..s.reps {
            let log_dir = dir.join(format!("small-{records}-{rep}"));
            let mut log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
            let start = Instant::now();
            for _ in 0..appends {
                log.append(&mut batch, Durability::OsCache, 0).unwrap();
            }
            times.push(start.elapsed());
            drop(log);
            std::fs::remove_dir_all(&log_dir).unwrap();
        }
        let t = secs(median(times));
        println!(
            "| append {records}-record batches ({} B), {appends} per run | {:.0} batches/s | {:.0} records/s | {:.0} MB/s |",
            batch.len(),
            appends as f64 / t,
            (appends * records) as f64 / t,
            (appends * batch.len()) as f64 / t / 1e6
        );
    }
}

/// One log's appends of pre-built `batches`, in order: (wall, CPU).
fn append_all(dir: &Path, batches: &mut [Vec<u8>]) -> (Duration, Duration) {
    let mut log = Log::open(dir, LogConfig::default(), 0).unwrap();
    let time = timed(|| {
        for batch in batches.iter_mut() {
            let outcome = log.append(batch, Durability::OsCache, 0).unwrap();
            assert!(!outcome.duplicate);
        }
    });
    drop(log);
    std::fs::remove_dir_all(dir).unwrap();
    time
}

/// `count` copies of `batch`; with a producer id, at epoch 0 with consecutive sequences.
fn copies(batch: &[u8], count: usize, producer_id: Option<i64>) -> Vec<Vec<u8>> {
    let records = records_in(batch) as usize;
    (0..count)
        .map(|i| {
            let mut b = batch.to_vec();
            match producer_id {
                Some(id) => set_producer(&mut b, id, 0, (i * records) as i32, false),
                None => set_producer(&mut b, -1, -1, -1, false),
            }
            b
        })
        .collect()
}

/// The producer-state checks of idempotent appends: the same batches with a producer id,
/// epoch and consecutive sequences against the same batches without (producer id -1),
/// alternating log by log.
fn bench_append_idempotent(dir: &Path, s: &Settings) {
    for records in [1usize, 100] {
        let appends = s.single_record_appends / records;
        let batch = build_value_batch(records, VALUE_BYTES, 0x2a, 1_000);
        let mut plain = copies(&batch, appends, None);
        let mut idempotent = copies(&batch, appends, Some(7));
        let (mut base, mut ours) = (Vec::new(), Vec::new());
        for rep in 0..s.reps {
            base.push(append_all(
                &dir.join(format!("plain-{records}-{rep}")),
                &mut plain,
            ));
            ours.push(append_all(
                &dir.join(format!("idem-{records}-{rep}")),
                &mut idempotent,
            ));
        }
        let ((bw, bc), (ow, oc)) = (medians(base), medians(ours));
        println!(
            "| append {records}-record batches ({} B), {appends} per run: plain vs idempotent | {:.0} batches/s | {:.0} batches/s | {:.2}x wall, {:.2}x CPU |",
            batch.len(),
            appends as f64 / secs(bw),
            appends as f64 / secs(ow),
            secs(bw) / secs(ow),
            secs(bc) / secs(oc)
        );
    }
}

/// acks=all on one node: every append fsyncs the segment before returning.
fn bench_append_fsync(dir: &Path, s: &Settings) {
    let mut batch = build_value_batch(1, VALUE_BYTES, 0x33, 1_000);
    let appends = s.single_record_appends / 500;
    let mut times = Vec::new();
    for rep in 0..s.reps {
        let log_dir = dir.join(format!("fsync-{rep}"));
        let mut log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
        let start = Instant::now();
        for _ in 0..appends {
            log.append(&mut batch, Durability::Fsync, 0).unwrap();
        }
        times.push(start.elapsed());
        drop(log);
        std::fs::remove_dir_all(&log_dir).unwrap();
    }
    let t = secs(median(times));
    println!(
        "| append 1-record batches with Durability::Fsync (acks=all), {appends} per run | | {:.0} appends/s ({:.2} ms each) | |",
        appends as f64 / t,
        t * 1e3 / appends as f64
    );
}

fn bench_read(dir: &Path, s: &Settings) {
    let mut batch = batch_of_at_most(16 * 1024);
    let per_batch = records_in(&batch) as i64;
    let log_dir = dir.join("read");
    let mut log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
    let count = s.append_total_bytes / batch.len();
    for _ in 0..count {
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    let total = (count * batch.len()) as u64;
    let file = File::open(log_dir.join(format!("{:020}.log", 0))).unwrap();
    let mut buf = Vec::with_capacity(2 * MIB);
    let read_log = |buf: &mut Vec<u8>| {
        let (mut next, mut bytes) = (0i64, 0u64);
        while next < log.log_end_offset().value() {
            let slice = log.read(Offset(next), MIB as u32).unwrap();
            slice.read_into(buf).unwrap();
            bytes += u64::from(slice.len);
            next += per_batch * (slice.len as usize / batch.len()) as i64;
        }
        assert_eq!(bytes, total);
    };
    let read_raw = |buf: &mut Vec<u8>| {
        buf.resize(MIB, 0);
        let mut position = 0u64;
        while position < total {
            let len = (total - position).min(MIB as u64) as usize;
            file.read_exact_at(&mut buf[..len], position).unwrap();
            position += len as u64;
        }
    };
    read_raw(&mut buf); // warm the page cache
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..s.reps {
        raw.push(timed(|| read_raw(&mut buf)));
        ours.push(timed(|| read_log(&mut buf)));
    }
    let ((raw_wall, raw_cpu), (wall, cpu)) = (medians(raw), medians(ours));
    let total = total as f64;
    println!(
        "| read {} MiB from page cache, {} B batches, 1 MiB fetches, vs pread(2) in 1 MiB chunks | {:.0} MB/s | {:.0} MB/s | {:.2}x wall, {:.2}x CPU |",
        total as u64 / MIB as u64,
        batch.len(),
        total / secs(raw_wall) / 1e6,
        total / secs(wall) / 1e6,
        secs(raw_wall) / secs(wall),
        secs(raw_cpu) / secs(cpu)
    );
    drop(log);
    std::fs::remove_dir_all(&log_dir).unwrap();
}

fn bench_recovery(dir: &Path, s: &Settings) {
    let mut batch = batch_of_at_most(MIB);
    let log_dir = dir.join("recovery");
    let mut log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
    while log.size_bytes() + batch.len() as u64 <= s.recovery_segment_bytes as u64 {
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    log.flush().unwrap();
    let (size, end) = (log.size_bytes(), log.log_end_offset());
    drop(log); // unclean: the active segment is scanned on every open
    let file = File::open(log_dir.join(format!("{:020}.log", 0))).unwrap();
    let mut buf = vec![0u8; 4 * MIB];
    let (mut raw, mut opens) = (Vec::new(), Vec::new());
    for _ in 0..s.reps {
        let start = Instant::now();
        let mut position = 0u64;
        while position < size {
            let len = (size - position).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..len], position).unwrap();
            position += len as u64;
        }
        raw.push(start.elapsed());
        let start = Instant::now();
        let log = Log::open(&log_dir, LogConfig::default(), 0).unwrap();
        opens.push(start.elapsed());
        assert_eq!(log.log_end_offset(), end);
    }
    let (raw, open) = (median(raw), median(opens));
    println!(
        "| recovery scan of a {} MiB active segment (unclean open) | {:.0} MB/s raw read | {:.0} MB/s ({:.0} ms) | {:.2}x |",
        size / MIB as u64,
        size as f64 / secs(raw) / 1e6,
        size as f64 / secs(open) / 1e6,
        secs(open) * 1e3,
        secs(raw) / secs(open)
    );
    std::fs::remove_dir_all(&log_dir).unwrap();
}

fn bench_open_clean(dir: &Path, s: &Settings) {
    let mut batch = batch_of_at_most(16 * 1024);
    let log_dir = dir.join("open");
    let cfg = LogConfig {
        segment_bytes: 4 * batch.len() as u32,
        ..LogConfig::default()
    };
    let mut log = Log::open(&log_dir, cfg.clone(), 0).unwrap();
    while log.segment_count() < s.open_segments {
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    log.close().unwrap();
    let mut opens = Vec::new();
    for _ in 0..s.reps {
        let start = Instant::now();
        let log = Log::open(&log_dir, cfg.clone(), 0).unwrap();
        opens.push(start.elapsed());
        assert_eq!(log.segment_count(), s.open_segments);
        log.close().unwrap();
    }
    println!(
        "| open a cleanly closed log of {} segments | | {:.1} ms | goal < 200 ms |",
        s.open_segments,
        secs(median(opens)) * 1e3
    );
    std::fs::remove_dir_all(&log_dir).unwrap();
}

/// A compacted log of about `s.append_total_bytes` in 32 MiB segments, 16 KiB batches of
/// records with 100-byte values and keys cycling through 10% as many keys as records.
fn compacted_log(log_dir: &Path, s: &Settings) -> Log {
    use sluice_storage::testing::{TestRecord, build_batch};
    let cfg = LogConfig {
        segment_bytes: 32 * MIB as u32,
        cleanup_policy: sluice_storage::CleanupPolicy::Compact,
        min_cleanable_dirty_ratio_ppm: 0,
        ..LogConfig::default()
    };
    let mut log = Log::open(log_dir, cfg, 0).unwrap();
    let per_batch = 16 * 1024 / (VALUE_BYTES + 20);
    let total_records = s.append_total_bytes / (VALUE_BYTES + 20);
    let unique = (total_records / 10).max(1);
    let value = vec![0x42u8; VALUE_BYTES];
    let mut n = 0usize;
    while log.size_bytes() < s.append_total_bytes as u64 {
        let keys: Vec<Vec<u8>> = (n..n + per_batch)
            .map(|i| format!("key-{:08}", (i * 7919) % unique).into_bytes())
            .collect();
        let records: Vec<TestRecord<'_>> = keys
            .iter()
            .map(|k| TestRecord {
                key: Some(k),
                value: Some(&value),
                ..TestRecord::default()
            })
            .collect();
        let mut batch = build_batch(0, 1_000, &records);
        log.append(&mut batch, Durability::OsCache, 1_000).unwrap();
        n += per_batch;
    }
    log.flush().unwrap();
    log
}

/// Sequential read of a directory's `.log` files with a CRC-32C over every byte.
fn read_and_crc(log_dir: &Path) -> u64 {
    let mut buf = vec![0u8; 4 * MIB];
    let mut bytes = 0u64;
    let mut crc = 0u32;
    for entry in std::fs::read_dir(log_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let file = File::open(&path).unwrap();
        let size = file.metadata().unwrap().len();
        let mut position = 0u64;
        while position < size {
            let len = (size - position).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..len], position).unwrap();
            crc = crc32c::crc32c_append(crc, &buf[..len]);
            position += len as u64;
        }
        bytes += size;
    }
    std::hint::black_box(crc);
    bytes
}

fn bench_clean(dir: &Path, s: &Settings) {
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    let (mut read_bytes, mut cleaned_bytes, mut written_bytes) = (0u64, 0u64, 0u64);
    for rep in 0..s.reps {
        let log_dir = dir.join(format!("clean-{rep}"));
        let mut log = compacted_log(&log_dir, s);
        let start = Instant::now();
        read_bytes = read_and_crc(&log_dir);
        raw.push(start.elapsed());
        let start = Instant::now();
        let outcome = log
            .clean(
                2_000,
                sluice_storage::limits::CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT,
                None,
            )
            .unwrap()
            .expect("dirty");
        ours.push(start.elapsed());
        (cleaned_bytes, written_bytes) = (outcome.bytes_read, outcome.bytes_written);
        drop(log);
        std::fs::remove_dir_all(&log_dir).unwrap();
    }
    let (raw, clean) = (median(raw), median(ours));
    println!(
        "| clean a {} MiB compacted log (10% unique keys; {} MiB of sealed segments rewritten to {} MiB) | {:.0} MB/s read + CRC-32C | {:.0} MB/s ({:.0} ms) | {:.2}x |",
        read_bytes / MIB as u64,
        cleaned_bytes / MIB as u64,
        written_bytes / MIB as u64,
        read_bytes as f64 / secs(raw) / 1e6,
        cleaned_bytes as f64 / secs(clean) / 1e6,
        secs(clean) * 1e3,
        (cleaned_bytes as f64 / secs(clean)) / (read_bytes as f64 / secs(raw))
    );
}

fn main() {
    let s = settings();
    let dir = tempfile::tempdir().unwrap();
    println!(
        "machine: {}; temp dir: {}; {} repetitions, medians",
        machine(),
        dir.path().display(),
        s.reps
    );
    println!();
    println!("| benchmark | baseline | sluice-storage | ratio (baseline time / ours) |");
    println!("|---|---|---|---|");
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    let run = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    if run("validate") {
        bench_validate(&s);
    }
    if run("append") {
        bench_append_large(dir.path(), &s);
        bench_append_small(dir.path(), &s);
        bench_append_fsync(dir.path(), &s);
    }
    if run("append idempotent") {
        bench_append_idempotent(dir.path(), &s);
    }
    if run("read") {
        bench_read(dir.path(), &s);
    }
    if run("recovery") {
        bench_recovery(dir.path(), &s);
    }
    if run("open") {
        bench_open_clean(dir.path(), &s);
    }
    if run("clean") {
        bench_clean(dir.path(), &s);
    }
}
