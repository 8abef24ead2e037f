//! Every bound the protocol crate checks, with its unit and why. The frame size limit itself
//! is the server's config key `socket.request.max.bytes`, passed in.

/// Smallest valid Kafka frame body: api_key (2) + api_version (2) + correlation_id (4), in
/// bytes. A length prefix below it cannot hold a request header.
pub const REQUEST_HEADER_MIN_BYTES: usize = 8;

/// How deep structs may nest in a request message spec (`messages/`): Kafka 4.4's deepest
/// request (StreamsGroupHeartbeat's topology) nests 4 structs. A spec deeper than this, or
/// whose structs refer to themselves, is refused when the shapes are resolved, so the shape
/// walker's recursion is bounded by the specs, never by a request.
pub const SPEC_STRUCT_DEPTH_MAX: usize = 8;
