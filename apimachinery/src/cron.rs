//! Cron schedules of CronJobs: the syntax that CronJob validation accepts with
//! `cron.ParseStandard` from `github.com/robfig/cron/v3` (`parser.go`, with its error
//! messages), and the activation times the CronJob controller computes with it (`spec.go`).
//!
//! ```text
//! ┌───────────── minute (0-59)
//! │ ┌─────────── hour (0-23)
//! │ │ ┌───────── day of month (1-31)
//! │ │ │ ┌─────── month (1-12 or jan-dec)
//! │ │ │ │ ┌───── day of week (0-6 or sun-sat)
//! * * * * *        each field: * ? N N-M N/S N-M/S, comma-separated
//! @hourly @daily @midnight @weekly @monthly @yearly @annually @every 5m
//! ```
//!
//! The times come from the `croner` crate (5 fields, without seconds or years): like robfig,
//! a day matches when its day of month *or* its weekday matches, unless one of the two fields
//! is a star. What stays hand-written is the syntax check itself: kube-apiserver answers with
//! robfig's words (`end of range (60) above maximum (59): 60`), which no crate gives, and
//! croner accepts more than robfig (`L`, `W`, `#`, seconds, years) where Kubernetes refuses.
//! A schedule that passes the check is handed to croner with robfig's stars and `?` spelt
//! as croner reads them.
//!
//! Time zones (`TZ=Europe/Paris ...` in the schedule, `spec.timeZone`) are found in the
//! system's tz database (`/usr/share/zoneinfo`) through `jiff`, as Go's `time.LoadLocation`
//! finds them.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
    first_name: u32,
}

const FIELDS: [Bounds; 5] = [
    Bounds {
        min: 0,
        max: 59,
        names: &[],
        first_name: 0,
    },
    Bounds {
        min: 0,
        max: 23,
        names: &[],
        first_name: 0,
    },
    Bounds {
        min: 1,
        max: 31,
        names: &[],
        first_name: 0,
    },
    Bounds {
        min: 1,
        max: 12,
        names: &MONTHS,
        first_name: 1,
    },
    Bounds {
        min: 0,
        max: 6,
        names: &DAYS,
        first_name: 0,
    },
];

/// A parsed schedule: when its activations fall.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The zone of a `TZ=`/`CRON_TZ=` prefix; it wins over the zone given to [`Schedule::next`].
    zone: Option<TimeZone>,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Five fields, or a descriptor such as `@daily`.
    Cron(Box<Cron>),
    /// `@every <duration>`: a fixed period, whole seconds (robfig's `ConstantDelaySchedule`).
    Every(Duration),
}

impl Schedule {
    /// The first activation strictly after `after`, with the fields read in `zone` (the
    /// CronJob's `spec.timeZone`, UTC without one) unless the schedule names its own zone.
    /// `None` when no activation follows (`0 0 30 2 *`: February 30th never comes).
    pub fn next(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(period) => {
                let period = jiff::SignedDuration::try_from(*period).ok()?;
                let whole = after
                    .checked_sub(jiff::SignedDuration::new(0, after.subsec_nanosecond()))
                    .ok()?;
                whole.checked_add(period).ok()
            }
            Kind::Cron(cron) => {
                let zone = self.zone.as_ref().unwrap_or(zone);
                let start = after.to_zoned(zone.clone());
                let next = cron.find_next_occurrence(&start, false).ok()?;
                Some(next.timestamp())
            }
        }
    }
}

/// A zone by its IANA name, with Go's `time.LoadLocation` message when there is none.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))
}

/// `cron.ParseStandard(spec)`: the schedule, or robfig/cron's message.
pub fn parse_standard(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".to_owned());
    }
    let mut spec = spec;
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let Some((prefix, rest)) = spec.split_once(' ') else {
            return Err(format!("provided bad location {spec}: unknown time zone"));
        };
        let name = prefix.split_once('=').map_or("", |(_, name)| name);
        zone = Some(time_zone(name).map_err(|e| format!("provided bad location {name}: {e}"))?);
        spec = rest.trim();
    }
    if let Some(descriptor) = spec.strip_prefix('@') {
        let kind = parse_descriptor(descriptor, spec)?;
        return Ok(Schedule { zone, kind });
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let mut normalized = Vec::with_capacity(5);
    for (field, bounds) in fields.iter().zip(&FIELDS) {
        let mut star = false;
        for expr in field.split(',') {
            star |= check_range(expr, bounds)?;
        }
        normalized.push(if star {
            "*".to_owned()
        } else {
            field.replace('?', "*")
        });
    }
    Ok(Schedule {
        zone,
        kind: Kind::Cron(Box::new(croner(&normalized.join(" "))?)),
    })
}

/// A 5-field pattern that passed robfig's check, parsed by croner.
fn croner(pattern: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        // robfig reads `N/S` as `N-max/S`; croner calls that a sloppy range.
        .sloppy_ranges(true)
        .build()
        .parse(pattern)
        .map_err(|e| e.to_string())
}

/// robfig's descriptors, as the fields they stand for.
fn parse_descriptor(descriptor: &str, spec: &str) -> Result<Kind, String> {
    let fields = match descriptor {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        d if d.starts_with("every ") => {
            let dur = d["every ".len()..].trim();
            let period = parse_go_duration(dur).ok_or_else(|| {
                format!("failed to parse duration {spec}: time: invalid duration \"{dur}\"")
            })?;
            // `cron.Every`: at least a second, whole seconds.
            let period = Duration::from_secs(period.as_secs().max(1));
            return Ok(Kind::Every(period));
        }
        _ => return Err(format!("unrecognized descriptor: {spec}")),
    };
    Ok(Kind::Cron(Box::new(croner(fields)?)))
}

/// Go's `time.ParseDuration` (`1h30m`, `90s`, `1.5h`, `-5m`); a negative duration is zero
/// here, which `@every` raises to a second as robfig does.
fn parse_go_duration(s: &str) -> Option<Duration> {
    let (negative, mut rest) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..num_len];
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[num_len..];
        let (unit, seconds) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("μs", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ]
        .into_iter()
        .filter(|(u, _)| rest.starts_with(u))
        .max_by_key(|(u, _)| u.len())?;
        rest = &rest[unit.len()..];
        total += value * seconds;
    }
    if negative {
        return Some(Duration::ZERO);
    }
    Duration::try_from_secs_f64(total).ok()
}

fn parse_int(expr: &str) -> Result<u32, String> {
    match expr.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("negative number ({n}) not allowed: {expr}")),
        Ok(n) => u32::try_from(n).map_err(|_| format!("failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": value out of range")),
        Err(_) => Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": invalid syntax"
        )),
    }
}

fn parse_int_or_name(expr: &str, b: &Bounds) -> Result<u32, String> {
    let lower = expr.to_lowercase();
    match b.names.iter().position(|n| *n == lower) {
        Some(i) => Ok(b.first_name + u32::try_from(i).unwrap_or(0)),
        None => parse_int(expr),
    }
}

/// `getRange`: `*`, `?`, `N`, `N-M`, each optionally `/step`. `Ok(true)` when robfig marks
/// the field a star (`*` or `?` with a step of 1), which changes how days match.
fn check_range(expr: &str, b: &Bounds) -> Result<bool, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let mut star = false;
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
        star = true;
        (b.min, b.max)
    } else {
        let start = parse_int_or_name(low_high[0], b)?;
        let end = match low_high.len() {
            1 => start,
            2 => parse_int_or_name(low_high[1], b)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            if low_high.len() == 1 {
                end = b.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(star && step == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(spec: &str, after: &str, zone: &str) -> Option<String> {
        let schedule = parse_standard(spec).expect("valid schedule");
        let after: Timestamp = after.parse().expect("timestamp");
        let zone = time_zone(zone).expect("zone");
        schedule.next(after, &zone).map(|t| t.to_string())
    }

    #[test]
    fn valid_schedules() {
        for s in [
            "*/5 * * * *",
            "0 0 * * 0",
            "30 2 1-15/2 jan-jun MON-FRI",
            "0,15,30,45 * * * ?",
            "? * * * *",
            "5/15 * * * *",
            "@hourly",
            "@every 1h30m",
            "@every 1.5h",
            "TZ=UTC 0 * * * *",
            "CRON_TZ=Europe/Paris 0 * * * *",
        ] {
            assert!(parse_standard(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn robfig_messages() {
        let cases = [
            ("", "empty spec string"),
            ("foo", "expected exactly 5 fields, found 1: [foo]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            (
                "L * * * *",
                "failed to parse int from L: strconv.Atoi: parsing \"L\": invalid syntax",
            ),
            (
                "@every 5x",
                "failed to parse duration @every 5x: time: invalid duration \"5x\"",
            ),
            (
                "TZ=Nowhere/City 0 * * * *",
                "provided bad location Nowhere/City: unknown time zone Nowhere/City",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(
                parse_standard(spec).map(drop),
                Err(want.to_owned()),
                "{spec}"
            );
        }
    }

    #[test]
    fn next_activation() {
        let t0 = "2024-01-01T00:07:30Z"; // a Monday
        assert_eq!(
            next("*/15 * * * *", t0, "UTC").as_deref(),
            Some("2024-01-01T00:15:00Z")
        );
        assert_eq!(
            next("5/20 * * * *", t0, "UTC").as_deref(),
            Some("2024-01-01T00:25:00Z")
        );
        assert_eq!(
            next("? * * * *", t0, "UTC").as_deref(),
            Some("2024-01-01T00:08:00Z")
        );
        assert_eq!(
            next("@daily", t0, "UTC").as_deref(),
            Some("2024-01-02T00:00:00Z")
        );
        assert_eq!(
            next("@every 90m", "2024-01-01T00:00:10.5Z", "UTC").as_deref(),
            Some("2024-01-01T01:30:10Z")
        );
        assert_eq!(next("0 0 30 2 *", t0, "UTC"), None);
    }

    #[test]
    fn days_match_by_day_of_month_or_weekday_unless_one_is_a_star() {
        // The 13th or a Friday: Friday the 5th comes first, then Friday the 12th, then
        // Saturday the 13th.
        let fridays_or_13th: Vec<Option<String>> = [
            "2024-01-01T00:00:00Z",
            "2024-01-05T00:00:00Z",
            "2024-01-12T00:00:00Z",
        ]
        .into_iter()
        .map(|t| next("0 0 13 * fri", t, "UTC"))
        .collect();
        assert_eq!(
            fridays_or_13th,
            [
                Some("2024-01-05T00:00:00Z".to_owned()),
                Some("2024-01-12T00:00:00Z".to_owned()),
                Some("2024-01-13T00:00:00Z".to_owned()),
            ]
        );
        // A star day of month: Mondays only.
        assert_eq!(
            next("0 0 * * 1", "2024-01-01T00:00:00Z", "UTC").as_deref(),
            Some("2024-01-08T00:00:00Z")
        );
        // `*/2` is no star for robfig: odd days or Mondays (the 8th is even).
        assert_eq!(
            next("0 0 */2 * 1", "2024-01-07T00:00:00Z", "UTC").as_deref(),
            Some("2024-01-08T00:00:00Z")
        );
        // `?` is a star: Mondays only.
        assert_eq!(
            next("0 0 ? * 1", "2024-01-02T00:00:00Z", "UTC").as_deref(),
            Some("2024-01-08T00:00:00Z")
        );
    }

    #[test]
    fn time_zones() {
        let t0 = "2024-01-01T00:00:00Z";
        assert_eq!(
            next("0 9 * * *", t0, "America/New_York").as_deref(),
            Some("2024-01-01T14:00:00Z")
        );
        // The schedule's own zone wins.
        assert_eq!(
            next("TZ=Europe/Paris 0 9 * * *", t0, "America/New_York").as_deref(),
            Some("2024-01-01T08:00:00Z")
        );
        assert_eq!(
            time_zone("Mars/Olympus").map(drop),
            Err("unknown time zone Mars/Olympus".to_owned())
        );
    }
}
