//! The manifest rewriting build.rs does before it embeds the Rust SDK crates
//! (build/sdk_manifest.rs): inherited package keys, dependencies and lints written in from the
//! root manifest, features merged, paths between our crates made relative to the crate, dev-
//! dependencies dropped, and what it cannot carry refused with a message that names it. Unit
//! tests on small manifests, then the repository's own four SDK manifests: each must come out
//! standalone with every path pointing at a crate beside it.

#[path = "../build/sdk_manifest.rs"]
mod sdk_manifest;

use sdk_manifest::{Workspace, relative, standalone};
use toml::{Table, Value};

const ROOT: &str = r#"
[workspace]
members = ["sdk", "sdk/macros", "sdk/hash"]

[workspace.package]
version = "0.3.0"
edition = "2024"
license = "Apache-2.0"

[workspace.dependencies]
sluice-hash = { path = "sdk/hash" }
sluice-sdk-macros = { path = "sdk/macros" }
sluice-server = { path = "broker/server" }
quote = "1"
syn = { version = "2", features = ["full"] }

[workspace.lints.rust]
unsafe_op_in_unsafe_fn = "deny"
"#;

const CRATES: &[&str] = &["sdk", "sdk/macros", "sdk/hash"];

fn rewrite(manifest: &str, crate_dir: &str) -> Result<Table, String> {
    let workspace = Workspace::parse(ROOT).unwrap();
    let text = standalone(manifest, crate_dir, &workspace, CRATES)?;
    assert!(!text.contains("workspace = true"), "{text}");
    Ok(text
        .parse()
        .unwrap_or_else(|e| panic!("not TOML: {e}\n{text}")))
}

fn get<'a>(table: &'a Table, dotted: &str) -> &'a Value {
    let mut parts = dotted.split('.');
    let first = &table[parts.next().unwrap()];
    parts.fold(first, |value, part| &value[part])
}

#[test]
fn inherited_keys_dependencies_and_lints_are_written_in() {
    let table = rewrite(
        r#"
[package]
name = "sluice-sdk"
version.workspace = true
edition.workspace = true
description = "own key, kept"

[dependencies]
sluice-sdk-macros.workspace = true
sluice-hash = { workspace = true, optional = true }
syn = { workspace = true, features = ["full", "visit"] }
quote.workspace = true

[dev-dependencies]
trybuild = "1"

[lints]
workspace = true
"#,
        "sdk",
    )
    .unwrap();
    assert_eq!(get(&table, "package.version").as_str(), Some("0.3.0"));
    assert_eq!(get(&table, "package.edition").as_str(), Some("2024"));
    assert_eq!(
        get(&table, "package.description").as_str(),
        Some("own key, kept")
    );
    assert_eq!(
        get(&table, "dependencies.sluice-sdk-macros.path").as_str(),
        Some("macros")
    );
    assert_eq!(
        get(&table, "dependencies.sluice-hash.path").as_str(),
        Some("hash")
    );
    assert_eq!(
        get(&table, "dependencies.sluice-hash.optional").as_bool(),
        Some(true)
    );
    assert_eq!(
        get(&table, "dependencies.quote.version").as_str(),
        Some("1")
    );
    let features: Vec<_> = get(&table, "dependencies.syn.features")
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(
        features,
        ["full", "visit"],
        "the crate's features added once"
    );
    assert!(
        !table.contains_key("dev-dependencies"),
        "the crates' tests are not carried"
    );
    assert_eq!(
        get(&table, "lints.rust.unsafe_op_in_unsafe_fn").as_str(),
        Some("deny")
    );
}

#[test]
fn paths_become_relative_to_the_crate_that_names_them() {
    let macros = rewrite(
        "[package]\nname = \"m\"\n[dependencies]\nsluice-hash.workspace = true\nown = { path = \"../hash\" }\n",
        "sdk/macros",
    )
    .unwrap();
    assert_eq!(
        get(&macros, "dependencies.sluice-hash.path").as_str(),
        Some("../hash")
    );
    assert_eq!(
        get(&macros, "dependencies.own.path").as_str(),
        Some("../hash")
    );
    assert_eq!(relative("sdk", "sdk/macros"), "macros");
    assert_eq!(relative("sdk/macros", "sdk"), "..");
    assert_eq!(relative("sdk/macros", "sdk/hash"), "../hash");
    assert_eq!(relative("sdk", "sdk"), ".");
    assert_eq!(relative("a/b", "c/d"), "../../c/d");
}

#[test]
fn what_cannot_stand_alone_is_refused_by_name() {
    let error = |manifest: &str| rewrite(manifest, "sdk").unwrap_err();
    let outside =
        error("[package]\nname = \"s\"\n[dependencies]\nsluice-server.workspace = true\n");
    assert!(
        outside.contains("sluice-server") && outside.contains("broker/server"),
        "{outside}"
    );
    let escapes = error("[package]\nname = \"s\"\n[dependencies]\nx = { path = \"../../..\" }\n");
    assert!(escapes.contains("leaves the repository"), "{escapes}");
    let missing = error("[package]\nname = \"s\"\nrust-version.workspace = true\n");
    assert!(missing.contains("rust-version"), "{missing}");
    let unknown = error("[package]\nname = \"s\"\n[dependencies]\nserde.workspace = true\n");
    assert!(
        unknown.contains("serde") && unknown.contains("[workspace.dependencies]"),
        "{unknown}"
    );
    let target =
        error("[package]\nname = \"s\"\n[target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n");
    assert!(target.contains("[target]"), "{target}");
}

/// The manifests build.rs embeds: the repository's, rewritten, every path a sibling crate.
#[test]
fn the_repository_sdk_manifests_stand_alone() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let workspace = Workspace::parse(&read("Cargo.toml")).unwrap();
    let crates = ["sdk", "sdk/macros", "sdk/columns", "sdk/hash"];
    for dir in crates {
        let text = standalone(
            &read(&format!("{dir}/Cargo.toml")),
            dir,
            &workspace,
            &crates,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("workspace = true"), "{text}");
        let table: Table = text.parse().unwrap();
        for key in ["name", "version", "edition", "rust-version"] {
            assert!(
                get(&table, "package")[key].is_str(),
                "{dir}: package.{key}\n{text}"
            );
        }
        let deps = table
            .get("dependencies")
            .and_then(Value::as_table)
            .cloned()
            .unwrap_or_default();
        for (name, dep) in deps {
            if let Some(path) = dep.get("path").and_then(Value::as_str) {
                let target = root.join(dir).join(path).join("Cargo.toml");
                assert!(target.is_file(), "{dir}: {name} -> {}", target.display());
            }
        }
    }
}
