//! Coordinator tests.
