//! UTC calendar times from Unix seconds, in the three formats signing needs.

use crate::error::Error;

/// A UTC instant, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    seconds: i64,
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

/// The last second of year 9999: later times have no four-digit year.
const MAX_SECONDS: i64 = 253_402_300_799;

impl UtcTime {
    /// The instant `seconds` after the Unix epoch (1970 to 9999).
    pub fn from_unix(seconds: i64) -> Result<UtcTime, Error> {
        if !(0..=MAX_SECONDS).contains(&seconds) {
            return Err(Error::Invalid(format!(
                "time {seconds} is outside 1970-01-01 to 9999-12-31"
            )));
        }
        let days = seconds.div_euclid(86_400);
        let rest = seconds.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        Ok(UtcTime {
            seconds,
            year,
            month,
            day,
            hour: rest / 3600,
            minute: rest / 60 % 60,
            second: rest % 60,
        })
    }

    /// Seconds since the Unix epoch.
    pub fn unix(&self) -> i64 {
        self.seconds
    }

    /// This instant plus `seconds`.
    pub fn plus(&self, seconds: i64) -> Result<UtcTime, Error> {
        UtcTime::from_unix(self.seconds.saturating_add(seconds))
    }

    /// `YYYYMMDD`.
    pub fn date(&self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// `YYYYMMDD'T'HHMMSS'Z'` (ISO 8601 basic, as SigV4 wants).
    pub fn basic(&self) -> String {
        format!(
            "{}T{:02}{:02}{:02}Z",
            self.date(),
            self.hour,
            self.minute,
            self.second
        )
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` (as Azure wants).
    pub fn extended(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        let t = UtcTime::from_unix(1_775_649_600).unwrap();
        assert_eq!(t.basic(), "20260408T120000Z");
        assert_eq!(t.extended(), "2026-04-08T12:00:00Z");
        assert_eq!(
            UtcTime::from_unix(0).unwrap().extended(),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(UtcTime::from_unix(951_782_400).unwrap().date(), "20000229");
        assert_eq!(
            UtcTime::from_unix(MAX_SECONDS).unwrap().extended(),
            "9999-12-31T23:59:59Z"
        );
        assert!(UtcTime::from_unix(-1).is_err());
        assert!(UtcTime::from_unix(MAX_SECONDS + 1).is_err());
    }
}
