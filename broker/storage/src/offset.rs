//! The `Offset` newtype: a record's position in a partition, as Kafka numbers it.

use std::fmt;

/// A Kafka offset (i64 on the wire and on disk). Newtype so it never mixes with byte counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The raw i64 value as Kafka carries it.
    #[must_use]
    pub const fn value(self) -> i64 {
        self.0
    }

    /// `self + delta`.
    #[must_use]
    pub const fn plus(self, delta: i64) -> Offset {
        Offset(self.0 + delta)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
