//! Sluice's Kafka-protocol broker.
//!
//! # Layout
//! (filled in as modules land)
