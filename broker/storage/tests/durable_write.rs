//! `io::durable`, the one durable-metadata mechanism, crashed between every two steps.
//!
//! A `Stepping` filesystem wraps `FaultyFs` and, after every operation (open, write,
//! set_len, sync, rename, remove, create, sync_dir), takes the crash image a machine would
//! leave in each `CrashMode`. For a durable write every image must hold the old content or
//! the new, byte for byte, never a missing or partial file; for a durable directory creation
//! the directory is in every image taken after the call returned. Failed writes and fsyncs
//! are injected with `fail_nth_write`/`fail_nth_sync`: the error is returned, the fsync is
//! not retried (the sync count proves it), no temp file is left, and the crash image has the
//! old content. Stale temp files are recognised by name and removed at open.

use sluice_storage::io::{self, CrashMode, FaultyFs, Fs, StorageFile};
use sluice_storage::{Log, LogConfig};
use std::path::Path;
use std::sync::{Arc, Mutex};

const MODES: [CrashMode; 3] = [
    CrashMode::DurableOnly,
    CrashMode::AllWritten,
    CrashMode::TornLastWrite,
];
const OLD: &[u8] = b"{\"name\":\"old\",\"partitions\":1}";
const NEW: &[u8] = b"{\"name\":\"new\",\"partitions\":12,\"configs\":{\"retention.ms\":\"1\"}}";

/// `FaultyFs` that records every crash image after every operation.
#[derive(Debug, Clone)]
struct Stepping {
    inner: FaultyFs,
    images: Arc<Mutex<Vec<(usize, CrashMode, FaultyFs)>>>,
}

#[derive(Debug)]
struct SteppingFile {
    fs: Stepping,
    file: Arc<dyn StorageFile>,
}

impl Stepping {
    fn new(inner: FaultyFs) -> Self {
        Self {
            inner,
            images: Arc::default(),
        }
    }

    fn step<T>(&self, result: std::io::Result<T>) -> std::io::Result<T> {
        let mut images = self.images.lock().unwrap();
        let step = images.len() / MODES.len();
        for mode in MODES {
            images.push((step, mode, self.inner.crash(mode)));
        }
        result
    }

    fn images(&self) -> Vec<(usize, CrashMode, FaultyFs)> {
        std::mem::take(&mut *self.images.lock().unwrap())
    }
}

impl StorageFile for SteppingFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> std::io::Result<()> {
        self.file.read_at(buf, pos)
    }
    fn write_at(&self, buf: &[u8], pos: u64) -> std::io::Result<()> {
        self.fs.step(self.file.write_at(buf, pos))
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.fs.step(self.file.set_len(len))
    }
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }
    fn sync(&self) -> std::io::Result<()> {
        self.fs.step(self.file.sync())
    }
}

impl Fs for Stepping {
    fn open(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn StorageFile>> {
        let file = self.step(self.inner.open(path, create))?;
        Ok(Arc::new(SteppingFile {
            fs: self.clone(),
            file,
        }))
    }
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.step(self.inner.create_dir_all(path))
    }
    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.step(self.inner.remove_dir_all(path))
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn exists(&self, path: &Path) -> std::io::Result<bool> {
        self.inner.exists(path)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.step(self.inner.remove(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.step(self.inner.rename(from, to))
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.step(self.inner.sync_dir(dir))
    }
}

/// The whole content of `path`, or `None` if it is absent.
fn content(fs: &dyn Fs, path: &Path) -> Option<Vec<u8>> {
    let file = match fs.open(path, false) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("opening {}: {e}", path.display()),
    };
    let mut buf = vec![0u8; file.len().unwrap() as usize];
    file.read_at(&mut buf, 0).unwrap();
    Some(buf)
}

fn temps(fs: &dyn Fs, dir: &Path) -> Vec<String> {
    let names = fs.list(dir).unwrap();
    names.into_iter().filter(|n| io::is_temp_name(n)).collect()
}

/// A filesystem holding `dir/name` = OLD, durably.
fn with_old(dir: &Path, name: &str) -> FaultyFs {
    let fs = FaultyFs::new();
    io::create_dir_durable(&fs, dir).unwrap();
    io::write_durable(&fs, &dir.join(name), OLD).unwrap();
    fs
}

#[test]
fn a_crash_after_any_step_of_a_durable_write_leaves_the_old_or_the_new_content() {
    let dir = Path::new("/data/topics/events");
    let path = dir.join("topic.json");
    let stepping = Stepping::new(with_old(dir, "topic.json"));
    io::write_durable(&stepping, &path, NEW).unwrap();
    let images = stepping.images();
    assert!(
        images.len() >= 6 * MODES.len(),
        "open, set_len, write, sync, rename, sync_dir"
    );
    let mut saw_new_after_a_crash = false;
    for (step, mode, image) in &images {
        let found = content(image, &path);
        assert!(
            found.as_deref() == Some(OLD) || found.as_deref() == Some(NEW),
            "step {step}, {mode:?}: {found:?} is neither the old nor the new content"
        );
        saw_new_after_a_crash |= found.as_deref() == Some(NEW);
    }
    assert!(
        saw_new_after_a_crash,
        "the rename is visible after some crash"
    );
    // After the call returned, every kind of crash keeps the new content.
    let (last_step, _, _) = images.last().unwrap();
    for (_, mode, image) in images.iter().filter(|(s, _, _)| s == last_step) {
        assert_eq!(content(image, &path).as_deref(), Some(NEW), "{mode:?}");
    }
    assert_eq!(content(&stepping.inner, &path).as_deref(), Some(NEW));
    assert!(temps(&stepping.inner, dir).is_empty());
}

#[test]
fn a_crash_during_a_first_write_leaves_no_file_or_the_whole_file() {
    let dir = Path::new("/data/views");
    let path = dir.join("v.json");
    let fs = FaultyFs::new();
    io::create_dir_durable(&fs, dir).unwrap();
    let stepping = Stepping::new(fs);
    io::write_durable(&stepping, &path, NEW).unwrap();
    for (step, mode, image) in stepping.images() {
        let found = content(&image, &path);
        assert!(
            found.is_none() || found.as_deref() == Some(NEW),
            "step {step}, {mode:?}: partial file {found:?}"
        );
    }
}

#[test]
fn a_failed_fsync_is_reported_once_and_leaves_the_old_content() {
    let dir = Path::new("/data/topics/t");
    let path = dir.join("topic.json");
    // The first sync is the temp file's, the second the directory's.
    for nth in [1, 2] {
        let fs = with_old(dir, "topic.json");
        let syncs = fs.syncs();
        fs.fail_nth_sync(nth);
        let err = io::write_durable(&fs, &path, NEW).unwrap_err();
        assert!(err.to_string().contains("injected"), "{err}");
        assert_eq!(
            fs.syncs(),
            syncs + nth,
            "sync {nth} failed and nothing was retried"
        );
        assert!(temps(&fs, dir).is_empty(), "the temp file is removed");
        let durable = fs.crash(CrashMode::DurableOnly);
        assert_eq!(content(&durable, &path).as_deref(), Some(OLD), "sync {nth}");
        // A later write does its own fsyncs rather than trusting the failed one.
        let syncs = fs.syncs();
        io::write_durable(&fs, &path, NEW).unwrap();
        assert_eq!(fs.syncs(), syncs + 2);
        let durable = fs.crash(CrashMode::DurableOnly);
        assert_eq!(content(&durable, &path).as_deref(), Some(NEW));
    }
}

#[test]
fn a_failed_write_leaves_the_old_content_and_no_temp_file() {
    let dir = Path::new("/data");
    let path = dir.join("cluster.json");
    for nth in [1, 2] {
        let fs = with_old(dir, "cluster.json");
        fs.fail_nth_write(nth);
        assert!(io::write_durable(&fs, &path, NEW).is_err());
        assert_eq!(content(&fs, &path).as_deref(), Some(OLD));
        assert!(temps(&fs, dir).is_empty());
        for mode in MODES {
            assert_eq!(content(&fs.crash(mode), &path).as_deref(), Some(OLD));
        }
    }
}

#[test]
fn a_created_directory_survives_a_crash_only_once_the_durable_call_returns() {
    let file = Path::new("/data/topics/t/0/partition.checkpoint");
    let dir = file.parent().unwrap();
    // Without the durable call the file's own fsyncs are not enough: the chain is lost.
    let fs = FaultyFs::new();
    fs.create_dir_all(dir).unwrap();
    io::write_durable(&fs, file, OLD).unwrap();
    let durable = fs.crash(CrashMode::DurableOnly);
    assert_eq!(
        content(&durable, file),
        None,
        "an unsynced directory loses its files"
    );
    assert!(!durable.exists(dir).unwrap());

    // With it: two new directories (t, t/0) under an existing one; each parent is synced.
    let fs = FaultyFs::new();
    io::create_dir_durable(&fs, Path::new("/data/topics")).unwrap();
    let stepping = Stepping::new(fs);
    io::create_dir_durable(&stepping, dir).unwrap();
    let images = stepping.images();
    let (last_step, _, _) = *images.last().unwrap();
    for (step, mode, image) in &images {
        let has_leaf = image.exists(dir).unwrap();
        if has_leaf {
            assert!(
                image.exists(dir.parent().unwrap()).unwrap(),
                "child without parent"
            );
        }
        if *step == last_step || *mode != CrashMode::DurableOnly {
            assert!(
                has_leaf,
                "step {step}, {mode:?}: missing after the call returned"
            );
        }
    }
    let durable_before_return = images
        .iter()
        .filter(|(s, m, _)| *s < last_step && *m == CrashMode::DurableOnly)
        .all(|(_, _, image)| !image.exists(dir).unwrap());
    assert!(
        durable_before_return,
        "durable only through the grandparent's fsync, last"
    );
    io::write_durable(&stepping.inner, file, NEW).unwrap();
    let durable = stepping.inner.crash(CrashMode::DurableOnly);
    assert_eq!(content(&durable, file).as_deref(), Some(NEW));
}

#[test]
fn a_relative_directory_is_created_and_its_working_directory_synced() {
    let fs = FaultyFs::new();
    let syncs = fs.syncs();
    io::create_dir_durable(&fs, Path::new("sluice-data")).unwrap();
    assert!(fs.exists(Path::new("sluice-data")).unwrap());
    assert_eq!(fs.syncs(), syncs + 1, "the working directory is synced");
    let durable = fs.crash(CrashMode::DurableOnly);
    assert!(durable.exists(Path::new("sluice-data")).unwrap());
}

#[test]
fn a_failed_directory_fsync_is_reported_and_a_retry_syncs_again() {
    let dir = Path::new("/data/topics/t");
    let fs = FaultyFs::new();
    io::create_dir_durable(&fs, Path::new("/data/topics")).unwrap();
    fs.fail_nth_sync(1);
    assert!(io::create_dir_durable(&fs, dir).is_err());
    assert!(
        !fs.exists(dir).unwrap(),
        "what was created is removed again"
    );
    let syncs = fs.syncs();
    io::create_dir_durable(&fs, dir).unwrap();
    assert_eq!(fs.syncs(), syncs + 1, "the retry fsyncs the parent itself");
    assert!(fs.crash(CrashMode::DurableOnly).exists(dir).unwrap());
}

#[test]
fn removing_and_renaming_directories_are_durable_when_they_return() {
    let topics = Path::new("/data/topics");
    let deleting = Path::new("/data/deleting");
    let file = topics.join("t/topic.json");
    let fs = FaultyFs::new();
    io::create_dir_durable(&fs, &topics.join("t")).unwrap();
    io::create_dir_durable(&fs, deleting).unwrap();
    io::write_durable(&fs, &file, OLD).unwrap();

    let aside = deleting.join("t.1");
    io::rename_durable(&fs, &topics.join("t"), &aside).unwrap();
    let durable = fs.crash(CrashMode::DurableOnly);
    assert!(!durable.exists(&topics.join("t")).unwrap());
    assert_eq!(
        content(&durable, &aside.join("topic.json")).as_deref(),
        Some(OLD)
    );

    io::remove_dir_durable(&fs, &aside).unwrap();
    let durable = fs.crash(CrashMode::DurableOnly);
    assert!(!durable.exists(&aside).unwrap());
    assert_eq!(content(&durable, &aside.join("topic.json")), None);
    // Removing what is already gone is not an error.
    io::remove_dir_durable(&fs, &aside).unwrap();
    io::remove_file_durable(&fs, &file).unwrap();
}

#[test]
fn temp_files_never_collide_with_real_names_and_stale_ones_are_removed_at_open() {
    for real in [
        "topic.json",
        "cluster.json",
        "generation.json",
        "partition.checkpoint",
        "clean-shutdown",
        "00000000000000000000.log",
        "murmur2.wasm",
        "murmur2.cwasm",
        ".incoming",
        ".lock",
    ] {
        assert!(!io::is_temp_name(real), "{real}");
    }
    // A crash after the temp file was written, before the rename, leaves it behind.
    let dir = Path::new("/data/events-0");
    let stepping = Stepping::new(with_old(dir, "partition.checkpoint"));
    io::write_durable(&stepping, &dir.join("partition.checkpoint"), NEW).unwrap();
    let (_, _, image) = stepping
        .images()
        .into_iter()
        .find(|(_, mode, image)| *mode == CrashMode::AllWritten && !temps(image, dir).is_empty())
        .expect("some crash image holds the temp file");
    assert_eq!(io::remove_stale_temps(&image, dir).unwrap(), 1);
    assert!(temps(&image, dir).is_empty());
    assert_eq!(
        io::remove_stale_temps(&image, Path::new("/nowhere")).unwrap(),
        0
    );

    // The storage engine removes them when it opens a partition.
    let stepping = Stepping::new(FaultyFs::new());
    let log = Log::open_with(Arc::new(stepping.clone()), dir, LogConfig::default(), 0).unwrap();
    log.close().unwrap();
    let (_, _, image) = stepping
        .images()
        .into_iter()
        .find(|(_, mode, image)| *mode == CrashMode::AllWritten && !temps(image, dir).is_empty())
        .expect("closing writes the clean-shutdown marker through a temp file");
    let log = Log::open_with(Arc::new(image.clone()), dir, LogConfig::default(), 0).unwrap();
    assert!(temps(&image, dir).is_empty(), "{:?}", image.list(dir));
    drop(log);
}
