//! The install-time shape check of a component, before anything is compiled: one pass of
//! `wasmparser` over its sections (no validation, no code generation: linear in its bytes)
//! that refuses a component over the per-component limits (core instances, memories,
//! tables, table elements) or the compile limits (modules, functions, function body bytes,
//! locals, data and element segments) of `limits.rs`, with a message naming the limit and
//! its value. The pooling allocator applies the per-component limits again when the
//! compiled component is loaded (at install too), counting exactly; this pass gives the
//! clear message and keeps an oversized module away from Cranelift.

use wasmparser::{Encoding, Instance, Parser, Payload};

use crate::error::RegistryError;
use crate::limits::{
    PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX, PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX,
    PLUGIN_ELEMENT_SEGMENTS_PER_MODULE_MAX, PLUGIN_FUNCTION_BODY_BYTES_MAX,
    PLUGIN_FUNCTIONS_PER_MODULE_MAX, PLUGIN_IMPORTS_PER_COMPONENT_MAX,
    PLUGIN_LOCALS_PER_FUNCTION_MAX, PLUGIN_MEMORIES_PER_COMPONENT_MAX,
    PLUGIN_MEMORIES_PER_MODULE_MAX, PLUGIN_MODULES_PER_COMPONENT_MAX, PLUGIN_TABLE_ELEMENTS_MAX,
    PLUGIN_TABLES_PER_COMPONENT_MAX, PLUGIN_TABLES_PER_MODULE_MAX,
};

/// What one core module defines.
#[derive(Debug, Default, Clone, Copy)]
struct Module {
    memories: u32,
    tables: u32,
}

/// What one component (the plugin, or one nested in it) holds.
#[derive(Debug, Default)]
struct Component {
    /// Core modules defined here, by core module index (aliased ones are not counted).
    modules: Vec<Module>,
    /// Modules and nested components defined here.
    nested: u32,
    core_instances: u32,
    memories: u32,
    tables: u32,
}

enum Scope {
    Module(Module),
    Component(Component),
}

/// Refuse `bytes` (a component) if it is over a limit; return the names of its top-level
/// imports (what the linker must give it), so imports the host refuses are refused before
/// anything is compiled.
///
/// # Errors
/// [`RegistryError::OverLimit`] naming the limit, or [`RegistryError::Invalid`] if the
/// bytes do not parse.
pub(crate) fn check_component(bytes: &[u8]) -> Result<Vec<String>, RegistryError> {
    let invalid = |e: wasmparser::BinaryReaderError| RegistryError::Invalid(e.to_string());
    let mut stack: Vec<Scope> = Vec::new();
    let mut imports = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(invalid)? {
            Payload::ComponentImportSection(reader) if stack.len() == 1 => {
                for import in reader {
                    let import = import.map_err(invalid)?;
                    imports.push(match import.name.version_suffix {
                        Some(v) if !import.name.name.contains('@') => {
                            format!("{}@{v}", import.name.name)
                        }
                        _ => import.name.name.to_owned(),
                    });
                    over(
                        "imports per component",
                        imports.len() as u32,
                        PLUGIN_IMPORTS_PER_COMPONENT_MAX,
                        "PLUGIN_IMPORTS_PER_COMPONENT_MAX",
                    )?;
                }
            }
            Payload::Version { encoding, .. } => {
                if let Some(Scope::Component(parent)) = stack.last_mut() {
                    parent.nested += 1;
                    over(
                        "core modules and nested components per component",
                        parent.nested,
                        PLUGIN_MODULES_PER_COMPONENT_MAX,
                        "PLUGIN_MODULES_PER_COMPONENT_MAX",
                    )?;
                }
                stack.push(match encoding {
                    Encoding::Module => Scope::Module(Module::default()),
                    Encoding::Component => Scope::Component(Component::default()),
                });
            }
            Payload::End(_) => end_scope(&mut stack)?,
            payload => match stack.last_mut() {
                Some(Scope::Module(module)) => check_module_payload(module, payload)?,
                Some(Scope::Component(component)) => check_component_payload(component, payload)?,
                None => {}
            },
        }
    }
    Ok(imports)
}

/// A module's totals go to the component defining it; a nested component's to its parent.
fn end_scope(stack: &mut Vec<Scope>) -> Result<(), RegistryError> {
    let ended = stack.pop();
    match (ended, stack.last_mut()) {
        (Some(Scope::Module(module)), Some(Scope::Component(parent))) => {
            parent.modules.push(module);
        }
        (Some(Scope::Component(nested)), Some(Scope::Component(parent))) => {
            parent.core_instances += nested.core_instances;
            parent.memories += nested.memories;
            parent.tables += nested.tables;
            check_totals(parent)?;
        }
        _ => {}
    }
    Ok(())
}

fn check_component_payload(
    component: &mut Component,
    payload: Payload<'_>,
) -> Result<(), RegistryError> {
    let invalid = |e: wasmparser::BinaryReaderError| RegistryError::Invalid(e.to_string());
    if let Payload::InstanceSection(reader) = payload {
        for instance in reader {
            if let Instance::Instantiate { module_index, .. } = instance.map_err(invalid)? {
                let module = component
                    .modules
                    .get(module_index as usize)
                    .copied()
                    .unwrap_or_default();
                component.core_instances += 1;
                component.memories += module.memories;
                component.tables += module.tables;
                check_totals(component)?;
            }
        }
    }
    Ok(())
}

fn check_totals(c: &Component) -> Result<(), RegistryError> {
    over(
        "core instances per component",
        c.core_instances,
        PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX,
        "PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX",
    )?;
    over(
        "memories per component",
        c.memories,
        PLUGIN_MEMORIES_PER_COMPONENT_MAX,
        "PLUGIN_MEMORIES_PER_COMPONENT_MAX",
    )?;
    over(
        "tables per component",
        c.tables,
        PLUGIN_TABLES_PER_COMPONENT_MAX,
        "PLUGIN_TABLES_PER_COMPONENT_MAX",
    )
}

fn check_module_payload(module: &mut Module, payload: Payload<'_>) -> Result<(), RegistryError> {
    let invalid = |e: wasmparser::BinaryReaderError| RegistryError::Invalid(e.to_string());
    match payload {
        Payload::MemorySection(reader) => {
            module.memories += reader.count();
            over(
                "memories per core module",
                module.memories,
                PLUGIN_MEMORIES_PER_MODULE_MAX,
                "PLUGIN_MEMORIES_PER_MODULE_MAX",
            )?;
        }
        Payload::TableSection(reader) => {
            module.tables += reader.count();
            over(
                "tables per core module",
                module.tables,
                PLUGIN_TABLES_PER_MODULE_MAX,
                "PLUGIN_TABLES_PER_MODULE_MAX",
            )?;
            for table in reader {
                let initial = table.map_err(invalid)?.ty.initial;
                over(
                    "initial elements of a table",
                    u32::try_from(initial).unwrap_or(u32::MAX),
                    PLUGIN_TABLE_ELEMENTS_MAX,
                    "PLUGIN_TABLE_ELEMENTS_MAX",
                )?;
            }
        }
        Payload::FunctionSection(reader) => {
            over(
                "functions per core module",
                reader.count(),
                PLUGIN_FUNCTIONS_PER_MODULE_MAX,
                "PLUGIN_FUNCTIONS_PER_MODULE_MAX",
            )?;
        }
        Payload::DataSection(reader) => {
            over(
                "data segments per core module",
                reader.count(),
                PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX,
                "PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX",
            )?;
        }
        Payload::ElementSection(reader) => {
            over(
                "element segments per core module",
                reader.count(),
                PLUGIN_ELEMENT_SEGMENTS_PER_MODULE_MAX,
                "PLUGIN_ELEMENT_SEGMENTS_PER_MODULE_MAX",
            )?;
        }
        Payload::CodeSectionEntry(body) => {
            let bytes = u32::try_from(body.range().len()).unwrap_or(u32::MAX);
            over(
                "bytes of one function body",
                bytes,
                PLUGIN_FUNCTION_BODY_BYTES_MAX,
                "PLUGIN_FUNCTION_BODY_BYTES_MAX",
            )?;
            let mut locals = 0u32;
            for decl in body.get_locals_reader().map_err(invalid)? {
                locals = locals.saturating_add(decl.map_err(invalid)?.0);
                over(
                    "locals of one function",
                    locals,
                    PLUGIN_LOCALS_PER_FUNCTION_MAX,
                    "PLUGIN_LOCALS_PER_FUNCTION_MAX",
                )?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// `what` is `value`, over `limit = max`?
fn over(what: &str, value: u32, max: u32, limit: &str) -> Result<(), RegistryError> {
    if value > max {
        return Err(RegistryError::OverLimit(format!(
            "{what}: {value}, over {limit} = {max}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_names_are_read_before_compiling() {
        let seeds = crate::fuzz::component_seeds(2, "wasi:http/types@0.2.0");
        assert_eq!(check_component(&seeds[0].1).unwrap(), Vec::<String>::new());
        assert_eq!(
            check_component(&seeds[1].1).unwrap(),
            ["wasi:http/types@0.2.0"]
        );
        let over =
            crate::fuzz::component_seeds(PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX as u8 + 1, "x");
        let err = check_component(&over[0].1).unwrap_err().to_string();
        assert!(
            err.contains("PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX"),
            "{err}"
        );
    }
}
