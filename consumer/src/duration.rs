//! Typed durations and sizes for flags and config: `500ms`, `45s`, `30m`, `12h`, `7d`;
//! `5242880`, `512KiB`, `5MiB`, `1GB`.

use std::time::Duration;

/// Parses `N[ms|s|m|h|d]` (a bare number means seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; write e.g. 500ms, 45s, 30m, 12h or 7d"))?;
    let ms = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {s:?}; use ms, s, m, h or d"
            ))
        }
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration {s:?} is too large"))
}

/// Writes a duration in the largest unit that divides it (`14d`, `90s`, `500ms`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms > 0 && ms % per == 0 {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

/// Parses a size in bytes: `N` or `N` followed by B, KB, MB, GB (powers of 1000) or KiB, MiB,
/// GiB (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size; write e.g. 5242880, 512KiB or 5MiB"))?;
    let per: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {s:?}; use B, KB, MB, GB, KiB, MiB or GiB"
            ))
        }
    };
    n.checked_mul(per)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| format!("size {s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_durations_round_trip() {
        assert_eq!(parse_size("5MiB").unwrap(), 5 * 1024 * 1024);
        assert_eq!(parse_size("2KB").unwrap(), 2000);
        assert_eq!(parse_size("17").unwrap(), 17);
        assert!(parse_size("5 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        for s in ["14d", "12h", "30m", "45s", "500ms", "90m"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
    }

    #[test]
    fn parses_units() {
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86_400)
        );
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("7w")
            .unwrap_err()
            .contains("unknown duration unit"));
        assert!(parse_duration("x").is_err());
    }
}
