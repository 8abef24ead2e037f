//! Host bindings generated from the WIT, one module per supported package version and
//! world (wit/README.md, rule 4: the host keeps loading older minor versions), and per
//! plugin kind one enum over the versions that have its world, so the calls in
//! `partitioner.rs`, `filter.rs`, `transform.rs` and `validator.rs` are written once.
//!
//! Every version's `types` interface is the 0.1.0 one (the shapes never change within a
//! major version), so all versions share one set of Rust types: `RecordBatch`, `Param`,
//! `PluginError`, `LogLevel`. Each version has its own `host` import, and `HostState`
//! implements each.

#![allow(missing_debug_implementations, clippy::all, clippy::pedantic)]

use wasmtime::Store;
use wasmtime::component::InstancePre;

/// `sluice:plugin@0.1.0` (wit/released/sluice-plugin@0.1.0.wit): partitioner, filter,
/// transform.
pub mod v0_1 {
    pub mod partitioner {
        wasmtime::component::bindgen!({
            path: "../../wit/released/sluice-plugin@0.1.0.wit",
            world: "sluice:plugin/partitioner",
        });
    }

    pub mod filter {
        wasmtime::component::bindgen!({
            path: "../../wit/released/sluice-plugin@0.1.0.wit",
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
            path: "../../wit/released/sluice-plugin@0.1.0.wit",
            world: "sluice:plugin/transform",
            with: {
                "sluice:plugin/types": super::partitioner::sluice::plugin::types,
                "sluice:plugin/host": super::partitioner::sluice::plugin::host,
            },
        });
    }
}

/// `sluice:plugin@0.2.0` (wit/sluice-plugin.wit, the current version): the 0.1.0 worlds
/// and the validator.
pub mod v0_2 {
    pub mod partitioner {
        wasmtime::component::bindgen!({
            path: "../../wit/sluice-plugin.wit",
            world: "sluice:plugin/partitioner",
            with: {
                "sluice:plugin/types": crate::bindings::v0_1::partitioner::sluice::plugin::types,
            },
        });
    }

    pub mod filter {
        wasmtime::component::bindgen!({
            path: "../../wit/sluice-plugin.wit",
            world: "sluice:plugin/filter",
            with: {
                "sluice:plugin/types": crate::bindings::v0_1::partitioner::sluice::plugin::types,
                "sluice:plugin/host": super::partitioner::sluice::plugin::host,
            },
        });
    }

    pub mod transform {
        wasmtime::component::bindgen!({
            path: "../../wit/sluice-plugin.wit",
            world: "sluice:plugin/transform",
            with: {
                "sluice:plugin/types": crate::bindings::v0_1::partitioner::sluice::plugin::types,
                "sluice:plugin/host": super::partitioner::sluice::plugin::host,
            },
        });
    }

    pub mod validator {
        wasmtime::component::bindgen!({
            path: "../../wit/sluice-plugin.wit",
            world: "sluice:plugin/validator",
            with: {
                "sluice:plugin/types": crate::bindings::v0_1::partitioner::sluice::plugin::types,
                "sluice:plugin/host": super::partitioner::sluice::plugin::host,
            },
        });
    }
}

pub use v0_1::partitioner::sluice::plugin::types::{LogLevel, Param, PluginError, RecordBatch};
pub use v0_2::validator::exports::sluice::plugin::validator_api::Rejection;

/// The WIT package versions the host loads, oldest first. A plugin's version is told by
/// the export names of its component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitVersion {
    V0_1,
    V0_2,
}

impl WitVersion {
    pub const ALL: [Self; 2] = [Self::V0_1, Self::V0_2];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_1 => "0.1.0",
            Self::V0_2 => "0.2.0",
        }
    }
}

/// The interface a plugin of `kind` exports, in `version`: how a component's kind and
/// version are told. `None`: that version has no such kind.
pub fn export_name(kind: &str, version: WitVersion) -> Option<String> {
    if kind == "validator" && version == WitVersion::V0_1 {
        return None;
    }
    Some(format!("sluice:plugin/{kind}-api@{}", version.as_str()))
}

/// One plugin kind's linked component and instance bindings, in each WIT version that has
/// its world: `$pre` (made once per plugin version) instantiates into `$bindings`.
macro_rules! versioned_world {
    ($pre:ident, $bindings:ident, $world:ident, $World:ident, $WorldPre:ident) => {
        pub(crate) enum $pre<T: 'static> {
            V0_1(v0_1::$world::$WorldPre<T>),
            V0_2(v0_2::$world::$WorldPre<T>),
        }

        // `pub` in this private module: `call::Kind::Bindings` of a public trait.
        pub enum $bindings {
            V0_1(v0_1::$world::$World),
            V0_2(v0_2::$world::$World),
        }

        impl<T: 'static> $pre<T> {
            pub(crate) fn new(version: WitVersion, pre: InstancePre<T>) -> wasmtime::Result<Self> {
                Ok(match version {
                    WitVersion::V0_1 => Self::V0_1(v0_1::$world::$WorldPre::new(pre)?),
                    WitVersion::V0_2 => Self::V0_2(v0_2::$world::$WorldPre::new(pre)?),
                })
            }

            pub(crate) fn instantiate(&self, store: &mut Store<T>) -> wasmtime::Result<$bindings> {
                Ok(match self {
                    Self::V0_1(pre) => $bindings::V0_1(pre.instantiate(store)?),
                    Self::V0_2(pre) => $bindings::V0_2(pre.instantiate(store)?),
                })
            }
        }
    };
}

versioned_world!(
    PartitionerPre,
    PartitionerBindings,
    partitioner,
    Partitioner,
    PartitionerPre
);
versioned_world!(FilterPre, FilterBindings, filter, Filter, FilterPre);
versioned_world!(
    TransformPre,
    TransformBindings,
    transform,
    Transform,
    TransformPre
);

/// Calls `$call` with `$api` bound to the world's exported interface (`$accessor`),
/// whichever WIT version the bindings are of: the generated types differ per version, the
/// call is written once.
macro_rules! on_api {
    ($bindings:expr, $Bindings:ident, $accessor:ident, |$api:ident| $call:expr) => {
        match $bindings {
            $crate::bindings::$Bindings::V0_1(b) => {
                let $api = b.$accessor();
                $call
            }
            $crate::bindings::$Bindings::V0_2(b) => {
                let $api = b.$accessor();
                $call
            }
        }
    };
}
pub(crate) use on_api;

/// The validator exists from 0.2.0 on.
pub(crate) type ValidatorPre<T> = v0_2::validator::ValidatorPre<T>;
pub type ValidatorBindings = v0_2::validator::Validator;

/// Links the `host` import of every supported version.
pub(crate) fn add_host_to_linker<T>(
    linker: &mut wasmtime::component::Linker<T>,
) -> wasmtime::Result<()>
where
    T: v0_1::partitioner::sluice::plugin::host::Host
        + v0_2::partitioner::sluice::plugin::host::Host
        + 'static,
{
    use wasmtime::component::HasSelf;
    v0_1::partitioner::sluice::plugin::host::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    v0_2::partitioner::sluice::plugin::host::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    Ok(())
}
