//! Human-readable durations, as `kubectl get` prints ages (apimachinery's
//! `pkg/util/duration/duration.go` `HumanDuration`, used by `translateTimestampSince` in
//! `pkg/printers/internalversion/printers.go`).
//!
//! The precision drops as durations grow, so a column stays narrow:
//!
//! ```text
//! 5s   119s   2m5s   9m59s   10m   179m   3h0m→3h   7h59m   8h   47h   2d   2d3h   7d23h
//! 8d   729d   2y   2y3d   7y364d   8y
//! ```

use jiff::{SignedDuration, Timestamp};

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
    fn since_without_timestamp_is_unknown() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(since(None, now), "<unknown>");
        assert_eq!(
            since(Some(Timestamp::from_second(990).unwrap()), now),
            "10s"
        );
    }
}
