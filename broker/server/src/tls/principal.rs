//! The principal of a mutual-TLS client, as Kafka's default principal builder makes it:
//! `User:` + the client certificate's subject DN in RFC 2253 form (what Java's
//! `X500Principal.getName()` gives: RDNs last-first, `CN`, `O`, ... keywords for the
//! attributes RFC 2253 names, `OID=#hex` for the rest, special characters escaped).
//!
//! A small DER walk over the certificate down to its subject; a certificate it cannot read
//! gives `None` (rustls has already verified it, so that would be our bug or an exotic
//! encoding, and the caller falls back to the DN-less principal).

/// Kafka's principal of a client without a certificate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// `User:<subject DN>` of a DER certificate.
pub fn from_certificate(der: &[u8]) -> Option<String> {
    subject_rfc2253(der).map(|dn| format!("User:{dn}"))
}

/// The subject of a DER X.509 certificate in RFC 2253 form.
pub fn subject_rfc2253(der: &[u8]) -> Option<String> {
    let (tag, certificate, _) = tlv(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _) = tlv(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    // version [0] (optional), serial, signature algorithm, issuer, validity, then subject.
    if tbs.first() == Some(&0xA0) {
        tbs = tlv(tbs)?.2;
    }
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (tag, subject, _) = tlv(tbs)?;
    if tag != SEQUENCE {
        return None;
    }
    name_rfc2253(subject)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// A Name's RDNSequence (its content) in RFC 2253 form: last RDN first.
fn name_rfc2253(mut rdns: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (tag, mut set, rest) = tlv(rdns)?;
        rdns = rest;
        if tag != SET {
            return None;
        }
        let mut attributes = Vec::new();
        while !set.is_empty() {
            let (tag, attribute, rest) = tlv(set)?;
            set = rest;
            if tag != SEQUENCE {
                return None;
            }
            attributes.push(attribute_rfc2253(attribute)?);
        }
        parts.push(attributes.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

/// One `type=value` of an AttributeTypeAndValue's content.
fn attribute_rfc2253(attribute: &[u8]) -> Option<String> {
    let (tag, oid, value) = tlv(attribute)?;
    if tag != OID {
        return None;
    }
    let dotted = oid_dotted(oid)?;
    let keyword = match dotted.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        _ => None,
    };
    let (value_tag, content, _) = tlv(value)?;
    match (keyword, decode_string(value_tag, content)) {
        (Some(keyword), Some(text)) => Some(format!("{keyword}={}", escape(&text))),
        // RFC 2253 §2.4: an attribute without a keyword is its OID and its DER value in hex.
        _ => {
            let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
            Some(format!("{}=#{hex}", keyword.unwrap_or(&dotted)))
        }
    }
}

/// The text of a DirectoryString (or IA5String) value.
fn decode_string(tag: u8, content: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, NumericString.
        0x0C | 0x13 | 0x16 | 0x12 => String::from_utf8(content.to_vec()).ok(),
        // TeletexString: read as Latin-1, as most encoders meant it.
        0x14 => Some(content.iter().map(|&b| char::from(b)).collect()),
        // BMPString: UTF-16BE.
        0x1E => {
            let units: Vec<u16> = content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// RFC 2253 §2.4 escaping.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// An OBJECT IDENTIFIER's content in dotted form.
fn oid_dotted(content: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut value: u64 = 0;
    for &byte in content {
        value = value.checked_mul(128)? | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        }
    }
    let dotted: Vec<String> = arcs.iter().map(ToString::to_string).collect();
    Some(dotted.join("."))
}

/// One DER tag-length-value: (tag, content, the bytes after it).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b))
    };
    if rest.len() < length {
        return None;
    }
    let (content, after) = rest.split_at(length);
    Some((tag, content, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of `CN=client, O=Test` (Name content built by hand: two RDNs, O first).
    fn name(rdns: &[(&[u8], u8, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (oid, tag, value) in rdns {
            let mut attribute = vec![OID, oid.len() as u8];
            attribute.extend_from_slice(oid);
            attribute.extend([*tag, value.len() as u8]);
            attribute.extend_from_slice(value.as_bytes());
            let mut seq = vec![SEQUENCE, attribute.len() as u8];
            seq.extend(attribute);
            out.extend([SET, seq.len() as u8]);
            out.extend(seq);
        }
        out
    }

    #[test]
    fn rdns_come_last_first_with_keywords() {
        let der = name(&[
            (&[0x55, 4, 10], 0x0C, "Test"),
            (&[0x55, 4, 3], 0x13, "client"),
        ]);
        assert_eq!(name_rfc2253(&der).unwrap(), "CN=client,O=Test");
    }

    #[test]
    fn special_characters_are_escaped_and_unknown_types_are_hex() {
        let der = name(&[(&[0x55, 4, 3], 0x0C, "a,b+c ")]);
        assert_eq!(name_rfc2253(&der).unwrap(), "CN=a\\,b\\+c\\ ");
        // emailAddress, 1.2.840.113549.1.9.1, IA5String "x@y".
        let email: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01];
        let der = name(&[(email, 0x16, "x@y")]);
        assert_eq!(
            name_rfc2253(&der).unwrap(),
            "1.2.840.113549.1.9.1=#1603784079"
        );
    }

    #[test]
    fn truncated_input_is_none_not_a_panic() {
        let der = name(&[(&[0x55, 4, 3], 0x0C, "client")]);
        for end in 0..der.len() {
            let _ = name_rfc2253(&der[..end]);
        }
        assert!(subject_rfc2253(&[0x30, 0x05, 0x30]).is_none());
    }
}
