//! Framing: what a request frame must be before its body is decoded, and the response
//! header and message encoded into bytes. The server reads the 4-byte length prefix and the
//! frame from the socket; everything it checks about those bytes is here.
//!
//! Only a [`FrameError`] closes a connection: a length prefix outside
//! `REQUEST_HEADER_MIN_BYTES..=socket.request.max.bytes` (refused before anything is
//! allocated for the body), a frame without a request header, a header or body that does not
//! decode, a body whose arrays the frame cannot hold ([`crate::shape`]). Every other problem
//! of a request is a Kafka error code in its response.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::limits::REQUEST_HEADER_MIN_BYTES;
use crate::shape;
use crate::versions::{self, ApiSupport};

/// Why a frame is refused (the connection is closed after the responses already queued).
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is negative, too small or above `socket.request.max.bytes`.
    #[error("frame length {length} is outside {min}..={max} (socket.request.max.bytes)")]
    BadLength {
        /// The length prefix received.
        length: i32,
        /// Smallest valid frame.
        min: usize,
        /// `socket.request.max.bytes`.
        max: u32,
    },
    /// A request we cannot parse or answer.
    #[error("{0}")]
    Malformed(String),
}

/// The frame body's length from its 4-byte big-endian prefix, checked against
/// `REQUEST_HEADER_MIN_BYTES` and `max_bytes` (`socket.request.max.bytes`) before the
/// server allocates anything for the body.
pub fn body_length(prefix: [u8; 4], max_bytes: u32) -> Result<usize, FrameError> {
    let length = i32::from_be_bytes(prefix);
    let min = REQUEST_HEADER_MIN_BYTES;
    if length < min as i32 || length as u32 > max_bytes {
        return Err(FrameError::BadLength {
            length,
            min,
            max: max_bytes,
        });
    }
    Ok(length as usize)
}

/// The first fields of every request header, read before choosing the header version.
#[derive(Debug, Clone, Copy)]
pub struct Peeked {
    /// The raw API key (one the version table may not know).
    pub api_key: i16,
    /// The API version the client sent.
    pub version: i16,
    /// The correlation id the response must carry.
    pub correlation_id: i32,
}

/// Reads the first fields of a request header.
pub fn peek(frame: &[u8]) -> Result<Peeked, FrameError> {
    let field = |at: usize, n: usize| {
        frame.get(at..at + n).ok_or_else(|| {
            FrameError::Malformed(format!(
                "frame of {} bytes has no request header",
                frame.len()
            ))
        })
    };
    Ok(Peeked {
        api_key: i16::from_be_bytes(field(0, 2)?.try_into().unwrap_or_default()),
        version: i16::from_be_bytes(field(2, 2)?.try_into().unwrap_or_default()),
        correlation_id: i32::from_be_bytes(field(4, 4)?.try_into().unwrap_or_default()),
    })
}

/// The version table's row for a peeked request; an API key it does not list is refused.
pub fn api(peeked: &Peeked) -> Result<&'static ApiSupport, FrameError> {
    versions::lookup(peeked.api_key)
        .ok_or_else(|| FrameError::Malformed(format!("unsupported API key {}", peeked.api_key)))
}

/// Decodes the request header and checks the body against the request's shape; the body
/// comes back behind the header, still undecoded.
pub fn header_and_body(
    key: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<(RequestHeader, Bytes), FrameError> {
    let mut body = frame;
    let mut header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| FrameError::Malformed(format!("{key:?} v{version} request header: {e}")))?;
    // Owned, so a request that waits (JoinGroup) does not keep its frame alive through it.
    header.client_id = header
        .client_id
        .map(|id| StrBytes::from_string(id.to_string()));
    shape::check(key, version, &body)
        .map_err(|e| FrameError::Malformed(format!("{key:?} v{version} request: {e}")))?;
    Ok((header, body))
}

/// Decodes a request body at `version` (the version it is read as).
pub fn decode<T: Decodable>(body: &mut Bytes, key: ApiKey, version: i16) -> Result<T, FrameError> {
    T::decode(body, version)
        .map_err(|e| FrameError::Malformed(format!("{key:?} v{version} request: {e}")))
}

/// A response header.
pub fn response_header(correlation_id: i32, header_version: i16) -> Result<Bytes, FrameError> {
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, header_version)
        .map_err(|e| FrameError::Malformed(format!("encoding response header: {e}")))?;
    Ok(buf.freeze())
}

/// A response header and message, encoded into one buffer.
pub fn encode_response<M: Encodable>(
    correlation_id: i32,
    header_version: i16,
    message: &M,
    version: i16,
) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::from(&response_header(correlation_id, header_version)?[..]);
    message
        .encode(&mut buf, version)
        .map_err(|e| FrameError::Malformed(format!("encoding v{version} response: {e}")))?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_prefix_is_checked_before_the_body_is_read() {
        assert_eq!(body_length(8i32.to_be_bytes(), 100).ok(), Some(8));
        assert_eq!(body_length(100i32.to_be_bytes(), 100).ok(), Some(100));
        for length in [-1, 0, 7, 101, i32::MAX] {
            let e = body_length(length.to_be_bytes(), 100).unwrap_err();
            assert!(matches!(e, FrameError::BadLength { .. }), "{length}: {e}");
        }
    }

    #[test]
    fn a_frame_shorter_than_a_request_header_is_refused() {
        assert!(peek(&[0, 3, 0, 12, 0, 0, 0]).is_err());
        let peeked = peek(&[0, 3, 0, 12, 0, 0, 0, 9]).unwrap();
        assert_eq!(
            (peeked.api_key, peeked.version, peeked.correlation_id),
            (3, 12, 9)
        );
        assert!(
            api(&Peeked {
                api_key: 999,
                ..peeked
            })
            .is_err()
        );
    }
}
