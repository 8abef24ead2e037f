//! The OpenTelemetry metrics a client pushes (KIP-714: an OTLP `MetricsData` protobuf),
//! read into flat points: metric name, attributes, value. Only what exposition needs is
//! read: number data points of gauges and sums (histograms and summaries, which Kafka's
//! clients do not send, are skipped); everything else is walked over by its wire type.
//!
//! Bounded: the input is at most `telemetry.max.bytes`; at most
//! [`limits::TELEMETRY_POINTS_PER_PUSH_MAX`] points and
//! [`limits::TELEMETRY_ATTRIBUTES_PER_POINT_MAX`] attributes per point are kept (the rest
//! is counted as dropped), names and attribute strings are cut to
//! [`limits::TELEMETRY_STRING_BYTES_MAX`]; nothing is allocated from a length the client
//! sent before it is checked against the bytes left.
//!
//! The fields read (opentelemetry-proto `metrics/v1`, `common/v1`):
//! ```text
//! MetricsData     1: ResourceMetrics*
//! ResourceMetrics 1: Resource, 2: ScopeMetrics*      Resource 1: KeyValue*
//! ScopeMetrics    2: Metric*
//! Metric          1: name, 5: Gauge, 7: Sum          Gauge/Sum 1: NumberDataPoint*
//! NumberDataPoint 4: as_double (fixed64), 6: as_int (sfixed64), 7: KeyValue*
//! KeyValue        1: key, 2: AnyValue                AnyValue 1: string, 2: bool, 3: int, 4: double
//! ```

use crate::limits;

/// One number data point.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The metric's name (`org.apache.kafka.producer.record.queue.time.avg`).
    pub name: String,
    /// The point's attributes (and the resource's), in the order sent.
    pub attributes: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

/// What one push held.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Metrics {
    /// The points kept.
    pub points: Vec<Point>,
    /// The resource's attributes (the client's labels).
    pub resource: Vec<(String, String)>,
    /// Points or attributes left out by the limits.
    pub dropped: u64,
}

/// Bytes that are not an OTLP `MetricsData`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed OTLP metrics: {0}")]
pub struct DecodeError(pub &'static str);

/// One protobuf field: its number and value.
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or(DecodeError("truncated varint"))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint over 64 bits"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.rest.len() {
            return Err(DecodeError("a field runs past the end"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn next(&mut self) -> Option<Result<(u64, Value<'a>), DecodeError>> {
        if self.rest.is_empty() {
            return None;
        }
        Some(self.field())
    }

    fn field(&mut self) -> Result<(u64, Value<'a>), DecodeError> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let bytes: [u8; 8] = self.take(8)?.try_into().expect("8 bytes");
                Value::Fixed64(u64::from_le_bytes(bytes))
            }
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| DecodeError("length over usize"))?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Value::Fixed32
            }
            _ => return Err(DecodeError("unknown wire type")),
        };
        Ok((key >> 3, value))
    }
}

/// Reads a `MetricsData`.
pub fn decode(bytes: &[u8]) -> Result<Metrics, DecodeError> {
    let mut out = Metrics::default();
    let mut fields = Fields::new(bytes);
    while let Some(field) = fields.next() {
        if let (1, Value::Bytes(resource_metrics)) = field? {
            resource(resource_metrics, &mut out)?;
        }
    }
    Ok(out)
}

fn resource(bytes: &[u8], out: &mut Metrics) -> Result<(), DecodeError> {
    let mut scopes = Vec::new();
    let mut fields = Fields::new(bytes);
    while let Some(field) = fields.next() {
        match field? {
            (1, Value::Bytes(resource)) => {
                let mut attrs = Fields::new(resource);
                while let Some(attr) = attrs.next() {
                    if let (1, Value::Bytes(kv)) = attr? {
                        push_attribute(&mut out.resource, kv, &mut out.dropped)?;
                    }
                }
            }
            (2, Value::Bytes(scope)) => scopes.push(scope),
            _ => {}
        }
    }
    for scope in scopes {
        let mut fields = Fields::new(scope);
        while let Some(field) = fields.next() {
            if let (2, Value::Bytes(metric_bytes)) = field? {
                metric(metric_bytes, out)?;
            }
        }
    }
    Ok(())
}

fn metric(bytes: &[u8], out: &mut Metrics) -> Result<(), DecodeError> {
    let mut name = String::new();
    let mut series = Vec::new();
    let mut fields = Fields::new(bytes);
    while let Some(field) = fields.next() {
        match field? {
            (1, Value::Bytes(n)) => name = text(n),
            (5 | 7, Value::Bytes(data)) => series.push(data),
            _ => {}
        }
    }
    for data in series {
        let mut fields = Fields::new(data);
        while let Some(field) = fields.next() {
            if let (1, Value::Bytes(point)) = field? {
                data_point(&name, point, out)?;
            }
        }
    }
    Ok(())
}

fn data_point(name: &str, bytes: &[u8], out: &mut Metrics) -> Result<(), DecodeError> {
    let mut value = None;
    let mut attributes = Vec::new();
    let mut fields = Fields::new(bytes);
    while let Some(field) = fields.next() {
        match field? {
            (4, Value::Fixed64(bits)) => value = Some(f64::from_bits(bits)),
            (6, Value::Fixed64(bits)) => value = Some(bits as i64 as f64),
            (7, Value::Bytes(kv)) => push_attribute(&mut attributes, kv, &mut out.dropped)?,
            _ => {}
        }
    }
    let Some(value) = value else {
        return Ok(());
    };
    if out.points.len() >= limits::TELEMETRY_POINTS_PER_PUSH_MAX {
        out.dropped += 1;
        return Ok(());
    }
    out.points.push(Point {
        name: name.to_owned(),
        attributes,
        value,
    });
    Ok(())
}

fn push_attribute(
    into: &mut Vec<(String, String)>,
    bytes: &[u8],
    dropped: &mut u64,
) -> Result<(), DecodeError> {
    let mut key = String::new();
    let mut value = String::new();
    let mut fields = Fields::new(bytes);
    while let Some(field) = fields.next() {
        match field? {
            (1, Value::Bytes(k)) => key = text(k),
            (2, Value::Bytes(any)) => value = any_value(any)?,
            _ => {}
        }
    }
    if into.len() >= limits::TELEMETRY_ATTRIBUTES_PER_POINT_MAX {
        *dropped += 1;
    } else {
        into.push((key, value));
    }
    Ok(())
}

fn any_value(bytes: &[u8]) -> Result<String, DecodeError> {
    let mut fields = Fields::new(bytes);
    let mut out = String::new();
    while let Some(field) = fields.next() {
        out = match field? {
            (1, Value::Bytes(s)) => text(s),
            (2, Value::Varint(b)) => (b != 0).to_string(),
            (3, Value::Varint(i)) => (i as i64).to_string(),
            (4, Value::Fixed64(bits)) => f64::from_bits(bits).to_string(),
            _ => continue,
        };
    }
    Ok(out)
}

/// A string field, lossily UTF-8, cut to [`limits::TELEMETRY_STRING_BYTES_MAX`].
fn text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(limits::TELEMETRY_STRING_BYTES_MAX)];
    String::from_utf8_lossy(cut).into_owned()
}

/// A tiny protobuf writer: the tests' pushes and the fuzz seed.
#[cfg(any(test, feature = "fuzz"))]
#[derive(Debug, Default)]
pub struct Pb(pub Vec<u8>);

#[cfg(any(test, feature = "fuzz"))]
impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    pub fn bytes(mut self, field: u64, bytes: &[u8]) -> Self {
        self.varint(field << 3 | 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn fixed64(mut self, field: u64, v: u64) -> Self {
        self.varint(field << 3 | 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn uint(mut self, field: u64, v: u64) -> Self {
        self.varint(field << 3);
        self.varint(v);
        self
    }
}

#[cfg(any(test, feature = "fuzz"))]
pub fn kv(key: &str, value: &str) -> Vec<u8> {
    let any = Pb::default().bytes(1, value.as_bytes()).0;
    Pb::default().bytes(1, key.as_bytes()).bytes(2, &any).0
}

#[cfg(any(test, feature = "fuzz"))]
/// A MetricsData with one gauge point and one sum point (as_int), with attributes.
pub fn sample() -> Vec<u8> {
    let gauge_point = Pb::default()
        .fixed64(3, 1)
        .fixed64(4, 2.5f64.to_bits())
        .bytes(7, &kv("node.id", "1"))
        .0;
    let gauge = Pb::default().bytes(1, &gauge_point).0;
    let sum_point = Pb::default()
        .fixed64(6, 42u64)
        .bytes(7, &kv("topic", "orders"))
        .0;
    let sum = Pb::default().bytes(1, &sum_point).uint(2, 2).uint(3, 1).0;
    let m1 = Pb::default()
        .bytes(1, b"org.apache.kafka.producer.record.queue.time.avg")
        .bytes(3, b"ms")
        .bytes(5, &gauge)
        .0;
    let m2 = Pb::default()
        .bytes(1, b"org.apache.kafka.producer.topic.record.send.total")
        .bytes(7, &sum)
        .0;
    let histogram = Pb::default()
        .bytes(1, b"ignored.histogram")
        .bytes(9, b"\x0a\x00")
        .0;
    let scope = Pb::default()
        .bytes(1, b"")
        .bytes(2, &m1)
        .bytes(2, &m2)
        .bytes(2, &histogram)
        .0;
    let resource = Pb::default().bytes(1, &kv("client_id", "loader")).0;
    let rm = Pb::default().bytes(1, &resource).bytes(2, &scope).0;
    Pb::default().bytes(1, &rm).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_and_sums_are_read_with_their_attributes() {
        let m = decode(&sample()).unwrap();
        assert_eq!(m.resource, [("client_id".into(), "loader".into())]);
        assert_eq!(
            m.points,
            [
                Point {
                    name: "org.apache.kafka.producer.record.queue.time.avg".into(),
                    attributes: vec![("node.id".into(), "1".into())],
                    value: 2.5,
                },
                Point {
                    name: "org.apache.kafka.producer.topic.record.send.total".into(),
                    attributes: vec![("topic".into(), "orders".into())],
                    value: 42.0,
                },
            ]
        );
        assert_eq!(m.dropped, 0);
    }

    #[test]
    fn truncated_and_garbage_input_is_an_error_never_a_panic() {
        let bytes = sample();
        for cut in 0..bytes.len() {
            let _ = decode(&bytes[..cut]);
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(decode(&[0x0f]).is_err(), "wire type 7");
        let mut rng = sluice_kafka::rng::SplitMix64::new(9);
        for _ in 0..2000 {
            let len = (rng.next_u64() % 64) as usize;
            let junk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let _ = decode(&junk);
        }
    }

    #[test]
    fn points_beyond_the_limit_are_dropped_and_counted() {
        let point = Pb::default().fixed64(4, 1f64.to_bits()).0;
        let mut gauge = Pb::default();
        for _ in 0..limits::TELEMETRY_POINTS_PER_PUSH_MAX + 5 {
            gauge = gauge.bytes(1, &point);
        }
        let metric = Pb::default().bytes(1, b"m").bytes(5, &gauge.0).0;
        let scope = Pb::default().bytes(2, &metric).0;
        let rm = Pb::default().bytes(2, &scope).0;
        let m = decode(&Pb::default().bytes(1, &rm).0).unwrap();
        assert_eq!(m.points.len(), limits::TELEMETRY_POINTS_PER_PUSH_MAX);
        assert_eq!(m.dropped, 5);
    }
}
