//! The machinery of the key table, Kafka's `ConfigDef` as a `macro_rules!`: `broker_keys!`
//! turns one entry per key (`keys.rs`) into the `BrokerConfig` struct, its `Default`,
//! `set`/`get` in text form, `BROKER_KEYS` and `KEYS` (each key's topic override and
//! sensitivity), and the storage `LogConfig` of a config's values.
//!
//! An entry, in this order:
//!
//! ```text
//! /// What the key does (the field's doc).
//! [sensitive] "kafka.key" => field_name: RustType = default, codec
//!     [, topic "topic.key"] [, log log_config_field];
//! ```
//!
//! - `codec` (`super::value`) parses the text form into `RustType` with the key's range or
//!   validator, and prints it back; a codec of another type is a compile error pointing at
//!   the entry (`Codec<RustType>` not implemented, "return type was inferred ... here").
//! - `topic "x"`: topic key `x` overrides this key; a topic's value goes through the same
//!   codec (`crate::topic_config`).
//! - `log f`: the value feeds field `f` of `sluice_storage::LogConfig`; every field of it
//!   must be named by one entry (a missing one is a compile error in `log_config`).
//! - `sensitive`: a secret; DescribeConfigs leaves it out, `--print-config` redacts it.

/// One broker key's attributes beside its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// Kafka's name (`log.retention.ms`).
    pub name: &'static str,
    /// The topic key that overrides it (`retention.ms`), if any.
    pub topic: Option<&'static str>,
    /// A secret: DescribeConfigs leaves it out and `--print-config` redacts it.
    pub sensitive: bool,
}

/// Declares every broker key once; see the module doc for an entry's shape.
macro_rules! broker_keys {
    (@topic) => { None };
    (@topic $topic:literal) => { Some($topic) };
    (@sensitive) => { false };
    (@sensitive sensitive) => { true };
    ($(
        $(#[$doc:meta])*
        $($sensitive:ident)? $name:literal => $field:ident: $ty:ty = $default:expr, $codec:expr
            $(, topic $topic:literal)? $(, log $log:ident)?;
    )*) => {
        /// The broker's configuration, one field per key of the table (`config/keys.rs`).
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $(
                #[doc = concat!("`", $name, "`:")]
                $(#[$doc])*
                pub $field: $ty,
            )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        /// Each key's codec, typed by its field: a codec that does not make the field's type
        /// is a compile error at the entry.
        mod codec {
            use super::*;
            $(
                pub(super) fn $field() -> impl $crate::config::value::Codec<$ty> {
                    $codec
                }
            )*
        }

        /// Every broker key, in the order DescribeConfigs and the default file list them.
        pub const BROKER_KEYS: &[&str] = &[ $( $name, )* ];

        /// Every broker key with its attributes, in `BROKER_KEYS`' order.
        pub const KEYS: &[$crate::config::table::Key] = &[ $(
            $crate::config::table::Key {
                name: $name,
                topic: $crate::config::table::broker_keys!(@topic $($topic)?),
                sensitive: $crate::config::table::broker_keys!(@sensitive $($sensitive)?),
            },
        )* ];

        impl BrokerConfig {
            /// Sets one key from its text form (file, env and flags all come through here).
            pub fn set(&mut self, key: &str, value: &str) -> Result<(), $crate::error::ConfigError> {
                use $crate::config::value::Codec;
                let bad = |reason: String| $crate::error::ConfigError::BadValue {
                    key: key.to_owned(),
                    value: value.to_owned(),
                    reason,
                };
                match key {
                    $( $name => self.$field = codec::$field().parse(value).map_err(bad)?, )*
                    _ => return Err($crate::error::ConfigError::UnknownKey(key.to_owned())),
                }
                Ok(())
            }

            /// The current value of a key in Kafka's text form (DescribeConfigs).
            pub fn get(&self, key: &str) -> Option<String> {
                use $crate::config::value::Codec;
                Some(match key {
                    $( $name => codec::$field().print(&self.$field), )*
                    _ => return None,
                })
            }

            /// The storage engine's settings from these values (a topic's effective config
            /// gives the topic's `LogConfig`).
            pub fn log_config(&self) -> sluice_storage::LogConfig {
                sluice_storage::LogConfig { $( $( $log: self.$field, )? )* }
            }
        }
    };
}

pub(crate) use broker_keys;
