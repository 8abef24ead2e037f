//! Every bound the protocol crate checks, with its unit and why. The frame size limit itself
//! is the server's config key `socket.request.max.bytes`, passed in.

/// Smallest valid Kafka frame body: api_key (2) + api_version (2) + correlation_id (4), in
/// bytes. A length prefix below it cannot hold a request header.
pub const REQUEST_HEADER_MIN_BYTES: usize = 8;
