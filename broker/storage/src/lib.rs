//! Sluice's partition log (synchronous; no tokio, no sockets).
//!
//! # Layout
//! (filled in as modules land)
