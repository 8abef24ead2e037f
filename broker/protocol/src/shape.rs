//! A pre-decode check of every request body against its API's shape.
//!
//! kafka-protocol reserves `count` elements before decoding them, so a 20-byte frame that
//! claims 2^31 topics would make it allocate ~100 GB and abort the process. Before decoding,
//! we walk the whole body along the request's shape and refuse any array whose count exceeds
//! the bytes left divided by its element's minimum encoded size, and any string or bytes
//! field that runs past the frame.
//!
//! # Where the shapes come from
//! From Kafka's own request message specs (`messages/*Request.json`, Kafka 4.4.0's, the
//! specs kafka-protocol is generated from), embedded and resolved once, on first use, into
//! a `Field` list per (API, version) (`shape/spec.rs`): every version a spec lists has a
//! shape, whether or not the version table serves it yet. The versions Kafka 4.x removed but
//! Sluice still serves to old clients (through [`crate::compat`]) are written by hand in one
//! place, `shape/removed.rs`. [`check`] refuses a request that has neither, and
//! [`assert_complete`], run when the server binds, refuses to start a broker whose version
//! table names a version without one, so an API cannot be added unguarded.
//!
//! # The walk
//! Positional fields in spec order; in flexible versions strings, bytes and arrays carry an
//! unsigned varint length + 1 (0 for null), and every struct (the body too) ends with a
//! tagged-field section. Tagged fields are not positional: each is a tag, a size and that
//! many bytes. The decoder reads a tag it knows straight from the frame (its arrays too), so
//! a known tag's content is walked along its field's shape and must fill exactly its size;
//! an unknown tag is skipped, as the decoder skips it. A non-array struct field is its
//! fields in place, behind an int8 marker (-1 for null) in the versions it is nullable.
//!
//! Bytes after the body are not an error here: the decoder reads the version's fields and
//! ignores a remainder, as Kafka 4.4's broker does (`AbstractRequest.parseRequest` notes the
//! size and parses; nothing checks what is left), so the guard only proves that what the
//! decoder will read fits. The tests check that a real request's walk ends exactly at its end.
//!
//! Nothing here allocates from a count read off the wire, and the walk recurses only as
//! deep as the shape nests, which the specs bound ([`crate::limits::SPEC_STRUCT_DEPTH_MAX`]).

mod removed;
mod spec;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::OnceLock;

use kafka_protocol::messages::ApiKey;

/// One field of a request shape, resolved for one version.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Field {
    /// A fixed-size field of this many bytes (bool, int8..int64, uint16/32, float64, uuid).
    Fixed(usize),
    /// `string` / nullable string: i16 length, -1 for null.
    Str,
    /// `bytes` / `records` / nullable ones: i32 length, -1 for null.
    Bytes,
    /// Compact string, bytes or records (flexible versions): unsigned varint length + 1, 0
    /// for null.
    CompactStr,
    /// An array (nullable allowed): i32 count (-1 for null), then that many elements.
    Array(Element),
    /// A compact array (flexible versions): unsigned varint count + 1 (0 for null), then that
    /// many elements.
    CompactArray(Element),
    /// A struct field: its fields in place.
    Struct(Vec<Field>),
    /// A nullable struct field: an int8 marker, negative for null, then its fields.
    NullableStruct(Vec<Field>),
    /// A tagged-field section (flexible versions): unsigned varint count, then each tag's
    /// varint number, varint size and that many bytes; the tags this version knows.
    Tags(Vec<TaggedField>),
}

/// An array's element (a struct, or one primitive), with its smallest encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Element {
    fields: Vec<Field>,
    /// The fewest bytes one element takes (at least 1, so a count is bounded by the bytes).
    min_bytes: usize,
}

impl Element {
    fn new(fields: Vec<Field>) -> Element {
        let min_bytes = min_bytes(&fields).max(1);
        Element { fields, min_bytes }
    }
}

/// A tagged field a version knows: its tag and the shape of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaggedField {
    tag: u32,
    shape: Field,
}

/// A non-flexible array of `fields` (the hand-written shapes of [`removed`]).
fn array(fields: Vec<Field>) -> Field {
    Field::Array(Element::new(fields))
}

/// Every shape, by (API key, version): the specs', then [`removed`]'s.
type Shapes = HashMap<(i16, i16), Vec<Field>>;

/// The shapes, resolved once (about 1 ms, `examples/shape_cost.rs`; the server's
/// [`assert_complete`] at bind pays it, so no request does); an error if a vendored spec is
/// not understood (a test resolves every one, so a refreshed spec that needs more of the
/// walker fails there first).
fn shapes() -> Result<&'static Shapes, &'static str> {
    static SHAPES: OnceLock<Result<Shapes, String>> = OnceLock::new();
    SHAPES
        .get_or_init(|| {
            let mut shapes = Shapes::new();
            for resolved in spec::resolve_all()? {
                for (version, shape) in (resolved.valid.min..).zip(resolved.shapes) {
                    shapes.insert((resolved.api_key, version), shape);
                }
            }
            for &(key, min, max) in removed::VERSIONS {
                for version in min..=max {
                    let shape = removed::shape(key, version).ok_or_else(|| {
                        format!("removed.rs lists {key:?} v{version} without a shape")
                    })?;
                    shapes.insert((key as i16, version), shape);
                }
            }
            Ok(shapes)
        })
        .as_ref()
        .map_err(String::as_str)
}

fn shape(key: ApiKey, version: i16) -> Result<Option<&'static [Field]>, String> {
    let shapes = shapes().map_err(|e| format!("request shapes: {e}"))?;
    Ok(shapes.get(&(key as i16, version)).map(Vec::as_slice))
}

/// Checks a request body (after the header) against its shape; refuses a request whose
/// (API, version) has no shape.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), String> {
    walk_body(key, version, body).map(drop)
}

/// Walks a body along its shape; the bytes walked.
fn walk_body(key: ApiKey, version: i16, body: &[u8]) -> Result<usize, String> {
    let Some(shape) = shape(key, version)? else {
        return Err(format!("{key:?} v{version} has no request shape"));
    };
    let mut at = 0;
    walk(shape, body, &mut at)?;
    Ok(at)
}

/// Every (API, version) the version table advertises has a shape. The server refuses to
/// start otherwise.
pub fn assert_complete() -> Result<(), String> {
    complete(crate::versions::SUPPORTED)
}

fn complete(table: &[crate::versions::ApiSupport]) -> Result<(), String> {
    for support in table {
        for version in support.advertised_min..=support.max {
            if shape(support.key, version)?.is_none() {
                return Err(format!(
                    "{:?} v{version} is in the version table but has no request shape (neither in sluice-protocol's messages/ specs nor in shape/removed.rs)",
                    support.key
                ));
            }
        }
    }
    Ok(())
}

fn walk(shape: &[Field], body: &[u8], at: &mut usize) -> Result<(), String> {
    for field in shape {
        match field {
            Field::Fixed(n) => take(body, at, *n)?,
            Field::Str => {
                let len = i16::from_be_bytes(read::<2>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            Field::Bytes => {
                let len = i32::from_be_bytes(read::<4>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            Field::CompactStr => {
                let len = read_uvarint(body, at)?;
                take(body, at, len.saturating_sub(1))?;
            }
            Field::Array(element) => {
                let count = i32::from_be_bytes(read::<4>(body, at)?);
                elements(element, usize::try_from(count).unwrap_or(0), body, at)?;
            }
            Field::CompactArray(element) => {
                let count = read_uvarint(body, at)?.saturating_sub(1);
                elements(element, count, body, at)?;
            }
            Field::Struct(fields) => walk(fields, body, at)?,
            Field::NullableStruct(fields) => {
                let [marker] = read::<1>(body, at)?;
                if (marker as i8) >= 0 {
                    walk(fields, body, at)?;
                }
            }
            Field::Tags(known) => tags(known, body, at)?,
        }
    }
    Ok(())
}

/// A tagged-field section: a known tag's content walked within its size, which it must fill
/// (the decoder reads it from the frame, not from the size); an unknown tag skipped.
fn tags(known: &[TaggedField], body: &[u8], at: &mut usize) -> Result<(), String> {
    let count = read_uvarint(body, at)?;
    if count > (body.len() - *at) / 2 {
        return Err(format!(
            "{count} tagged fields in the bytes left of the frame"
        ));
    }
    for _ in 0..count {
        let tag = read_uvarint(body, at)?;
        let size = read_uvarint(body, at)?;
        let start = *at;
        take(body, at, size)?;
        let Some(field) = known.iter().find(|f| f.tag as usize == tag) else {
            continue;
        };
        let end = *at;
        *at = start;
        walk(std::slice::from_ref(&field.shape), &body[..end], at)?;
        if *at != end {
            return Err(format!(
                "tagged field {tag} is {size} bytes but its content {} bytes",
                *at - start
            ));
        }
    }
    Ok(())
}

/// `count` elements, refused before any is read if they cannot fit.
fn elements(element: &Element, count: usize, body: &[u8], at: &mut usize) -> Result<(), String> {
    let left = body.len() - *at;
    let min = element.min_bytes;
    if count > left / min {
        return Err(format!(
            "array of {count} elements (each at least {min} bytes) in the {left} bytes left of the frame"
        ));
    }
    for _ in 0..count {
        walk(&element.fields, body, at)?;
    }
    Ok(())
}

/// The fewest bytes `fields` take: empty strings and arrays, null structs, no tags.
fn min_bytes(fields: &[Field]) -> usize {
    fields
        .iter()
        .map(|f| match f {
            Field::Fixed(n) => *n,
            Field::Str => 2,
            Field::Bytes | Field::Array(_) => 4,
            Field::Struct(fields) => min_bytes(fields),
            Field::CompactStr
            | Field::CompactArray(_)
            | Field::NullableStruct(_)
            | Field::Tags(_) => 1,
        })
        .sum()
}

fn read<const N: usize>(body: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let bytes = body
        .get(*at..*at + N)
        .ok_or_else(|| format!("frame ends at byte {} inside a field", body.len()))?;
    *at += N;
    Ok(bytes.try_into().unwrap_or([0; N]))
}

/// An unsigned varint (flexible versions' lengths, counts and tags), at most 5 bytes.
fn read_uvarint(body: &[u8], at: &mut usize) -> Result<usize, String> {
    let mut value = 0usize;
    for i in 0..5 {
        let [byte] = read::<1>(body, at)?;
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("an unsigned varint longer than 5 bytes".into())
}

fn take(body: &[u8], at: &mut usize, n: usize) -> Result<(), String> {
    if body.len() - *at < n {
        return Err(format!("a {n}-byte field runs past the end of the frame"));
    }
    *at += n;
    Ok(())
}
