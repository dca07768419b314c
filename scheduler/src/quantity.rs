//! Resource quantities as the scheduler needs them: CPU in millicores, everything else in
//! whole units (apimachinery's `pkg/api/resource/quantity.go`, `MilliValue()` / `Value()`).
//!
//! ```text
//! "500m" → 500 millicores     "1" → 1000     "0.5" → 500     "2.0001" → 2001 (rounded up)
//! "128Mi" → 134217728 bytes   "1Gi" → 1073741824   "1k" → 1000   "1e3" → 1000   "1M" → 10^6
//! ```
//!
//! Unlike apimachinery's exact `inf.Dec`, the value is held in an `i128` of nano-units, which
//! is exact for every quantity a node or pod realistically carries (up to ~10^20 units).
//! The API server has a fuller parser (`apiserver/src/strategy/quantity.rs`, with
//! canonicalisation); the two could share a crate one day, but components never depend on
//! the API server's crate.

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;

/// Parses a quantity into nano-units; `None` if it is not a valid quantity.
fn parse_nanos(s: &str) -> Option<i128> {
    let s = s.trim();
    let (sign, rest) = match s.as_bytes().first()? {
        b'-' => (-1, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    // Scale: (multiplier, power of ten) so that value = number * multiplier * 10^power.
    let (multiplier, power): (i128, i32) = match suffix {
        "" => (1, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        exp if exp.starts_with(['e', 'E']) => (1, exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    if frac.len() > 30 || !(-40..=30).contains(&power) {
        return None;
    }
    // digits = whole.frac as an integer, scaled down by 10^frac.len().
    let digits: i128 = format!("{whole}{frac}").parse().ok()?;
    let exponent = power + 9 - frac.len() as i32; // nano-units
    let value = if exponent >= 0 {
        digits
            .checked_mul(10i128.checked_pow(exponent as u32)?)?
            .checked_mul(multiplier)?
    } else {
        let divisor = 10i128.checked_pow((-exponent) as u32)?;
        let scaled = digits.checked_mul(multiplier)?;
        // Round up below a nano-unit, as Kubernetes rounds up below its smallest scale.
        (scaled + divisor - 1) / divisor
    };
    Some(sign * value)
}

/// Rounds nano-units up to a multiple of `unit` nano-units, in `unit`s.
fn ceil_div(nanos: i128, unit: i128) -> i64 {
    let value = if nanos >= 0 {
        (nanos + unit - 1) / unit
    } else {
        nanos / unit
    };
    value.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// A CPU quantity in millicores (`MilliValue()`, rounded up); `None` if unparsable.
pub fn parse_milli(s: &str) -> Option<i64> {
    parse_nanos(s).map(|n| ceil_div(n, NANO / 1000))
}

/// A quantity in whole units (`Value()`, rounded up): bytes for memory, a count for pods.
pub fn parse_value(s: &str) -> Option<i64> {
    parse_nanos(s).map(|n| ceil_div(n, NANO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_in_millicores() {
        for (input, want) in [
            ("500m", Some(500)),
            ("1", Some(1000)),
            ("0.5", Some(500)),
            (".5", Some(500)),
            ("2.0001", Some(2001)),
            ("100m", Some(100)),
            ("1k", Some(1_000_000)),
            ("1e-3", Some(1)),
            ("250000u", Some(250)),
            ("1n", Some(1)),
            ("", None),
            ("m", None),
            ("1x", None),
            ("1.2.3", None),
        ] {
            assert_eq!(parse_milli(input), want, "{input:?}");
        }
    }

    #[test]
    fn memory_in_bytes() {
        for (input, want) in [
            ("128Mi", Some(128 << 20)),
            ("1Gi", Some(1 << 30)),
            ("1.5Gi", Some(3 << 29)),
            ("1e3", Some(1000)),
            ("1E3", Some(1000)),
            ("1k", Some(1000)),
            ("1Ki", Some(1024)),
            ("1M", Some(1_000_000)),
            ("110", Some(110)),
            ("500m", Some(1)),
            ("64Ei", Some(i64::MAX)),
            ("-1", Some(-1)),
        ] {
            assert_eq!(parse_value(input), want, "{input:?}");
        }
    }
}
