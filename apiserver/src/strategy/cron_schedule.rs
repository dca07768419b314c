//! Cron schedule syntax, as CronJob validation checks it with `cron.ParseStandard` from
//! `github.com/robfig/cron/v3` (`parser.go`), with its error messages.
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
//! Only the syntax is checked; computing the next run times is the CronJob controller's job.

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

/// `cron.ParseStandard(spec)`: `Ok` when the schedule is valid, else robfig/cron's message.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    let mut spec = spec.trim();
    if spec.is_empty() {
        return Err("empty spec string".to_owned());
    }
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        match spec.split_once(' ') {
            Some((_, rest)) => spec = rest.trim(),
            None => return Err(format!("provided bad location {spec}: unknown time zone")),
        }
    }
    if let Some(descriptor) = spec.strip_prefix('@') {
        return parse_descriptor(descriptor, spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip(&FIELDS) {
        for expr in field.split(',') {
            check_range(expr, bounds)?;
        }
    }
    Ok(())
}

fn parse_descriptor(descriptor: &str, spec: &str) -> Result<(), String> {
    match descriptor {
        "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => Ok(()),
        d if d.starts_with("every ") => {
            let dur = d["every ".len()..].trim();
            if is_go_duration(dur) {
                Ok(())
            } else {
                Err(format!(
                    "failed to parse duration {spec}: time: invalid duration \"{dur}\""
                ))
            }
        }
        _ => Err(format!("unrecognized descriptor: {spec}")),
    }
}

/// Go's `time.ParseDuration` syntax: `1h30m`, `90s`, `1.5h`.
fn is_go_duration(s: &str) -> bool {
    let mut rest = s.strip_prefix(['+', '-']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return false;
        }
        rest = &rest[num_len..];
        let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len());
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
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

/// `getRange`: `*`, `?`, `N`, `N-M`, each optionally `/step`.
fn check_range(expr: &str, b: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_schedules() {
        for s in [
            "*/5 * * * *",
            "0 0 * * 0",
            "30 2 1-15/2 jan-jun MON-FRI",
            "0,15,30,45 * * * ?",
            "@hourly",
            "@every 1h30m",
            "TZ=UTC 0 * * * *",
        ] {
            assert_eq!(parse_standard(s), Ok(()), "{s}");
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
        ];
        for (spec, want) in cases {
            assert_eq!(parse_standard(spec), Err(want.to_owned()), "{spec}");
        }
    }
}
