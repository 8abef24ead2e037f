//! Sluice's security core (WIP).
pub mod acl;
pub mod limits;
pub mod plain;
pub mod principal;
pub mod quota;
pub mod rng;
pub mod sasl;
pub mod scram;
