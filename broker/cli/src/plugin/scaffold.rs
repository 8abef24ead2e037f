//! `sluice plugin new` and `sluice plugin build`, in every guest language. `new` copies the
//! SDK's template of the language and kind (`sdk/template-<lang>/<kind>/`) into the new
//! directory, filling in `{{name}}`, `{{module}}` and `{{sdk_path}}` in file names and
//! contents; each template carries a native unit test in its own language (cargo test,
//! pytest, node --test). `build` hands a Rust crate to `sdk/build-plugins.sh` and a Python
//! or JavaScript plugin to `sdk/build-guest.sh` (componentize-py, componentize-js), which
//! tell the language by the directory's marker file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::json;

use crate::common::{Output, emit};

/// Most files a template may hold (they are a handful; this bounds a wrong `--sdk`).
const TEMPLATE_FILES_MAX: usize = 64;

/// The SDK directory: `--sdk`, `$SLUICE_SDK`, or `./sdk`, made absolute.
fn sdk_dir(sdk: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let sdk = sdk.unwrap_or_else(|| PathBuf::from("sdk"));
    std::path::absolute(&sdk).with_context(|| format!("resolving {}", sdk.display()))
}

/// `sluice plugin new PATH`: the plugin goes in PATH, named after its last component.
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
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            n.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .with_context(|| {
            format!("{path:?}: a plugin name is a letter, then letters, digits, - or _")
        })?
        .to_owned();
    let sdk = sdk_dir(sdk)?;
    let template = sdk.join(format!("template-{lang}")).join(kind);
    if !template.is_dir() {
        bail!(
            "no {lang} {kind} template at {}: pass --sdk (or set SLUICE_SDK) to the sluice sdk/ directory",
            template.display()
        );
    }
    let fill = |text: &str| {
        text.replace("{{name}}", &name)
            .replace("{{module}}", &name.replace('-', "_"))
            .replace("{{sdk_path}}", &sdk.display().to_string())
    };
    let files = template_files(&template)?;
    for relative in &files {
        let text = std::fs::read_to_string(template.join(relative))
            .with_context(|| format!("reading {}", template.join(relative).display()))?;
        let target = dir.join(fill(&relative.to_string_lossy()));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, fill(&text))
            .with_context(|| format!("writing {}", target.display()))?;
    }
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
                "created {lang} {kind} plugin {path}/ (test it with `{test}` there, build it with `sluice plugin build {path}`)\n"
            )
        },
    )
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
/// `build-guest.sh` (DIR/target/wasm/<dir name>.wasm).
pub fn build(
    dir: &Path,
    target_dir: Option<&Path>,
    sdk: Option<PathBuf>,
    output: Output,
) -> anyhow::Result<()> {
    let sdk = sdk_dir(sdk)?;
    let out = dir.join("target/wasm");
    let rust = dir.join("Cargo.toml").is_file();
    let script = if rust {
        std::env::var_os("SLUICE_BUILD_PLUGINS")
            .map_or_else(|| sdk.join("build-plugins.sh"), PathBuf::from)
    } else {
        sdk.join("build-guest.sh")
    };
    if !script.is_file() {
        bail!(
            "{} not found: run from the sluice checkout, pass --sdk, or set SLUICE_SDK (SLUICE_BUILD_PLUGINS for the Rust build script)",
            script.display()
        );
    }
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
