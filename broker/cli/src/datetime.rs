//! RFC 3339 times (`2026-01-31T12:00:00Z`, `2026-01-31T12:00:00.250+01:00`) to milliseconds
//! since the Unix epoch, for `--to-datetime`, and back (UTC) for what the CLI prints. Small on
//! purpose: no calendar crate needed.

use anyhow::{Context, bail};

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
pub fn parse_rfc3339_ms(text: &str) -> anyhow::Result<i64> {
    let bad = || format!("{text:?} is not an RFC 3339 time like 2026-01-31T12:00:00Z");
    let (date, rest) = text.split_once(['T', 't', ' ']).with_context(bad)?;
    let mut ymd = date.splitn(3, '-').map(str::parse::<i64>);
    let (Some(Ok(year)), Some(Ok(month)), Some(Ok(day))) = (ymd.next(), ymd.next(), ymd.next())
    else {
        bail!(bad());
    };
    let (clock, offset_ms) = split_offset(rest).with_context(bad)?;
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.splitn(3, ':').map(str::parse::<i64>);
    let (Some(Ok(h)), Some(Ok(m)), Some(Ok(s))) = (parts.next(), parts.next(), parts.next()) else {
        bail!(bad());
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        bail!(bad());
    }
    let millis = match fraction {
        "" => 0,
        f if f.bytes().all(|b| b.is_ascii_digit()) => format!("{f:0<3}")[..3].parse::<i64>()?,
        _ => bail!(bad()),
    };
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + h) * 60 + m) * 60_000 + s * 1000 + millis - offset_ms)
}

/// Splits the clock from its zone: `Z` or `±HH:MM`, as milliseconds east of UTC.
fn split_offset(rest: &str) -> Option<(&str, i64)> {
    if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        return Some((clock, 0));
    }
    let at = rest.rfind(['+', '-'])?;
    let (clock, zone) = rest.split_at(at);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let (h, m) = zone[1..].split_once(':')?;
    Some((
        clock,
        sign * (h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?) * 60_000,
    ))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_rfc3339_ms(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // The inverse of `days_from_civil` (the same algorithm, H. Hinnant's).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    //! Known instants in several spellings.
    use super::*;

    #[test]
    fn formats_what_it_parses() {
        for text in [
            "1970-01-01T00:00:00.000Z",
            "2026-01-31T12:00:00.250Z",
            "2024-02-29T23:59:59.999Z",
            "1969-12-31T23:59:59.000Z",
        ] {
            assert_eq!(format_rfc3339_ms(parse_rfc3339_ms(text).unwrap()), text);
        }
    }

    #[test]
    fn known_instants() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T12:34:56.789Z").unwrap(),
            1_709_210_096_789
        );
        assert_eq!(
            parse_rfc3339_ms("2024-02-29T13:34:56.789+01:00").unwrap(),
            1_709_210_096_789
        );
        assert!(parse_rfc3339_ms("yesterday").is_err());
        assert!(parse_rfc3339_ms("2024-13-01T00:00:00Z").is_err());
    }
}
