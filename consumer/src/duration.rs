//! Typed durations for flags and config: `500ms`, `45s`, `30m`, `12h`, `7d`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
