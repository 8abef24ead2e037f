//! `sluice plugin new` and `sluice plugin build`, in every guest language. `new` copies the
//! SDK's template of the language and kind (`sdk/template-<lang>/<kind>/`, from an SDK
//! directory or the copy built into the binary) into the new directory, filling in
//! `{{name}}`, `{{module}}` and `{{sdk_path}}` in file names and contents; each template
//! carries a native unit test in its own language (cargo test, pytest, node --test). From the
//! built-in SDK, the plugin also gets the part of the SDK it needs in `.sluice-sdk/`
//! (`sdk.rs`). `build` hands a Rust crate to `sdk/build-plugins.sh` and a Python or
//! JavaScript plugin to `sdk/build-guest.sh` (componentize-py, componentize-js), which tell
//! the language by the directory's marker file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::json;

use super::sdk::{SDK_FILES, Sdk, VENDOR_DIR, vendor};
use crate::common::{Output, emit};

/// Most files a template may hold (they are a handful; this bounds a wrong `--sdk`).
const TEMPLATE_FILES_MAX: usize = 64;

/// `sluice plugin new PATH`: the plugin goes in PATH, named after its last component. From
/// the embedded SDK, `{{sdk_path}}` is `./.sluice-sdk/sdk` and the scaffold gets its copy of
/// the SDK there; from an SDK directory, it is that directory's absolute path.
pub fn new(
    path: &str,
    kind: &str,
    lang: &str,
    sdk: Option<PathBuf>,
    output: Output,
) -> anyhow::Result<()> {
    let dir = PathBuf::from(path);
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let name = plugin_name(path, &dir)?;
    let sdk = Sdk::locate(sdk)?;
    let (files, sdk_path) = match &sdk {
        Sdk::Dir(sdk_dir) => (
            disk_template(sdk_dir, lang, kind)?,
            sdk_dir.display().to_string(),
        ),
        Sdk::Embedded => (
            embedded_template(lang, kind)?,
            format!("./{VENDOR_DIR}/sdk"),
        ),
    };
    let fill = |text: &str| {
        text.replace("{{name}}", &name)
            .replace("{{module}}", &name.replace('-', "_"))
            .replace("{{sdk_path}}", &sdk_path)
    };
    for (relative, text) in &files {
        let target = dir.join(fill(&relative.to_string_lossy()));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, fill(text))
            .with_context(|| format!("writing {}", target.display()))?;
    }
    let carried = match sdk {
        Sdk::Embedded => {
            vendor(&dir, lang)?;
            format!(", with the SDK it needs in {path}/{VENDOR_DIR}/")
        }
        Sdk::Dir(_) => String::new(),
    };
    let test = match lang {
        "python" => "pytest",
        "js" => "node --test",
        _ => "cargo test",
    };
    emit(
        output,
        &json!({"created": name, "kind": kind, "lang": lang}),
        |_| {
            format!(
                "created {lang} {kind} plugin {path}/{carried} (test it with `{test}` there, build it with `sluice plugin build {path}`)\n"
            )
        },
    )
}

/// The last component of `path`: a letter, then letters, digits, `-` or `_`.
fn plugin_name(path: &str, dir: &Path) -> anyhow::Result<String> {
    dir.file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            n.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map(str::to_owned)
        .with_context(|| {
            format!("{path:?}: a plugin name is a letter, then letters, digits, - or _")
        })
}

/// The template of `lang` and `kind` built into the binary: each file's path relative to the
/// template, and its text.
fn embedded_template(lang: &str, kind: &str) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let prefix = format!("sdk/template-{lang}/{kind}/");
    let files: Vec<(PathBuf, String)> = SDK_FILES
        .iter()
        .filter_map(|f| Some((f.path.strip_prefix(&prefix)?, f.bytes)))
        .map(|(relative, bytes)| Ok((PathBuf::from(relative), String::from_utf8(bytes.to_vec())?)))
        .collect::<anyhow::Result<_>>()?;
    if files.is_empty() {
        bail!("this sluice binary has no {lang} {kind} template");
    }
    Ok(files)
}

/// The template of `lang` and `kind` in the SDK directory `sdk`, as `embedded_template`.
fn disk_template(sdk: &Path, lang: &str, kind: &str) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let template = sdk.join(format!("template-{lang}")).join(kind);
    if !template.is_dir() {
        bail!(
            "no {lang} {kind} template at {}: --sdk (or SLUICE_SDK) must name a Sluice sdk/ directory (or leave both unset to use the SDK built into sluice)",
            template.display()
        );
    }
    template_files(&template)?
        .into_iter()
        .map(|relative| {
            let text = std::fs::read_to_string(template.join(&relative))
                .with_context(|| format!("reading {}", template.join(&relative).display()))?;
            Ok((relative, text))
        })
        .collect()
}

/// Every file under `template`, relative to it, in a stable order.
fn template_files(template: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in std::fs::read_dir(template.join(&relative))? {
            let entry = entry?;
            let name = relative.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(name);
            } else {
                out.push(name);
            }
            if out.len() + pending.len() > TEMPLATE_FILES_MAX {
                bail!(
                    "{} holds more than TEMPLATE_FILES_MAX = {TEMPLATE_FILES_MAX} files: not a plugin template",
                    template.display()
                );
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `sluice plugin build DIR`: a Rust crate or workspace through `build-plugins.sh` (every
/// crate's wasm into DIR/target/wasm), a Python or JavaScript plugin through
/// `build-guest.sh` (DIR/target/wasm/<dir name>.wasm). The scripts tell a missing toolchain
/// by what to install.
pub fn build(
    dir: &Path,
    target_dir: Option<&Path>,
    sdk: Option<PathBuf>,
    output: Output,
) -> anyhow::Result<()> {
    let out = dir.join("target/wasm");
    let rust = dir.join("Cargo.toml").is_file();
    if !rust && !dir.join("pyproject.toml").is_file() && !dir.join("package.json").is_file() {
        bail!(
            "{}: not a plugin: no Cargo.toml (Rust), pyproject.toml (Python) or package.json (JavaScript); `sluice plugin new` makes one",
            dir.display()
        );
    }
    let script = build_script(rust, sdk)?;
    let mut command = std::process::Command::new(&script);
    if rust {
        command.arg("--workspace").arg(dir).arg("--out").arg(&out);
        if let Some(target_dir) = target_dir {
            command.arg("--target-dir").arg(target_dir);
        }
    } else {
        let name = std::path::absolute(dir)?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("the plugin directory has no name")?;
        command.arg(dir).arg(out.join(format!("{name}.wasm")));
    }
    let status = command
        .stdout(std::process::Stdio::inherit())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    let built: Vec<String> = std::fs::read_dir(&out)?
        .filter_map(|e| e.ok().map(|e| e.path().display().to_string()))
        .filter(|p| p.ends_with(".wasm"))
        .collect();
    emit(output, &json!({"built": built}), |_| {
        built.iter().map(|p| format!("built {p}\n")).collect()
    })
}

/// `build-plugins.sh` (Rust; `$SLUICE_BUILD_PLUGINS` overrides it) or `build-guest.sh` of the
/// SDK; the embedded SDK's are run from the cache directory.
fn build_script(rust: bool, sdk: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if rust && let Some(script) = std::env::var_os("SLUICE_BUILD_PLUGINS") {
        return Ok(PathBuf::from(script));
    }
    let dir = Sdk::locate(sdk)?.dir()?;
    let script = dir.join(if rust {
        "build-plugins.sh"
    } else {
        "build-guest.sh"
    });
    if !script.is_file() {
        bail!(
            "{} not found: --sdk (or SLUICE_SDK) must name a Sluice sdk/ directory, or leave both unset to use the SDK built into sluice (SLUICE_BUILD_PLUGINS names the Rust build script itself)",
            script.display()
        );
    }
    Ok(script)
}
