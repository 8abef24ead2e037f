//! Human-friendly values for config keys: `"100 MiB"`, `"7d"`, `"30 s"`, or plain numbers
//! as Kafka writes them.

/// Parses a byte count: a plain integer, or a number with a unit (`B`, `KB`, `MB`, `GB`
/// decimal; `KiB`, `MiB`, `GiB` binary). `-1` is kept (Kafka's "unlimited").
pub fn parse_bytes(text: &str) -> Result<i64, String> {
    let (number, unit) = split_number(text)?;
    let scale: i64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "unknown byte unit {unit:?} (use B, KB, MB, GB, KiB, MiB, GiB)"
            ));
        }
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} overflows"))
}

/// Parses a duration in milliseconds: a plain integer (milliseconds, as Kafka's `*.ms` keys),
/// or a number with a unit (`ms`, `s`, `m`, `h`, `d`). `-1` is kept (Kafka's "forever").
pub fn parse_ms(text: &str) -> Result<i64, String> {
    let (number, unit) = split_number(text)?;
    let scale: i64 = match unit.to_ascii_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("unknown time unit {unit:?} (use ms, s, m, h, d)")),
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} overflows"))
}

fn split_number(text: &str) -> Result<(i64, &str), String> {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(text.len(), |(i, _)| i);
    let number = text[..end]
        .parse::<i64>()
        .map_err(|_| format!("{text:?} is not a number"))?;
    Ok((number, text[end..].trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_with_units() {
        assert_eq!(parse_bytes("1048588"), Ok(1_048_588));
        assert_eq!(parse_bytes("100 MiB"), Ok(100 << 20));
        assert_eq!(parse_bytes("2MB"), Ok(2_000_000));
        assert_eq!(parse_bytes("-1"), Ok(-1));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_ms("604800000"), Ok(604_800_000));
        assert_eq!(parse_ms("7d"), Ok(604_800_000));
        assert_eq!(parse_ms("30 s"), Ok(30_000));
        assert_eq!(parse_ms("-1"), Ok(-1));
        assert!(parse_ms("1 fortnight").is_err());
    }
}
