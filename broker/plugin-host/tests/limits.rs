//! The per-component and compile limits at install: hostile modules written in WAT (the
//! partitioner world's dummy module from `wit-component`, printed, with extra memories,
//! tables, table elements, functions, locals or data segments added, then installed as a
//! core module, which the registry componentizes as it does an SDK build) and hand-written
//! components (too many core instances, memories per component) are refused at install
//! with a message naming the limit and its value, and nothing is installed. Every real
//! plugin in `plugins/` fits the limits, and a compile past its timeout fails the install
//! with the limit named.

mod common;

use sluice_plugin_host::limits::{
    PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX, PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX,
    PLUGIN_FUNCTIONS_PER_MODULE_MAX, PLUGIN_LOCALS_PER_FUNCTION_MAX, PLUGIN_TABLE_ELEMENTS_MAX,
};
use sluice_plugin_host::{ColumnarBatch, PluginKind, RegistryError};

/// The partitioner world's dummy core module, as WAT.
fn partitioner_wat() -> String {
    let (resolve, world) = partitioner_world();
    let module =
        wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
    wasmprinter::print_bytes(&module).unwrap()
}

fn partitioner_world() -> (wit_parser::Resolve, wit_parser::WorldId) {
    let mut resolve = wit_parser::Resolve::default();
    let ours = include_str!("../../../wit/sluice-plugin.wit");
    let package = resolve.push_str("sluice-plugin.wit", ours).unwrap();
    let world = resolve
        .select_world(&[package], Some("partitioner"))
        .unwrap();
    (resolve, world)
}

/// A partitioner core module (world embedded, as the SDK builds one) with `extra` WAT
/// fields added to the dummy module.
fn partitioner_with(extra: &str) -> Vec<u8> {
    let wat = partitioner_wat();
    let end = wat.rfind(')').unwrap();
    let mut module = wat::parse_str(format!("{}\n{extra}\n)", &wat[..end])).unwrap();
    let (resolve, world) = partitioner_world();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    module
}

/// Installing `bytes` is refused naming `limit`, and nothing is installed.
fn refused(bytes: &[u8], limit: &str) {
    let (_dir, registry) = common::registry(|_| {});
    let err = registry.install("hostile", bytes).unwrap_err();
    assert!(matches!(err, RegistryError::OverLimit(_)), "{err}");
    assert!(err.to_string().contains(limit), "{limit} not in: {err}");
    assert!(registry.describe("hostile").is_none());
}

#[test]
fn the_dummy_partitioner_fits_and_installs() {
    let (_dir, registry) = common::registry(|_| {});
    let info = registry.install("dummy", &partitioner_with("")).unwrap();
    assert_eq!(info.kind, PluginKind::Partitioner);
}

#[test]
fn a_second_memory_is_refused() {
    refused(
        &partitioner_with("(memory 1)"),
        "PLUGIN_MEMORIES_PER_MODULE_MAX = 1",
    );
}

#[test]
fn a_second_table_is_refused() {
    refused(
        &partitioner_with("(table 1 funcref) (table 1 funcref)"),
        "PLUGIN_TABLES_PER_MODULE_MAX = 1",
    );
}

#[test]
fn a_huge_table_is_refused() {
    let elements = PLUGIN_TABLE_ELEMENTS_MAX + 1;
    refused(
        &partitioner_with(&format!("(table {elements} funcref)")),
        &format!("PLUGIN_TABLE_ELEMENTS_MAX = {PLUGIN_TABLE_ELEMENTS_MAX}"),
    );
}

#[test]
fn too_many_functions_are_refused() {
    let funcs = "(func)".repeat(PLUGIN_FUNCTIONS_PER_MODULE_MAX as usize + 1);
    refused(
        &partitioner_with(&funcs),
        &format!("PLUGIN_FUNCTIONS_PER_MODULE_MAX = {PLUGIN_FUNCTIONS_PER_MODULE_MAX}"),
    );
}

#[test]
fn too_many_locals_are_refused() {
    let locals = " i64".repeat(PLUGIN_LOCALS_PER_FUNCTION_MAX as usize + 1);
    refused(
        &partitioner_with(&format!("(func (local{locals}))")),
        &format!("PLUGIN_LOCALS_PER_FUNCTION_MAX = {PLUGIN_LOCALS_PER_FUNCTION_MAX}"),
    );
}

#[test]
fn too_many_data_segments_are_refused() {
    let data = "(data \"x\")".repeat(PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX as usize + 1);
    refused(
        &partitioner_with(&data),
        &format!("PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX = {PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX}"),
    );
}

#[test]
fn a_component_with_too_many_core_instances_is_refused() {
    let n = PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX + 1;
    let instances = "(core instance (instantiate $m))".repeat(n as usize);
    let component = wat::parse_str(format!("(component (core module $m) {instances})")).unwrap();
    refused(
        &component,
        &format!(
            "PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX = {PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX}"
        ),
    );
}

#[test]
fn a_component_with_two_memories_is_refused() {
    let component = wat::parse_str(
        "(component
           (core module $a (memory 1))
           (core module $b (memory 1))
           (core instance (instantiate $a))
           (core instance (instantiate $b)))",
    )
    .unwrap();
    refused(&component, "PLUGIN_MEMORIES_PER_COMPONENT_MAX = 1");
}

#[test]
fn every_plugin_we_ship_fits_the_limits() {
    let (_dir, registry) = common::registry(|_| {});
    let mut installed = 0;
    for entry in std::fs::read_dir(common::wasm_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "wasm") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        // The Python and JavaScript guests (10-15 s of compiling each in a debug build)
        // are deployed by the broker's e2e suite (tests/e2e/test_polyglot_plugins.py),
        // which fails if one does not fit.
        if name.contains("python-") || name.contains("js-") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        registry
            .install(&name, &bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        installed += 1;
    }
    assert!(installed >= 10, "only {installed} plugins found");
    // And each is instantiable under the pool's limits.
    let murmur2 = registry.partitioner("murmur2", &[]).unwrap();
    let mut batch = ColumnarBatch::new();
    batch.push(0, 0, Some(b"21"), Some(b"v"), &[]);
    assert_eq!(murmur2.partition(&batch, 3).unwrap(), [0]);
    let filter = registry
        .filter("regex-filter", &common::params(&[("pattern", "^v$")]))
        .unwrap();
    assert_eq!(filter.filter(&batch).unwrap(), [true]);
}

#[test]
fn a_compile_past_its_timeout_fails_the_install_naming_the_limit() {
    let (_dir, registry) = common::registry(|c| c.compile_timeout_ms = 1);
    let err = registry
        .install("regex-filter", &common::wasm("regex-filter"))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::CompileTimeout { timeout_ms: 1 }),
        "{err}"
    );
    assert!(
        err.to_string().contains("PLUGIN_COMPILE_TIMEOUT_MS"),
        "{err}"
    );
    assert!(registry.describe("regex-filter").is_none());
}
