//! The plugin SDK that `sluice plugin new` and `sluice plugin build` use: the directory
//! `--sdk` (or `$SLUICE_SDK`) names; else `./sdk` when it is a Sluice SDK (a checkout); else
//! the copy built into this binary (build.rs embeds the templates, the Python and JavaScript
//! SDK modules, the build scripts, the guest toolchain pins, the WIT and the Rust SDK crates
//! with manifests that stand alone).
//!
//! The embedded SDK is unpacked, for the build scripts, into the user's cache directory
//! (`$XDG_CACHE_HOME/sluice/`, else `~/.cache/sluice/`) as `sdk-<version>-<content hash>`:
//! written whole under a temporary name, then renamed, so a directory of that name is always
//! complete and two `sluice` processes may race to make it. A scaffold made from it carries
//! the part of the SDK its language needs in `<plugin>/.sluice-sdk/` (`VENDOR_DIR`), in the
//! repository's layout, so its native test and its build need nothing from a Sluice tree.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// One file of the embedded SDK.
#[derive(Debug)]
pub struct SdkFile {
    /// Its path in the Sluice repository, `/`-separated (`sdk/build-guest.sh`).
    pub path: &'static str,
    pub bytes: &'static [u8],
    /// Written with mode 0755 (the build scripts), else with the umask's default.
    pub executable: bool,
}

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The directory in a scaffold made from the embedded SDK that holds its copy of the SDK.
pub const VENDOR_DIR: &str = ".sluice-sdk";

/// Where the SDK is.
#[derive(Debug)]
pub enum Sdk {
    /// An `sdk/` directory on disk (absolute): `--sdk`, `$SLUICE_SDK`, or `./sdk`.
    Dir(PathBuf),
    /// The copy built into this binary.
    Embedded,
}

impl Sdk {
    /// `--sdk` (clap reads `$SLUICE_SDK` into it), else `./sdk` if it is a Sluice SDK, else
    /// the embedded one.
    pub fn locate(sdk: Option<PathBuf>) -> anyhow::Result<Self> {
        let dir = match sdk {
            Some(dir) => dir,
            None if is_sluice_sdk(Path::new("sdk")) => PathBuf::from("sdk"),
            None => return Ok(Self::Embedded),
        };
        let absolute =
            std::path::absolute(&dir).with_context(|| format!("resolving {}", dir.display()))?;
        Ok(Self::Dir(absolute))
    }

    /// The `sdk/` directory on disk; the embedded SDK is unpacked into the cache first.
    pub fn dir(&self) -> anyhow::Result<PathBuf> {
        match self {
            Self::Dir(dir) => Ok(dir.clone()),
            Self::Embedded => Ok(unpacked()?.join("sdk")),
        }
    }
}

/// A Sluice `sdk/` directory has the guest build script and the Rust templates (an `sdk/`
/// of the user's own has not).
fn is_sluice_sdk(dir: &Path) -> bool {
    dir.join("build-guest.sh").is_file() && dir.join("template-rust").is_dir()
}

/// Writes the part of the embedded SDK a plugin in `lang` needs into `plugin/.sluice-sdk/`:
/// Rust, the SDK crates and the WIT their macros read; Python, `sdk/python/`; JavaScript,
/// `sdk/js/`.
pub fn vendor(plugin: &Path, lang: &str) -> anyhow::Result<()> {
    let wanted = |path: &str| match lang {
        "python" => path.starts_with("sdk/python/"),
        "js" => path.starts_with("sdk/js/"),
        _ => {
            path.starts_with("wit/")
                || SDK_CRATES.iter().any(|dir| {
                    path.strip_prefix(dir)
                        .is_some_and(|rest| rest == "/Cargo.toml" || rest.starts_with("/src/"))
                })
        }
    };
    write_files(
        &plugin.join(VENDOR_DIR),
        SDK_FILES.iter().filter(|f| wanted(f.path)),
    )
}

/// The embedded SDK in the cache directory (the directory holding `sdk/` and `wit/`),
/// unpacked if it is not there yet.
fn unpacked() -> anyhow::Result<PathBuf> {
    let cache = cache_dir()?;
    let name = format!("sdk-{}-{SDK_HASH}", env!("CARGO_PKG_VERSION"));
    let dir = cache.join(&name);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let staging = cache.join(format!(".{name}.{}.tmp", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    write_files(&staging, SDK_FILES.iter())?;
    match std::fs::rename(&staging, &dir) {
        Ok(()) => eprintln!("sluice: unpacked the plugin SDK into {}", dir.display()),
        // Another sluice unpacked it first: its copy is the same bytes.
        Err(_) if dir.is_dir() => std::fs::remove_dir_all(&staging)?,
        Err(e) => return Err(e).with_context(|| format!("renaming into {}", dir.display())),
    }
    Ok(dir)
}

/// `$XDG_CACHE_HOME/sluice` (when absolute, as the XDG spec asks), else `$HOME/.cache/sluice`.
fn cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Ok(dir.join("sluice"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("neither XDG_CACHE_HOME nor HOME is set, so there is no cache directory to unpack the plugin SDK into: pass --sdk (or set SLUICE_SDK) to a Sluice sdk/ directory")?;
    Ok(PathBuf::from(home).join(".cache").join("sluice"))
}

/// Writes `files` under `dest` by their repository paths.
fn write_files<'a>(dest: &Path, files: impl Iterator<Item = &'a SdkFile>) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    for file in files {
        let target = dest.join(file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, file.bytes)
            .with_context(|| format!("writing {}", target.display()))?;
        if file.executable {
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}
