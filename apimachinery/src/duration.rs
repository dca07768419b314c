//! Durations as Kubernetes reads and prints them:
//!
//! - [`parse_duration`] / [`go_duration`]: Go's `time.ParseDuration` and `Duration.String`,
//!   the syntax of every duration flag (`--timeout=30s`, `--node-monitor-grace-period=40s`,
//!   `1h30m`, `1.5s`, `300ms`);
//! - [`human_duration`] / [`since`]: ages as `kubectl get` prints them (apimachinery's
//!   `pkg/util/duration/duration.go` `HumanDuration`, used by `translateTimestampSince` in
//!   `pkg/printers/internalversion/printers.go`).
//!
//! Go's syntax is parsed by hand: `humantime` accepts other spellings (`1 hour`) and refuses
//! fractions (`1.5s`), and jiff's friendly format differs in the same ways.
//!
//! An age's precision drops as it grows, so a column stays narrow:
//!
//! ```text
//! 5s   119s   2m5s   9m59s   10m   179m   3h0m→3h   7h59m   8h   47h   2d   2d3h   7d23h
//! 8d   729d   2y   2y3d   7y364d   8y
//! ```

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// Go's `time.ParseDuration`, for durations that cannot be negative: a sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`),
/// e.g. `300ms`, `1.5h`, `2h45m`; `0` alone needs no unit. The errors are Go's.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {}", crate::fmt::go_quote(s));
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.starts_with('-') {
        // Go parses negative durations; no flag or setting here takes one.
        return Err(invalid());
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let per_unit: u128 = match unit {
            "" => {
                return Err(format!(
                    "time: missing unit in duration {}",
                    crate::fmt::go_quote(s)
                ));
            }
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    crate::fmt::go_quote(other),
                    crate::fmt::go_quote(s)
                ));
            }
        };
        let whole: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| invalid())?
        };
        // The fraction, as Go takes it: digits beyond what the unit can hold are dropped.
        let mut frac_nanos: u128 = 0;
        let mut scale: u128 = 1;
        for d in frac.bytes() {
            if scale >= 1_000_000_000_000_000_000 {
                break;
            }
            frac_nanos = frac_nanos * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        nanos = whole
            .checked_mul(per_unit)
            .and_then(|w| w.checked_add(frac_nanos * per_unit / scale))
            .and_then(|v| v.checked_add(nanos))
            .filter(|v| *v <= i64::MAX as u128)
            .ok_or_else(invalid)?;
        rest = after;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| invalid())?;
    let sub = u32::try_from(nanos % 1_000_000_000).map_err(|_| invalid())?;
    Ok(Duration::new(secs, sub))
}

/// Go's `Duration.String`: `1h30m0s`, `1.5s`, `300ms`, `2µs`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    /// `value` with `digits` fractional digits, trailing zeros (and a bare point) dropped.
    fn decimal(value: u128, digits: u32) -> String {
        let div = 10u128.pow(digits);
        let frac = format!("{:0width$}", value % div, width = digits as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            format!("{}", value / div)
        } else {
            format!("{}.{frac}", value / div)
        }
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}\u{b5}s", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = decimal(nanos % 60_000_000_000, 9);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `duration.HumanDuration`: `d` as kubectl prints ages. Slightly negative durations (clock
/// skew up to two seconds) print as `0s`; more negative ones as `<invalid>`.
pub fn human_duration(d: SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".to_owned();
    } else if seconds < 0 {
        return "0s".to_owned();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

/// `translateTimestampSince`: the age of `ts` at `now`, or `<unknown>` without a timestamp.
pub fn since(ts: Option<Timestamp>, now: Timestamp) -> String {
    match ts {
        Some(ts) => human_duration(now.duration_since(ts)),
        None => "<unknown>".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_apimachinery_table() {
        let cases: &[(i64, &str)] = &[
            (-3, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (599, "9m59s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (7 * 3600 + 59 * 60, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (51 * 3600, "2d3h"),
            (8 * 24 * 3600 - 1, "7d23h"),
            (8 * 24 * 3600, "8d"),
            (729 * 24 * 3600, "729d"),
            (730 * 24 * 3600, "2y"),
            (733 * 24 * 3600, "2y3d"),
            (8 * 365 * 24 * 3600, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(
                human_duration(SignedDuration::from_secs(*secs)),
                *want,
                "{secs}s"
            );
        }
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration(".5h"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("10\u{b5}s"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("+3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(
            parse_duration("3"),
            Err("time: missing unit in duration \"3\"".to_owned())
        );
        assert_eq!(
            parse_duration("5d"),
            Err("time: unknown unit \"d\" in duration \"5d\"".to_owned())
        );
        assert_eq!(
            parse_duration("x"),
            Err("time: invalid duration \"x\"".to_owned())
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration(".s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(
            parse_duration("9999999999h").is_err(),
            "beyond Go's int64 nanoseconds"
        );
    }

    #[test]
    fn go_durations_print() {
        for (d, want) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5\u{b5}s"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(5400), "1h30m0s"),
        ] {
            assert_eq!(go_duration(d), want);
            assert_eq!(parse_duration(want), Ok(d), "{want} parses back");
        }
    }

    #[test]
    fn since_without_timestamp_is_unknown() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(
            since(Some(Timestamp::from_second(990).unwrap()), now),
            "10s"
        );
    }
}
