//! Embeds the plugin SDK in the `sluice` binary, so that `sluice plugin new` and `sluice plugin
//! build` work without a Sluice checkout (src/plugin/sdk.rs writes it out). Writes
//! `$OUT_DIR/sdk_files.rs`: `SDK_FILES` (each file's path in the repository, its bytes and
//! whether it is executable), `SDK_CRATES` (the Rust SDK crates' directories) and `SDK_HASH`
//! (sha256 over all of it, naming the cache directory it is unpacked into). The SDK crates'
//! manifests are rewritten to stand alone (build/sdk_manifest.rs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

#[path = "build/sdk_manifest.rs"]
mod sdk_manifest;

/// Most files embedded (about 80 today); a bound on a walk that went somewhere unexpected.
const SDK_FILES_MAX: usize = 256;
/// Most bytes embedded (about 330 KB today, a third of it the npm lock file).
const SDK_BYTES_MAX: u64 = 2 * 1024 * 1024;
/// Directories embedded whole, relative to the repository root (hidden entries, `target`,
/// `node_modules` and `__pycache__` skipped).
const TREES: &[&str] = &[
    "sdk/src",
    "sdk/macros/src",
    "sdk/columns/src",
    "sdk/hash/src",
    "sdk/python",
    "sdk/js",
    "sdk/template-rust",
    "sdk/template-python",
    "sdk/template-js",
];
/// Single files: the build scripts, the guest toolchain's pins, the WIT contract.
const FILES: &[&str] = &[
    "sdk/build-plugins.sh",
    "sdk/build-guest.sh",
    "sdk/guest-tools/requirements.txt",
    "sdk/guest-tools/package.json",
    "sdk/guest-tools/package-lock.json",
    "wit/sluice-plugin.wit",
];
/// The Rust SDK crates, whose manifests are rewritten; a path dependency may name only these.
const CRATES: &[&str] = &["sdk", "sdk/macros", "sdk/columns", "sdk/hash"];

/// One embedded file: its path in the repository and where its bytes are on this machine.
struct Embedded {
    path: String,
    source: PathBuf,
    executable: bool,
}

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.join("../..").canonicalize().unwrap();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let mut files = Vec::new();
    for tree in TREES {
        println!("cargo::rerun-if-changed={}", root.join(tree).display());
        walk(&root, Path::new(tree), &mut files);
    }
    for file in FILES {
        println!("cargo::rerun-if-changed={}", root.join(file).display());
        files.push(embedded(&root, file.to_string(), root.join(file)));
    }
    files.extend(manifests(&root, &out_dir));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let bytes: u64 = files
        .iter()
        .map(|f| f.source.metadata().unwrap().len())
        .sum();
    assert!(
        files.len() <= SDK_FILES_MAX,
        "{} SDK files: more than SDK_FILES_MAX = {SDK_FILES_MAX}",
        files.len()
    );
    assert!(
        bytes <= SDK_BYTES_MAX,
        "{bytes} SDK bytes: more than SDK_BYTES_MAX = {SDK_BYTES_MAX}"
    );
    std::fs::write(out_dir.join("sdk_files.rs"), generate(&files)).unwrap();
}

/// Every file under `root/dir`, depth first.
fn walk(root: &Path, dir: &Path, files: &mut Vec<Embedded>) {
    for entry in std::fs::read_dir(root.join(dir)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.starts_with('.')
            || ["target", "node_modules", "__pycache__"].contains(&name.as_str())
        {
            continue;
        }
        let path = dir.join(&name);
        if entry.file_type().unwrap().is_dir() {
            walk(root, &path, files);
        } else {
            files.push(embedded(
                root,
                path.to_str().unwrap().to_owned(),
                entry.path(),
            ));
        }
        assert!(
            files.len() <= SDK_FILES_MAX,
            "more than SDK_FILES_MAX = {SDK_FILES_MAX} SDK files"
        );
    }
}

fn embedded(root: &Path, path: String, source: PathBuf) -> Embedded {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&source)
        .unwrap_or_else(|e| panic!("{}: {e}", root.join(&path).display()))
        .permissions()
        .mode();
    Embedded {
        path,
        source,
        executable: mode & 0o111 != 0,
    }
}

/// The SDK crates' standalone manifests, written under `$OUT_DIR/manifests/`.
fn manifests(root: &Path, out_dir: &Path) -> Vec<Embedded> {
    let root_manifest = root.join("Cargo.toml");
    println!("cargo::rerun-if-changed={}", root_manifest.display());
    let workspace =
        sdk_manifest::Workspace::parse(&std::fs::read_to_string(root_manifest).unwrap()).unwrap();
    CRATES
        .iter()
        .map(|dir| {
            let source = root.join(dir).join("Cargo.toml");
            println!("cargo::rerun-if-changed={}", source.display());
            let text = std::fs::read_to_string(&source).unwrap();
            let standalone = sdk_manifest::standalone(&text, dir, &workspace, CRATES)
                .unwrap_or_else(|e| panic!("{e}"));
            let written = out_dir.join("manifests").join(dir).join("Cargo.toml");
            std::fs::create_dir_all(written.parent().unwrap()).unwrap();
            std::fs::write(&written, standalone).unwrap();
            Embedded {
                path: format!("{dir}/Cargo.toml"),
                source: written,
                executable: false,
            }
        })
        .collect()
}

/// The Rust source of `SDK_FILES`, `SDK_CRATES` and `SDK_HASH`.
fn generate(files: &[Embedded]) -> String {
    let mut hash = Sha256::new();
    let mut list = String::new();
    for file in files {
        let bytes = std::fs::read(&file.source).unwrap();
        hash.update((file.path.len() as u64).to_le_bytes());
        hash.update(file.path.as_bytes());
        hash.update([u8::from(file.executable)]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
        writeln!(
            list,
            "    SdkFile {{ path: {:?}, bytes: include_bytes!({:?}), executable: {} }},",
            file.path,
            file.source.display().to_string(),
            file.executable
        )
        .unwrap();
    }
    let digest: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "/// The first 16 hex digits of sha256 over every embedded file (path, executable bit, bytes).\n\
         pub const SDK_HASH: &str = {:?};\n\
         /// The Rust SDK crates' directories, relative to the repository root.\n\
         pub const SDK_CRATES: &[&str] = &{CRATES:?};\n\
         /// The SDK, by its paths in the repository, sorted.\n\
         pub static SDK_FILES: &[SdkFile] = &[\n{list}];\n",
        &digest[..16]
    )
}
