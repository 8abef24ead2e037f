//! The data dir's lock: one process at a time owns `<data.dir>` (a running broker, or an
//! offline command such as `sluice user create --data-dir`); and `meta.json`, which says
//! which cluster and node the data dir belongs to ([`format`], [`load_or_init`]).

use std::path::Path;

use crate::error::ServerError;

/// The lock file, under `data.dir`.
const LOCK_FILE: &str = ".lock";

/// Takes an exclusive lock on `<data.dir>/.lock` (held while the file stays open), or fails
/// naming the data dir.
pub fn lock(dir: &Path) -> Result<std::fs::File, ServerError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(ServerError::io(format!("opening {}", path.display())))?;
    // SAFETY: flock on a descriptor we own and keep open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(ServerError::Io {
            context: format!(
                "data dir {} is in use by another sluice broker (locking {})",
                dir.display(),
                path.display()
            ),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(file)
}

/// `<data.dir>/meta.json`: what `sluice cluster format` (Kafka's `kafka-storage format`)
/// writes: the cluster this data dir belongs to, the node that owns it, and the dir's own id.
pub const META_FILE: &str = "meta.json";

/// Single-node Sluice's cluster id file before the cluster (`{"cluster_id": "..."}`): a data
/// dir holding it is migrated to [`META_FILE`] on its first start.
pub const LEGACY_CLUSTER_FILE: &str = "cluster.json";

/// The format version of [`META_FILE`].
const META_VERSION: u32 = 1;

/// The largest [`META_FILE`] read (a few hundred bytes in practice).
const META_FILE_BYTES_MAX: u64 = 4096;

/// The longest cluster id accepted (Kafka's are 22 characters: a base64 UUID).
const CLUSTER_ID_CHARS_MAX: usize = 64;

/// A file of the data dir that is not what this broker wrote.
fn corrupt(message: String) -> ServerError {
    ServerError::Io {
        context: "reading the data dir".into(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
    }
}

/// The contents of [`META_FILE`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaFile {
    /// [`META_VERSION`].
    pub version: u32,
    /// The cluster's id: every broker of a cluster has the same.
    pub cluster_id: String,
    /// The `node.id` this data dir belongs to.
    pub node_id: i32,
    /// This directory's own id (Kafka's `directory.id`), random at format.
    pub directory_id: String,
}

/// Checks a cluster id: 1 to [`CLUSTER_ID_CHARS_MAX`] characters of `A-Z a-z 0-9 - _` (what
/// Kafka's base64 UUIDs and Sluice's random ids use).
pub fn check_cluster_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= CLUSTER_ID_CHARS_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cluster id {id:?} must be 1 to {CLUSTER_ID_CHARS_MAX} characters of A-Z a-z 0-9 - _"
        ))
    }
}

/// Reads [`META_FILE`] (`None` if absent), strictly.
pub fn read_meta(dir: &Path) -> Result<Option<MetaFile>, ServerError> {
    let path = dir.join(META_FILE);
    let bytes = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ServerError::io(format!("reading {}", path.display()))(e)),
        Ok(m) if m.len() > META_FILE_BYTES_MAX => {
            return Err(corrupt(format!(
                "{} is {} bytes, over META_FILE_BYTES_MAX ({META_FILE_BYTES_MAX})",
                path.display(),
                m.len()
            )));
        }
        Ok(_) => {
            std::fs::read(&path).map_err(ServerError::io(format!("reading {}", path.display())))?
        }
    };
    parse_meta(&bytes)
        .map(Some)
        .map_err(|e| corrupt(format!("{}: {e}", path.display())))
}

/// Parses [`META_FILE`]'s bytes strictly: its version, no unknown field, a valid cluster id.
pub fn parse_meta(bytes: &[u8]) -> Result<MetaFile, String> {
    let meta: MetaFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if meta.version != META_VERSION {
        return Err(format!(
            "version {} (this broker reads {META_VERSION})",
            meta.version
        ));
    }
    check_cluster_id(&meta.cluster_id)?;
    Ok(meta)
}

/// `sluice cluster format`: writes [`META_FILE`] for `node_id` in `cluster_id` (a random id
/// when `None`), creating the data dir. Refuses a dir already formatted (naming its cluster)
/// and one holding another broker's lock.
pub fn format(dir: &Path, cluster_id: Option<&str>, node_id: i32) -> Result<MetaFile, ServerError> {
    sluice_storage::io::create_dir_durable(&sluice_storage::io::RealFs, dir).map_err(
        ServerError::io(format!("creating data dir {}", dir.display())),
    )?;
    let _lock = lock(dir)?;
    if let Some(meta) = read_meta(dir)? {
        return Err(ServerError::Config(
            crate::error::ConfigError::Inconsistent(format!(
                "data dir {} is already formatted (cluster {}, node {})",
                dir.display(),
                meta.cluster_id,
                meta.node_id
            )),
        ));
    }
    let cluster_id = match cluster_id {
        Some(id) => {
            check_cluster_id(id).map_err(|e| {
                ServerError::Config(crate::error::ConfigError::BadValue {
                    key: "--cluster-id".into(),
                    value: id.to_owned(),
                    reason: e,
                })
            })?;
            id.to_owned()
        }
        None => crate::random::random_id(),
    };
    write_meta(dir, cluster_id, node_id)
}

fn write_meta(dir: &Path, cluster_id: String, node_id: i32) -> Result<MetaFile, ServerError> {
    let meta = MetaFile {
        version: META_VERSION,
        cluster_id,
        node_id,
        directory_id: crate::random::random_id(),
    };
    let path = dir.join(META_FILE);
    let text = serde_json::to_string(&meta).unwrap_or_default();
    crate::files::write_durable(&path, text.as_bytes())
        .map_err(ServerError::io(format!("writing {}", path.display())))?;
    Ok(meta)
}

/// At start (the data dir locked): this data dir's [`MetaFile`], checked against the
/// config's `node.id`. A dir written by single-node Sluice ([`LEGACY_CLUSTER_FILE`]) is
/// migrated, keeping its cluster id; an empty one is formatted as a cluster of one, unless
/// voters are configured (then it must have been formatted: the error names the command).
pub fn load_or_init(dir: &Path, node_id: i32, needs_format: bool) -> Result<MetaFile, ServerError> {
    if let Some(meta) = read_meta(dir)? {
        if meta.node_id != node_id {
            return Err(ServerError::Config(
                crate::error::ConfigError::Inconsistent(format!(
                    "data dir {} belongs to node {} (meta.json) but node.id is {node_id}",
                    dir.display(),
                    meta.node_id
                )),
            ));
        }
        return Ok(meta);
    }
    let legacy = dir.join(LEGACY_CLUSTER_FILE);
    if let Ok(text) = std::fs::read_to_string(&legacy) {
        let old: LegacyClusterFile = serde_json::from_str(&text)
            .map_err(|e| corrupt(format!("{}: {e}", legacy.display())))?;
        check_cluster_id(&old.cluster_id)
            .map_err(|e| corrupt(format!("{}: {e}", legacy.display())))?;
        let meta = write_meta(dir, old.cluster_id, node_id)?;
        sluice_storage::io::remove_file_durable(&sluice_storage::io::RealFs, &legacy)
            .map_err(ServerError::io(format!("removing {}", legacy.display())))?;
        tracing::info!(
            cluster_id = %meta.cluster_id,
            node_id,
            "migrated a single-node data dir: cluster.json is now meta.json"
        );
        return Ok(meta);
    }
    if needs_format {
        return Err(ServerError::Config(
            crate::error::ConfigError::Inconsistent(format!(
                "data dir {} is not formatted, and controller.quorum.voters is set: run `sluice \
             cluster format --data-dir {} --cluster-id <the cluster's id> --node-id {node_id}` \
             first (the same cluster id on every broker)",
                dir.display(),
                dir.display()
            )),
        ));
    }
    write_meta(dir, crate::random::random_id(), node_id)
}

/// [`LEGACY_CLUSTER_FILE`]'s contents.
#[derive(Debug, serde::Deserialize)]
struct LegacyClusterFile {
    cluster_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_writes_once_and_start_checks_the_node() {
        let dir = tempfile::tempdir().unwrap();
        let meta = format(dir.path(), Some("AbCdEfGhIjKlMnOpQrStUv"), 3).unwrap();
        assert_eq!(
            (meta.cluster_id.as_str(), meta.node_id),
            ("AbCdEfGhIjKlMnOpQrStUv", 3)
        );
        let again = format(dir.path(), None, 3).unwrap_err().to_string();
        assert!(again.contains("already formatted"), "{again}");
        assert_eq!(load_or_init(dir.path(), 3, true).unwrap(), meta);
        let other = load_or_init(dir.path(), 4, true).unwrap_err().to_string();
        assert!(other.contains("belongs to node 3"), "{other}");
        let bad = format(tempfile::tempdir().unwrap().path(), Some("no spaces"), 1);
        assert!(bad.unwrap_err().to_string().contains("--cluster-id"));
    }

    #[test]
    fn an_unformatted_dir_is_a_cluster_of_one_unless_voters_are_set() {
        let dir = tempfile::tempdir().unwrap();
        let refused = load_or_init(dir.path(), 1, true).unwrap_err().to_string();
        assert!(refused.contains("sluice cluster format"), "{refused}");
        let meta = load_or_init(dir.path(), 1, false).unwrap();
        assert_eq!(load_or_init(dir.path(), 1, false).unwrap(), meta);
    }

    #[test]
    fn a_single_node_data_dir_is_migrated_keeping_its_cluster_id() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(LEGACY_CLUSTER_FILE),
            br#"{"cluster_id":"Old-Id_123"}"#,
        )
        .unwrap();
        let meta = load_or_init(dir.path(), 0, false).unwrap();
        assert_eq!((meta.cluster_id.as_str(), meta.node_id), ("Old-Id_123", 0));
        assert!(!dir.path().join(LEGACY_CLUSTER_FILE).exists());
        assert_eq!(read_meta(dir.path()).unwrap(), Some(meta));
    }

    #[test]
    fn meta_json_is_read_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(META_FILE);
        for bad in [
            r#"{"version":2,"cluster_id":"a","node_id":1,"directory_id":"d"}"#,
            r#"{"version":1,"cluster_id":"a b","node_id":1,"directory_id":"d"}"#,
            r#"{"version":1,"cluster_id":"a","node_id":1,"directory_id":"d","x":1}"#,
            "not json",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert!(read_meta(dir.path()).is_err(), "{bad}");
        }
        std::fs::write(&path, vec![b' '; 5000]).unwrap();
        let big = read_meta(dir.path()).unwrap_err().to_string();
        assert!(big.contains("META_FILE_BYTES_MAX"), "{big}");
    }
}
