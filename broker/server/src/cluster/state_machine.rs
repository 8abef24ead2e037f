//! The metadata quorum's state machine: openraft's `RaftStateMachine` over a
//! [`MetadataApply`] image ([`MetadataStateMachine`]), with bounded, checksummed snapshots.
//!
//! Applying: every entry moves `last_applied`; a membership entry also becomes the last
//! membership; a normal entry's payload goes to the image, whose reply answers the writer.
//! Every entry that came with a responder is answered (openraft 0.10: an unanswered entry
//! leaves its `client_write` waiting forever), blank and membership ones with an empty reply.
//!
//! Snapshots. The snapshot data (what `full_snapshot` ships to a follower) is the image's
//! encoding framed: `"SLMD" | version u16 = 1 | reserved u16 = 0 | length u64 | bytes | crc
//! u32` (CRC-32C of everything before it), the bytes at most `SNAPSHOT_BYTES_MAX`, checked
//! before it is built and before one is installed. The current snapshot is kept in the file
//! `snapshot` of the state machine's directory, replaced through `write_durable`:
//! `"SLMS" | version u16 = 1 | reserved u16 = 0 | meta length u32 | meta (JSON: last log id,
//! last membership; at most SNAPSHOT_META_BYTES_MAX) | the framed data | crc u32` (CRC-32C of
//! everything before it). At open the image is restored from it, so the state machine
//! restarts at the snapshot and openraft re-applies the log up to the saved committed index.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::TryStreamExt;
use openraft::storage::{EntryResponder, RaftStateMachine, Snapshot};
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use sluice_storage::{Fs, RealFs};

use super::limits::{SNAPSHOT_BYTES_MAX, SNAPSHOT_META_BYTES_MAX};
use super::types::{
    ApplyResponse, LogId, MetaTypes, MetadataApply, SnapshotMeta, StoredMembership,
};

/// The snapshot file's name in the state machine's directory.
pub(crate) const SNAPSHOT_FILE: &str = "snapshot";
const DATA_MAGIC: &[u8; 4] = b"SLMD";
const FILE_MAGIC: &[u8; 4] = b"SLMS";
const VERSION: u16 = 1;
/// Magic, version, reserved, length; then the CRC.
const DATA_HEAD_BYTES: usize = 16;
const FILE_HEAD_BYTES: usize = 12;
const CRC_BYTES: usize = 4;

/// A snapshot of the metadata quorum: its meta and the framed image.
pub type MetaSnapshot = openraft::type_config::alias::SnapshotOf<MetaTypes, Cursor<Vec<u8>>>;

/// The state machine; cheap clones share it (the snapshot builder is a clone).
#[derive(Debug)]
pub struct MetadataStateMachine<A> {
    inner: Arc<Mutex<SmInner<A>>>,
}

impl<A> Clone for MetadataStateMachine<A> {
    fn clone(&self) -> Self {
        MetadataStateMachine {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct SmInner<A> {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    image: A,
    last_applied: Option<LogId>,
    last_membership: StoredMembership,
    /// The current snapshot: its meta and framed data (as in the file).
    current: Option<(SnapshotMeta, Vec<u8>)>,
}

fn invalid(reason: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.into())
}

fn too_large(bytes: usize) -> io::Error {
    io::Error::other(format!(
        "metadata snapshot of {bytes} bytes exceeds SNAPSHOT_BYTES_MAX ({SNAPSHOT_BYTES_MAX})"
    ))
}

/// The image's bytes framed as snapshot data.
fn frame(image: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(DATA_HEAD_BYTES + image.len() + CRC_BYTES);
    out.extend_from_slice(DATA_MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&(image.len() as u64).to_be_bytes());
    out.extend_from_slice(image);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The image's bytes of framed snapshot data, strictly checked.
fn unframe(data: &[u8]) -> io::Result<&[u8]> {
    if data.len() < DATA_HEAD_BYTES + CRC_BYTES {
        return Err(invalid(format!("snapshot data of {} bytes", data.len())));
    }
    let (body, crc) = data.split_at(data.len() - CRC_BYTES);
    if crc32c::crc32c(body).to_be_bytes() != crc {
        return Err(invalid("snapshot data: CRC mismatch"));
    }
    if &body[..4] != DATA_MAGIC || body[4..6] != VERSION.to_be_bytes() || body[6..8] != [0, 0] {
        return Err(invalid(
            "snapshot data: bad magic, version or reserved bytes",
        ));
    }
    let len = u64::from_be_bytes(body[8..16].try_into().expect("8 bytes"));
    if len > SNAPSHOT_BYTES_MAX as u64 {
        return Err(too_large(usize::try_from(len).unwrap_or(usize::MAX)));
    }
    if len != (body.len() - DATA_HEAD_BYTES) as u64 {
        return Err(invalid(format!(
            "snapshot data: length {len} for {} bytes",
            body.len() - DATA_HEAD_BYTES
        )));
    }
    Ok(&body[DATA_HEAD_BYTES..])
}

fn encode_file(meta: &SnapshotMeta, data: &[u8]) -> io::Result<Vec<u8>> {
    let meta_json = serde_json::to_vec(meta).map_err(io::Error::other)?;
    if meta_json.len() > SNAPSHOT_META_BYTES_MAX {
        return Err(io::Error::other(format!(
            "snapshot meta of {} bytes exceeds SNAPSHOT_META_BYTES_MAX ({SNAPSHOT_META_BYTES_MAX})",
            meta_json.len()
        )));
    }
    let mut out = Vec::with_capacity(FILE_HEAD_BYTES + meta_json.len() + data.len() + CRC_BYTES);
    out.extend_from_slice(FILE_MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&(meta_json.len() as u32).to_be_bytes());
    out.extend_from_slice(&meta_json);
    out.extend_from_slice(data);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

fn decode_file(bytes: &[u8]) -> io::Result<(SnapshotMeta, Vec<u8>)> {
    if bytes.len() < FILE_HEAD_BYTES + CRC_BYTES {
        return Err(invalid(format!("{SNAPSHOT_FILE}: {} bytes", bytes.len())));
    }
    let (body, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    if crc32c::crc32c(body).to_be_bytes() != crc {
        return Err(invalid(format!("{SNAPSHOT_FILE}: CRC mismatch")));
    }
    if &body[..4] != FILE_MAGIC || body[4..6] != VERSION.to_be_bytes() || body[6..8] != [0, 0] {
        return Err(invalid(format!(
            "{SNAPSHOT_FILE}: bad magic, version or reserved bytes"
        )));
    }
    let meta_len = u32::from_be_bytes(body[8..12].try_into().expect("4 bytes")) as usize;
    if meta_len > SNAPSHOT_META_BYTES_MAX || FILE_HEAD_BYTES + meta_len > body.len() {
        return Err(invalid(format!(
            "{SNAPSHOT_FILE}: meta of {meta_len} bytes (SNAPSHOT_META_BYTES_MAX {SNAPSHOT_META_BYTES_MAX})"
        )));
    }
    let meta_end = FILE_HEAD_BYTES + meta_len;
    let meta = serde_json::from_slice(&body[FILE_HEAD_BYTES..meta_end])
        .map_err(|e| invalid(format!("{SNAPSHOT_FILE}: meta: {e}")))?;
    let data = body[meta_end..].to_vec();
    unframe(&data)?;
    Ok((meta, data))
}

fn lock<A>(inner: &Mutex<SmInner<A>>) -> io::Result<std::sync::MutexGuard<'_, SmInner<A>>> {
    inner
        .lock()
        .map_err(|_| io::Error::other("metadata state machine lock poisoned by a panic"))
}

/// Runs `f` on the state machine under its lock, on tokio's blocking pool (snapshots write
/// files, and every caller may wait for the lock a snapshot write holds).
async fn blocking<A: Send + 'static, T: Send + 'static>(
    inner: &Arc<Mutex<SmInner<A>>>,
    f: impl FnOnce(&mut SmInner<A>) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let inner = Arc::clone(inner);
    let task = tokio::task::spawn_blocking(move || f(&mut *lock(&inner)?));
    task.await.map_err(io::Error::other)?
}

impl<A: MetadataApply> MetadataStateMachine<A> {
    /// Opens the state machine in `dir` (created if absent) on the real filesystem, the image
    /// restored from the snapshot there if any.
    pub fn open(dir: &Path, image: A) -> io::Result<Self> {
        MetadataStateMachine::open_with(Arc::new(RealFs), dir, image)
    }

    /// Opens over an injected filesystem.
    pub fn open_with(fs: Arc<dyn Fs>, dir: &Path, mut image: A) -> io::Result<Self> {
        sluice_storage::io::create_dir_durable(fs.as_ref(), dir)?;
        let path = dir.join(SNAPSHOT_FILE);
        let mut current = None;
        if fs.exists(&path)? {
            let file = fs.open(&path, false)?;
            let limit = (FILE_HEAD_BYTES + SNAPSHOT_META_BYTES_MAX + DATA_HEAD_BYTES) as u64
                + SNAPSHOT_BYTES_MAX as u64
                + 2 * CRC_BYTES as u64;
            let len = file.len()?;
            if len > limit {
                return Err(too_large(usize::try_from(len).unwrap_or(usize::MAX)));
            }
            let mut bytes = vec![0u8; len as usize];
            file.read_at(&mut bytes, 0)?;
            let (meta, data) = decode_file(&bytes)?;
            image
                .restore(meta.last_log_id.map(|l| l.index), unframe(&data)?)
                .map_err(|e| invalid(e.to_string()))?;
            current = Some((meta, data));
        }
        let (last_applied, last_membership) = current.as_ref().map_or_else(
            || (None, StoredMembership::default()),
            |(meta, _)| (meta.last_log_id, meta.last_membership.clone()),
        );
        tracing::info!(dir = %dir.display(), last_applied = ?last_applied, "opened the metadata state machine");
        Ok(MetadataStateMachine {
            inner: Arc::new(Mutex::new(SmInner {
                fs,
                dir: dir.to_path_buf(),
                image,
                last_applied,
                last_membership,
                current,
            })),
        })
    }

    /// Reads the image under the state machine's lock (keep `read` short). Blocking: the lock
    /// may be held by a snapshot being written, so async callers use the blocking pool.
    pub fn read_image<T>(&self, read: impl FnOnce(&A) -> T) -> io::Result<T> {
        Ok(read(&lock(&self.inner)?.image))
    }

    /// The log id of the last entry applied (or restored from a snapshot). Blocking, as
    /// [`MetadataStateMachine::read_image`].
    pub fn last_applied(&self) -> io::Result<Option<LogId>> {
        Ok(lock(&self.inner)?.last_applied)
    }
}

impl<A> SmInner<A> {
    /// Applies one entry; the reply for its writer.
    fn apply(&mut self, entry: &super::types::Entry) -> Vec<u8>
    where
        A: MetadataApply,
    {
        let log_id = entry.log_id;
        assert!(
            self.last_applied.is_none_or(|l| l.index < log_id.index),
            "entries apply in log order, each once"
        );
        self.last_applied = Some(log_id);
        match &entry.payload {
            EntryPayload::Blank => Vec::new(),
            EntryPayload::Normal(payload) => self.image.apply(log_id.index, payload.as_bytes()),
            EntryPayload::Membership(membership) => {
                self.last_membership = StoredMembership::new(Some(log_id), membership.clone());
                Vec::new()
            }
        }
    }

    /// Stores a snapshot durably and makes it the current one.
    fn store_snapshot(&mut self, meta: SnapshotMeta, data: Vec<u8>) -> io::Result<()> {
        let file = encode_file(&meta, &data)?;
        sluice_storage::io::write_durable(self.fs.as_ref(), &self.dir.join(SNAPSHOT_FILE), &file)?;
        self.current = Some((meta, data));
        Ok(())
    }
}

impl<A: MetadataApply> RaftSnapshotBuilder<MetaTypes> for MetadataStateMachine<A> {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<MetaSnapshot, io::Error> {
        blocking(&self.inner, |sm| {
            let image = sm.image.snapshot();
            if image.len() > SNAPSHOT_BYTES_MAX {
                return Err(too_large(image.len()));
            }
            let meta = SnapshotMeta {
                last_log_id: sm.last_applied,
                last_membership: sm.last_membership.clone(),
            };
            let data = frame(&image);
            sm.store_snapshot(meta.clone(), data.clone())?;
            tracing::info!(last_log_id = ?meta.last_log_id, bytes = data.len(), "built a metadata snapshot");
            Ok(Snapshot {
                meta,
                snapshot: Cursor::new(data),
            })
        })
        .await
    }
}

impl<A: MetadataApply> RaftStateMachine<MetaTypes> for MetadataStateMachine<A> {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        blocking(&self.inner, |sm| {
            Ok((sm.last_applied, sm.last_membership.clone()))
        })
        .await
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures_util::Stream<Item = Result<EntryResponder<MetaTypes>, io::Error>>
            + Unpin
            + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let index = entry.log_id.index;
            let reply = blocking(&self.inner, move |sm| Ok(sm.apply(&entry))).await?;
            if let Some(responder) = responder {
                responder.send(ApplyResponse { index, reply });
            }
        }
        Ok(())
    }

    /// Always a builder: the image is in memory and a snapshot is one encoding of it.
    async fn try_create_snapshot_builder(&mut self, _force: bool) -> Option<Self::SnapshotBuilder> {
        Some(self.clone())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        let meta = meta.clone();
        blocking(&self.inner, move |sm| {
            let data = snapshot.into_inner();
            let image = unframe(&data)?;
            sm.image
                .restore(meta.last_log_id.map(|l| l.index), image)
                .map_err(|e| invalid(e.to_string()))?;
            sm.last_applied = meta.last_log_id;
            sm.last_membership = meta.last_membership.clone();
            tracing::info!(last_log_id = ?meta.last_log_id, bytes = data.len(), "installed a metadata snapshot");
            sm.store_snapshot(meta, data)
        })
        .await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<MetaSnapshot>, io::Error> {
        blocking(&self.inner, |sm| {
            Ok(sm.current.as_ref().map(|(meta, data)| Snapshot {
                meta: meta.clone(),
                snapshot: Cursor::new(data.clone()),
            }))
        })
        .await
    }
}
