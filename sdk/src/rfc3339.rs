//! RFC 3339 times as Kubernetes writes them (`2026-05-08T12:00:00Z`), to and from [`Timestamp`]s
//! (see [`Timestamp::parse_rfc3339`]).

use crate::Timestamp;

/// An RFC 3339 time (`Z` or a numeric offset, optional fraction); `None` when it does not parse.
pub(crate) fn parse(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(range)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())
            .flatten()
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanoseconds = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        // Nanoseconds: the first nine digits, padded; further digits are below the resolution.
        let kept = &fraction[..digits.min(9)];
        nanoseconds = kept.parse::<u32>().ok()? * 10u32.pow(9 - kept.len() as u32);
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (h, m) = rest[1..].split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60)
        }
    };
    Some(Timestamp {
        seconds: days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
            - offset,
        nanoseconds,
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` of Unix seconds.
pub(crate) fn format(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let rest = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
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

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use crate::Timestamp;

    fn seconds(text: &str) -> Option<i64> {
        Timestamp::parse_rfc3339(text).map(|t| t.seconds)
    }

    #[test]
    fn kubernetes_times_round_trip() {
        assert_eq!(seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(seconds("2026-05-08T12:00:00Z"), Some(1_778_241_600));
        assert_eq!(
            Timestamp::from_unix(1_778_241_600).to_rfc3339(),
            "2026-05-08T12:00:00Z"
        );
        let offset = Timestamp::parse_rfc3339("2026-05-08T14:00:00.123+02:00").unwrap();
        assert_eq!(
            (offset.seconds, offset.nanoseconds),
            (1_778_241_600, 123_000_000)
        );
        assert_eq!(
            Timestamp::parse_rfc3339("2024-02-29T23:59:59Z")
                .map(|t| t.to_rfc3339())
                .as_deref(),
            Some("2024-02-29T23:59:59Z")
        );
        assert_eq!(
            Timestamp::from_unix(-1).to_rfc3339(),
            "1969-12-31T23:59:59Z"
        );
        for bad in [
            "",
            "2026-05-08",
            "2026-13-01T00:00:00Z",
            "2026-05-08T12:00:00",
            "2026-05-08T12:00:00.Z",
            "yesterday at noon!!",
        ] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }
}
