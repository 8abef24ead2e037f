//! The strict byte reader and writer of Sluice's record formats (the offsets log, the
//! transaction log, the security log, producer snapshots): big-endian integers, and
//! strings and byte fields after a length, as Kafka's own internal records are written.
//!
//! [`Reader`] is strict: every read is bounds-checked, every length is checked against its
//! field's [`Limit`] and the bytes left before anything is copied or allocated, and every
//! count against the smallest size of its entries, so no length or count in the input sizes
//! an allocation. Its [`ReadError`]s name the field that was short or too long, and the
//! limit by name and value. [`Writer`] writes the same forms; a field too long for its length
//! prefix is our bug (callers check their limits first) and panics.

/// A bound on a length or a count, named as the constant it comes from, so an error can say
/// which limit a field broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The bound's name, e.g. `TOPIC_NAME_BYTES_MAX`.
    pub name: &'static str,
    /// Its value (bytes, or entries for a count).
    pub max: usize,
}

impl Limit {
    /// The bound `name` of value `max`.
    #[must_use]
    pub const fn new(name: &'static str, max: usize) -> Self {
        Self { name, max }
    }
}

/// What a strict read refused. `what` names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The input ended inside a field (or a count promises more entries than bytes left).
    #[error("{what} truncated: needs {needed} bytes at byte {at}, the input has {len}")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Where it starts.
        at: usize,
        /// The bytes it needs.
        needed: usize,
        /// The input's length.
        len: usize,
    },
    /// A length prefix over the field's limit.
    #[error("{what} of {len} bytes is over {} ({} bytes)", limit.name, limit.max)]
    TooLong {
        /// The field.
        what: &'static str,
        /// The length read.
        len: usize,
        /// The limit it broke.
        limit: Limit,
    },
    /// A count over its limit.
    #[error("{count} {what} is over {} ({})", limit.name, limit.max)]
    TooMany {
        /// The entries counted.
        what: &'static str,
        /// The count read.
        count: usize,
        /// The limit it broke.
        limit: Limit,
    },
    /// A negative length or count (other than a null string's -1 where one is allowed).
    #[error("{what} is negative ({value})")]
    Negative {
        /// The field.
        what: &'static str,
        /// The value read.
        value: i32,
    },
    /// A string field that is not UTF-8.
    #[error("{what} is not UTF-8")]
    InvalidUtf8 {
        /// The field.
        what: &'static str,
    },
    /// Bytes after the last field.
    #[error("{0} trailing bytes after the last field")]
    TrailingBytes(usize),
}

/// A strict big-endian reader over one record's bytes (module docs).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

macro_rules! read_int {
    ($($(#[doc = $doc:literal])* $name:ident -> $ty:ty;)*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Errors
            /// [`ReadError::Truncated`] if the input ends first.
            pub fn $name(&mut self, what: &'static str) -> Result<$ty, ReadError> {
                self.array(what).map(<$ty>::from_be_bytes)
            }
        )*
    };
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[must_use]
    pub const fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Bytes read so far.
    #[must_use]
    pub const fn position(&self) -> usize {
        self.at
    }

    /// Bytes not read yet.
    #[must_use]
    pub const fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes, borrowed.
    ///
    /// # Errors
    /// [`ReadError::Truncated`] if fewer are left; nothing is consumed then.
    pub fn take(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(self.truncated(what, n));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// The next `N` bytes, copied.
    ///
    /// # Errors
    /// [`ReadError::Truncated`] if fewer are left; nothing is consumed then.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ReadError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(what, N)?);
        Ok(out)
    }

    read_int! {
        /// An unsigned byte.
        u8 -> u8;
        /// A signed byte (Kafka's INT8).
        i8 -> i8;
        /// A big-endian u16.
        u16 -> u16;
        /// A big-endian i16 (Kafka's INT16).
        i16 -> i16;
        /// A big-endian u32.
        u32 -> u32;
        /// A big-endian i32 (Kafka's INT32).
        i32 -> i32;
        /// A big-endian u64.
        u64 -> u64;
        /// A big-endian i64 (Kafka's INT64).
        i64 -> i64;
    }

    /// An i32 count (Kafka's ARRAY length) of entries of at least `entry_bytes_min` bytes
    /// each: not negative, within `limit`, and no more than the bytes left can hold.
    ///
    /// # Errors
    /// [`ReadError::Negative`], [`ReadError::TooMany`], [`ReadError::Truncated`].
    pub fn count_i32(
        &mut self,
        what: &'static str,
        limit: Limit,
        entry_bytes_min: usize,
    ) -> Result<usize, ReadError> {
        let raw = self.i32(what)?;
        let count = usize::try_from(raw).map_err(|_| ReadError::Negative { what, value: raw })?;
        if count > limit.max {
            return Err(ReadError::TooMany { what, count, limit });
        }
        self.fits(what, count, entry_bytes_min)
    }

    /// A u32 count of entries of at least `entry_bytes_min` bytes each, bounded by the bytes
    /// left (the whole input is bounded before it is read).
    ///
    /// # Errors
    /// [`ReadError::Truncated`] if the bytes left cannot hold that many entries.
    pub fn count_u32(
        &mut self,
        what: &'static str,
        entry_bytes_min: usize,
    ) -> Result<usize, ReadError> {
        let count = self.u32(what)? as usize;
        self.fits(what, count, entry_bytes_min)
    }

    /// A byte field after its u16 length, the length checked against `limit` first.
    ///
    /// # Errors
    /// [`ReadError::TooLong`], [`ReadError::Truncated`].
    pub fn bytes_u16(&mut self, what: &'static str, limit: Limit) -> Result<&'a [u8], ReadError> {
        let len = usize::from(self.u16(what)?);
        self.bounded(what, len, limit)
    }

    /// A UTF-8 string after its u16 length, the length checked against `limit` first.
    ///
    /// # Errors
    /// As [`Reader::bytes_u16`], and [`ReadError::InvalidUtf8`].
    pub fn str_u16(&mut self, what: &'static str, limit: Limit) -> Result<String, ReadError> {
        let raw = self.bytes_u16(what, limit)?;
        utf8(what, raw)
    }

    /// A UTF-8 string after its u32 length, the length checked against `limit` first.
    ///
    /// # Errors
    /// As [`Reader::str_u16`].
    pub fn str_u32(&mut self, what: &'static str, limit: Limit) -> Result<String, ReadError> {
        let len = self.u32(what)? as usize;
        let raw = self.bounded(what, len, limit)?;
        utf8(what, raw)
    }

    /// Kafka's STRING: a UTF-8 string after its i16 length, the length checked against
    /// `limit` first.
    ///
    /// # Errors
    /// [`ReadError::Negative`] for a negative length, else as [`Reader::str_u16`].
    pub fn str_i16(&mut self, what: &'static str, limit: Limit) -> Result<String, ReadError> {
        let len = self.i16(what)?;
        self.string_of(what, len, limit)
    }

    /// Kafka's NULLABLE_STRING: [`Reader::str_i16`], or `None` for the length -1.
    ///
    /// # Errors
    /// As [`Reader::str_i16`] (a length below -1 is [`ReadError::Negative`]).
    pub fn nullable_str_i16(
        &mut self,
        what: &'static str,
        limit: Limit,
    ) -> Result<Option<String>, ReadError> {
        match self.i16(what)? {
            -1 => Ok(None),
            len => self.string_of(what, len, limit).map(Some),
        }
    }

    /// The end of the input: no byte may be left.
    ///
    /// # Errors
    /// [`ReadError::TrailingBytes`] with the count left.
    pub fn finish(&self) -> Result<(), ReadError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(ReadError::TrailingBytes(n)),
        }
    }

    fn truncated(&self, what: &'static str, needed: usize) -> ReadError {
        ReadError::Truncated {
            what,
            at: self.at,
            needed,
            len: self.bytes.len(),
        }
    }

    fn fits(
        &self,
        what: &'static str,
        count: usize,
        entry_bytes_min: usize,
    ) -> Result<usize, ReadError> {
        let needed = count.saturating_mul(entry_bytes_min);
        if needed > self.remaining() {
            return Err(self.truncated(what, needed));
        }
        Ok(count)
    }

    fn bounded(
        &mut self,
        what: &'static str,
        len: usize,
        limit: Limit,
    ) -> Result<&'a [u8], ReadError> {
        if len > limit.max {
            return Err(ReadError::TooLong { what, len, limit });
        }
        self.take(what, len)
    }

    fn string_of(
        &mut self,
        what: &'static str,
        len: i16,
        limit: Limit,
    ) -> Result<String, ReadError> {
        let len = usize::try_from(len).map_err(|_| ReadError::Negative {
            what,
            value: i32::from(len),
        })?;
        let raw = self.bounded(what, len, limit)?;
        utf8(what, raw)
    }
}

fn utf8(what: &'static str, raw: &[u8]) -> Result<String, ReadError> {
    std::str::from_utf8(raw)
        .map(str::to_owned)
        .map_err(|_| ReadError::InvalidUtf8 { what })
}

/// The writer of the forms [`Reader`] reads, into an owned buffer.
#[derive(Debug, Clone, Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

macro_rules! write_int {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[doc = $doc])*
            pub fn $name(&mut self, value: $ty) -> &mut Self {
                self.bytes.extend_from_slice(&value.to_be_bytes());
                self
            }
        )*
    };
}

impl Writer {
    /// An empty writer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for `bytes` bytes.
    #[must_use]
    pub fn with_capacity(bytes: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
        }
    }

    /// The bytes written so far.
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes written.
    #[must_use]
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    write_int! {
        /// An unsigned byte.
        u8: u8;
        /// A signed byte (Kafka's INT8).
        i8: i8;
        /// A big-endian u16.
        u16: u16;
        /// A big-endian i16 (Kafka's INT16).
        i16: i16;
        /// A big-endian u32.
        u32: u32;
        /// A big-endian i32 (Kafka's INT32).
        i32: i32;
        /// A big-endian u64.
        u64: u64;
        /// A big-endian i64 (Kafka's INT64).
        i64: i64;
    }

    /// Bytes as they are, without a length.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// An i32 count (Kafka's ARRAY length). Panics past `i32::MAX` (our bug).
    pub fn count_i32(&mut self, count: usize) -> &mut Self {
        let count = i32::try_from(count).expect("a count over i32::MAX reached a record");
        self.i32(count)
    }

    /// A u32 count. Panics past `u32::MAX` (our bug).
    pub fn count_u32(&mut self, count: usize) -> &mut Self {
        let count = u32::try_from(count).expect("a count over u32::MAX reached a record");
        self.u32(count)
    }

    /// A byte field after its u16 length. Panics past `u16::MAX` bytes (our bug).
    pub fn bytes_u16(&mut self, bytes: &[u8]) -> &mut Self {
        let len = u16::try_from(bytes.len()).expect("a field over u16::MAX bytes reached a record");
        self.u16(len).raw(bytes)
    }

    /// A string after its u16 length. Panics past `u16::MAX` bytes (our bug).
    pub fn str_u16(&mut self, s: &str) -> &mut Self {
        self.bytes_u16(s.as_bytes())
    }

    /// A string after its u32 length. Panics past `u32::MAX` bytes (our bug).
    pub fn str_u32(&mut self, s: &str) -> &mut Self {
        let len = u32::try_from(s.len()).expect("a field over u32::MAX bytes reached a record");
        self.u32(len).raw(s.as_bytes())
    }

    /// Kafka's STRING: a string after its i16 length. Panics past `i16::MAX` bytes (our
    /// bug).
    pub fn str_i16(&mut self, s: &str) -> &mut Self {
        let len = i16::try_from(s.len()).expect("a string over i16::MAX bytes reached a record");
        self.i16(len).raw(s.as_bytes())
    }

    /// Kafka's NULLABLE_STRING: [`Writer::str_i16`], or the length -1 for `None`.
    pub fn nullable_str_i16(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            None => self.i16(-1),
            Some(s) => self.str_i16(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: Limit = Limit::new("NAME_BYTES_MAX", 4);

    #[test]
    fn what_the_writer_writes_the_reader_reads() {
        let mut w = Writer::new();
        w.u8(1).i8(-2).u16(3).i16(-4).u32(5).i32(-6).u64(7).i64(-8);
        w.count_i32(2)
            .count_u32(0)
            .str_u16("ab")
            .str_u32("cd")
            .str_i16("ef");
        w.nullable_str_i16(None)
            .nullable_str_i16(Some("g"))
            .bytes_u16(&[9]);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8("a").unwrap(), 1);
        assert_eq!(r.i8("a").unwrap(), -2);
        assert_eq!(r.u16("a").unwrap(), 3);
        assert_eq!(r.i16("a").unwrap(), -4);
        assert_eq!(r.u32("a").unwrap(), 5);
        assert_eq!(r.i32("a").unwrap(), -6);
        assert_eq!(r.u64("a").unwrap(), 7);
        assert_eq!(r.i64("a").unwrap(), -8);
        assert_eq!(r.count_i32("a", NAME, 0).unwrap(), 2);
        assert_eq!(r.count_u32("a", 1).unwrap(), 0);
        assert_eq!(r.str_u16("a", NAME).unwrap(), "ab");
        assert_eq!(r.str_u32("a", NAME).unwrap(), "cd");
        assert_eq!(r.str_i16("a", NAME).unwrap(), "ef");
        assert_eq!(r.nullable_str_i16("a", NAME).unwrap(), None);
        assert_eq!(r.nullable_str_i16("a", NAME).unwrap().as_deref(), Some("g"));
        assert_eq!(r.bytes_u16("a", NAME).unwrap(), [9]);
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn a_short_read_names_its_field_and_consumes_nothing() {
        let mut r = Reader::new(&[0, 1, 2]);
        let err = r.i32("partition").unwrap_err();
        assert_eq!(
            err,
            ReadError::Truncated {
                what: "partition",
                at: 0,
                needed: 4,
                len: 3
            }
        );
        assert_eq!(
            err.to_string(),
            "partition truncated: needs 4 bytes at byte 0, the input has 3"
        );
        assert_eq!(r.position(), 0);
        assert_eq!(r.u16("x").unwrap(), 1);
        assert_eq!(r.finish(), Err(ReadError::TrailingBytes(1)));
    }

    #[test]
    fn lengths_are_checked_against_the_limit_before_the_bytes() {
        // A length of 5 over a 4-byte limit, with no bytes behind it: the limit speaks.
        let err = Reader::new(&[0, 5]).str_u16("topic", NAME).unwrap_err();
        assert_eq!(
            err.to_string(),
            "topic of 5 bytes is over NAME_BYTES_MAX (4 bytes)"
        );
        let err = Reader::new(&[0, 0, 0, 9])
            .str_u32("metadata", NAME)
            .unwrap_err();
        assert!(matches!(err, ReadError::TooLong { len: 9, .. }));
        assert!(matches!(
            Reader::new(&[0xff, 0xfe]).str_i16("id", NAME),
            Err(ReadError::Negative { value: -2, .. })
        ));
        assert!(matches!(
            Reader::new(&[0xff, 0xfe]).nullable_str_i16("id", NAME),
            Err(ReadError::Negative { value: -2, .. })
        ));
        assert_eq!(
            Reader::new(&[0, 1, 0xff]).str_u16("group", NAME),
            Err(ReadError::InvalidUtf8 { what: "group" })
        );
    }

    #[test]
    fn counts_are_bounded_by_the_limit_and_the_bytes_left() {
        let limit = Limit::new("PARTITIONS_MAX", 100);
        let many = i32::MAX.to_be_bytes();
        assert_eq!(
            Reader::new(&many).count_i32("partitions", limit, 6),
            Err(ReadError::TooMany {
                what: "partitions",
                count: i32::MAX as usize,
                limit
            })
        );
        assert!(matches!(
            Reader::new(&(-1i32).to_be_bytes()).count_i32("partitions", limit, 6),
            Err(ReadError::Negative { value: -1, .. })
        ));
        let mut ten = 10i32.to_be_bytes().to_vec();
        ten.extend_from_slice(&[0; 59]);
        assert!(matches!(
            Reader::new(&ten).count_i32("partitions", limit, 6),
            Err(ReadError::Truncated { needed: 60, .. })
        ));
        ten.push(0);
        assert_eq!(Reader::new(&ten).count_i32("partitions", limit, 6), Ok(10));
        assert!(matches!(
            Reader::new(&u32::MAX.to_be_bytes()).count_u32("producers", 1),
            Err(ReadError::Truncated { .. })
        ));
    }

    #[test]
    #[should_panic(expected = "over i16::MAX")]
    fn writing_a_string_past_its_length_prefix_is_our_bug() {
        Writer::new().str_i16(&"x".repeat(i16::MAX as usize + 1));
    }
}
