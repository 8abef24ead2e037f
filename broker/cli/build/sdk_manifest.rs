//! Standalone manifests for the SDK crates a Rust scaffold carries (`<plugin>/.sluice-sdk/`).
//! In the repository the SDK crates inherit from the workspace (`version.workspace = true`,
//! `syn.workspace = true`, `[lints] workspace = true`) and name each other by a path from the
//! workspace root. Beside a plugin there is no such workspace, so every inherited key is
//! written in from the root manifest and every path between our crates is made relative to
//! the crate that names it. Used by build.rs (the binary carries the result); tested by
//! tests/sdk_manifest.rs.

use toml::{Table, Value};

/// What the repository's root manifest gives its members to inherit.
#[derive(Debug)]
pub struct Workspace {
    package: Table,
    dependencies: Table,
    lints: Table,
}

impl Workspace {
    /// Reads `[workspace.package]`, `[workspace.dependencies]` and `[workspace.lints]`.
    pub fn parse(root_manifest: &str) -> Result<Self, String> {
        let root: Table = root_manifest
            .parse()
            .map_err(|e| format!("the root manifest: {e}"))?;
        let workspace = root
            .get("workspace")
            .and_then(Value::as_table)
            .ok_or("the root manifest has no [workspace]")?;
        let section = |name: &str| {
            workspace
                .get(name)
                .and_then(Value::as_table)
                .cloned()
                .unwrap_or_default()
        };
        Ok(Self {
            package: section("package"),
            dependencies: section("dependencies"),
            lints: section("lints"),
        })
    }
}

/// `manifest`, the Cargo.toml of the crate in `crate_dir` (relative to the repository root,
/// `/`-separated), with nothing left to inherit. `vendored` lists the directories of the
/// crates carried along: a path dependency must name one of them. Dev-dependencies are left
/// out (the crates' own tests are not carried); target-specific tables are refused, so a
/// manifest this does not understand fails the build instead of a user's plugin.
pub fn standalone(
    manifest: &str,
    crate_dir: &str,
    workspace: &Workspace,
    vendored: &[&str],
) -> Result<String, String> {
    let mut table: Table = manifest
        .parse()
        .map_err(|e| format!("{crate_dir}/Cargo.toml: {e}"))?;
    let context = |e: String| format!("{crate_dir}/Cargo.toml: {e}");
    for refused in ["target", "workspace", "patch", "replace"] {
        if table.contains_key(refused) {
            return Err(context(format!("[{refused}] is not supported here")));
        }
    }
    table.remove("dev-dependencies");
    if let Some(Value::Table(package)) = table.get_mut("package") {
        inherit_package(package, &workspace.package).map_err(context)?;
    }
    for section in ["dependencies", "build-dependencies"] {
        if let Some(Value::Table(deps)) = table.get_mut(section) {
            for (name, dep) in deps.iter_mut() {
                *dep = resolve_dependency(name, dep, crate_dir, workspace, vendored)
                    .map_err(|e| context(format!("[{section}] {name}: {e}")))?;
            }
        }
    }
    if let Some(lints) = table.get_mut("lints")
        && inherits(lints)
    {
        *lints = Value::Table(workspace.lints.clone());
    }
    Ok(render(&table, crate_dir))
}

/// `{ workspace = true }`, the form of an inherited key.
fn inherits(value: &Value) -> bool {
    value
        .as_table()
        .and_then(|t| t.get("workspace"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn inherit_package(package: &mut Table, inherited: &Table) -> Result<(), String> {
    for (key, value) in package.iter_mut() {
        if inherits(value) {
            *value = inherited.get(key).cloned().ok_or_else(|| {
                format!("package.{key} is inherited, but [workspace.package] has no {key}")
            })?;
        }
    }
    Ok(())
}

/// One dependency with the workspace's entry written in (the crate's `features` added to the
/// workspace's, its other keys winning) and any path made relative to `crate_dir`.
fn resolve_dependency(
    name: &str,
    dep: &Value,
    crate_dir: &str,
    workspace: &Workspace,
    vendored: &[&str],
) -> Result<Value, String> {
    let mut own = as_table(dep)?;
    let (mut resolved, base) = if own.remove("workspace").and_then(|v| v.as_bool()) == Some(true) {
        let entry = workspace
            .dependencies
            .get(name)
            .ok_or("inherited, but [workspace.dependencies] has no entry")?;
        (as_table(entry)?, "")
    } else {
        (Table::new(), crate_dir)
    };
    for (key, value) in own {
        match (key.as_str(), resolved.get_mut("features"), value) {
            ("features", Some(Value::Array(features)), Value::Array(more)) => {
                for feature in more {
                    if !features.contains(&feature) {
                        features.push(feature);
                    }
                }
            }
            (_, _, value) => {
                resolved.insert(key, value);
            }
        }
    }
    if let Some(path) = resolved.get("path").and_then(Value::as_str) {
        let target = join(base, path)?;
        if !vendored.contains(&target.as_str()) {
            return Err(format!(
                "path {target} is not one of the crates carried along ({vendored:?})"
            ));
        }
        resolved.insert("path".into(), Value::String(relative(crate_dir, &target)));
    }
    Ok(Value::Table(resolved))
}

/// A dependency as a table: `"1"` is `{ version = "1" }`.
fn as_table(dep: &Value) -> Result<Table, String> {
    match dep {
        Value::String(version) => Ok(Table::from_iter([(
            "version".to_owned(),
            Value::String(version.clone()),
        )])),
        Value::Table(table) => Ok(table.clone()),
        other => Err(format!("a dependency is a version or a table, not {other}")),
    }
}

/// `base/path`, `/`-separated, with `.` and `..` folded; an error if it leaves the repository.
fn join(base: &str, path: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in base.split('/').chain(path.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts
                    .pop()
                    .ok_or_else(|| format!("{path} leaves the repository"))?;
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// The path from directory `from` to `to`, both relative to the same root and normalised.
pub fn relative(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|p| !p.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// The manifest as TOML: `[package]` first, then each table with its entries one per line
/// (nested tables inline), under a line saying where it came from.
fn render(table: &Table, crate_dir: &str) -> String {
    let mut out = format!(
        "# {crate_dir}/Cargo.toml of the Sluice repository, made to stand alone by the `sluice`\n\
         # binary: what it inherited from the workspace written in, paths relative.\n"
    );
    let mut sections: Vec<(&String, &Table)> = Vec::new();
    for (key, value) in table {
        match value {
            Value::Table(section) if key == "package" => sections.insert(0, (key, section)),
            Value::Table(section) => sections.push((key, section)),
            value => out.push_str(&format!("{} = {value}\n", toml_key(key))),
        }
    }
    for (name, section) in sections {
        out.push_str(&format!("\n[{}]\n", toml_key(name)));
        for (key, value) in section {
            out.push_str(&format!("{} = {value}\n", toml_key(key)));
        }
    }
    out
}

/// A key bare when TOML allows it, else quoted.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_owned()
    } else {
        Value::String(key.to_owned()).to_string()
    }
}
