//! Host bindings generated from `wit/sluice-plugin.wit`, one module per
//! world. When a new minor WIT version ships, the older versions get
//! modules of their own here (see wit/README.md).

#![allow(missing_debug_implementations, clippy::all, clippy::pedantic)]

pub mod partitioner {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "sluice:plugin/partitioner",
    });
}

pub mod filter {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "sluice:plugin/filter",
        // One set of types and one `host` import for every world.
        with: {
            "sluice:plugin/types": super::partitioner::sluice::plugin::types,
            "sluice:plugin/host": super::partitioner::sluice::plugin::host,
        },
    });
}

pub mod transform {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "sluice:plugin/transform",
        with: {
            "sluice:plugin/types": super::partitioner::sluice::plugin::types,
            "sluice:plugin/host": super::partitioner::sluice::plugin::host,
        },
    });
}

pub use partitioner::sluice::plugin::types::{LogLevel, Param, PluginError, RecordBatch};

/// Export names, one per plugin kind: how a component's kind is told.
pub const PARTITIONER_EXPORT: &str = "sluice:plugin/partitioner-api@0.1.0";
pub const FILTER_EXPORT: &str = "sluice:plugin/filter-api@0.1.0";
pub const TRANSFORM_EXPORT: &str = "sluice:plugin/transform-api@0.1.0";
