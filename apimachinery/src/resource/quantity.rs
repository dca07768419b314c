//! Resource quantities: `500m` CPU, `128Mi` memory (apimachinery's
//! `pkg/api/resource/quantity.go`).
//!
//! A quantity is a decimal number with an optional suffix:
//!
//! ```text
//! quantity ::= [+-] digits[.digits] suffix
//! suffix   ::= Ki | Mi | Gi | Ti | Pi | Ei          binary: 2^10 .. 2^60
//!            | n | u | m | "" | k | M | G | T | P | E   decimal: 10^-9 .. 10^18
//!            | e<int> | E<int>                     decimal exponent
//! ```
//!
//! [`Quantity`] keeps the value as an exact count of nano-units, rounded up as Kubernetes rounds
//! up below its smallest scale, so comparisons (`requests <= limits`) and the scheduler's sums
//! are exact: `0.5` CPU and `500m` are equal, `1Gi` is 1073741824 bytes.
//!
//! The API server stores quantities in canonical form ([`canonicalize`]): the largest suffix
//! that keeps the value whole, in the style (binary, decimal, exponent) the client used:
//! `0.5` → `500m`, `1024Mi` → `1Gi`, `1000` → `1k`, `1.5Gi` → `1536Mi`.

use std::fmt;

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// The message Kubernetes gives for a malformed quantity (`ErrFormatWrong`).
pub const QUANTITY_FORMAT_MSG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The syntax is wrong (`ErrFormatWrong`).
    #[error("{QUANTITY_FORMAT_MSG}")]
    Format,
    /// The suffix is unknown (`ErrSuffix`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The value does not fit (far beyond any real resource amount).
    #[error("quantity is too large")]
    TooLarge,
}

/// A parsed quantity, exact to 10^-9 of its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// Parses a quantity string (`100m`, `1.5Gi`, `2e3`).
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let s = s.trim();
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(num_end);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
            return Err(QuantityError::Format);
        }
        let mut mantissa: i128 = 0;
        for c in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(c - b'0')))
                .ok_or(QuantityError::TooLarge)?;
        }
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| QuantityError::TooLarge)?;
        let (pow2, pow10) = parse_suffix(suffix)?;
        // value = mantissa * 2^pow2 * 10^(pow10 - frac_len); nanos = value * 10^9, rounded up.
        let mut value = mantissa
            .checked_mul(1i128.checked_shl(pow2).ok_or(QuantityError::TooLarge)?)
            .ok_or(QuantityError::TooLarge)?;
        let exp = pow10 - frac_len + 9;
        if exp >= 0 {
            let factor = 10i128
                .checked_pow(u32::try_from(exp).map_err(|_| QuantityError::TooLarge)?)
                .ok_or(QuantityError::TooLarge)?;
            value = value.checked_mul(factor).ok_or(QuantityError::TooLarge)?;
        } else {
            let divisor = u32::try_from(-exp).ok().and_then(|e| 10i128.checked_pow(e));
            value = match divisor {
                Some(d) => (value + d - 1) / d,
                // Smaller than any representable amount: rounds up to one nano if non-zero.
                None => i128::from(value > 0),
            };
        }
        Ok(Quantity {
            nanos: if negative { -value } else { value },
        })
    }

    /// A quantity of whole units (cores, bytes).
    pub fn from_units(units: i64) -> Self {
        Quantity {
            nanos: i128::from(units) * NANOS_PER_UNIT,
        }
    }

    /// A quantity of `nanos` nano-units.
    pub fn from_nanos(nanos: i128) -> Self {
        Quantity { nanos }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in milli-units, rounded up (`MilliValue`): CPU in millicores.
    pub fn millis(&self) -> i128 {
        div_ceil(self.nanos, 1_000_000)
    }

    /// The value in whole units, rounded up (`Value`): memory in bytes.
    pub fn value(&self) -> i128 {
        div_ceil(self.nanos, NANOS_PER_UNIT)
    }

    /// `MilliValue()` as an `int64`, rounded up and saturated: CPU in millicores.
    pub fn milli_value(&self) -> i64 {
        saturate(self.millis())
    }

    /// `Value()` as an `int64`, rounded up and saturated: bytes, pods.
    pub fn int_value(&self) -> i64 {
        saturate(self.value())
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The sum of two quantities.
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

impl fmt::Display for Quantity {
    /// A canonical-enough rendering: whole units when exact, else milli-units, else nanos.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % NANOS_PER_UNIT == 0 {
            write!(f, "{}", self.nanos / NANOS_PER_UNIT)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

/// How a quantity was written, which its canonical form keeps (`resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// `Ki`, `Mi`, ... suffixes.
    BinarySI,
    /// `m`, `k`, `M`, ... suffixes or none.
    DecimalSI,
    /// `e3`, `E-3` exponents.
    DecimalExponent,
}

impl Quantity {
    /// Parses a quantity and tells which suffix style it was written in.
    pub fn parse_with_format(s: &str) -> Result<(Self, QuantityFormat), QuantityError> {
        let q = Quantity::parse(s)?;
        let suffix = s
            .trim()
            .trim_start_matches(['+', '-'])
            .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        let format = if suffix.ends_with('i') {
            QuantityFormat::BinarySI
        } else if suffix.starts_with(['e', 'E']) {
            QuantityFormat::DecimalExponent
        } else {
            QuantityFormat::DecimalSI
        };
        Ok((q, format))
    }

    /// `RoundUp(-3)`: rounds up to a whole milli-unit, as `SetDefaults_ResourceList` does.
    pub fn round_up_to_milli(self) -> Quantity {
        Quantity {
            nanos: self.millis() * 1_000_000,
        }
    }

    /// `CanonicalizeBytes`: the canonical string in `format`.
    pub fn canonical(&self, format: QuantityFormat) -> String {
        if self.nanos == 0 {
            return "0".to_owned();
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.abs();
        let binary = format == QuantityFormat::BinarySI
            && abs >= 1024 * NANOS_PER_UNIT
            && abs % NANOS_PER_UNIT == 0;
        if binary {
            const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
            let (mut units, mut e) = (abs / NANOS_PER_UNIT, 0);
            while units % 1024 == 0 && e < SUFFIXES.len() - 1 {
                units /= 1024;
                e += 1;
            }
            return format!("{sign}{units}{}", SUFFIXES[e]);
        }
        let (mut mantissa, mut exp) = (abs, -9i32);
        while mantissa % 1000 == 0 && (format == QuantityFormat::DecimalExponent || exp < 18) {
            mantissa /= 1000;
            exp += 3;
        }
        let suffix = match (format, exp) {
            (QuantityFormat::DecimalExponent, 0) => String::new(),
            (QuantityFormat::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".to_owned(),
            (_, -6) => "u".to_owned(),
            (_, -3) => "m".to_owned(),
            (_, 3) => "k".to_owned(),
            (_, 6) => "M".to_owned(),
            (_, 9) => "G".to_owned(),
            (_, 12) => "T".to_owned(),
            (_, 15) => "P".to_owned(),
            (_, 18) => "E".to_owned(),
            _ => String::new(),
        };
        format!("{sign}{mantissa}{suffix}")
    }
}

/// The form Kubernetes stores a resource-list quantity in: rounded up to milli-units, then
/// canonical. `None` when `s` is not a quantity (validation reports it).
pub fn canonicalize(s: &str) -> Option<String> {
    let (q, format) = Quantity::parse_with_format(s).ok()?;
    Some(q.round_up_to_milli().canonical(format))
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 { q + 1 } else { q }
}

/// The suffix as (power of two, power of ten).
fn parse_suffix(suffix: &str) -> Result<(u32, i32), QuantityError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with(['e', 'E']) => {
            let exp = &s[1..];
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(QuantityError::Format);
            }
            let e: i32 = exp.parse().map_err(|_| QuantityError::TooLarge)?;
            (0, e)
        }
        s if s.bytes().all(|c| c.is_ascii_alphabetic()) => return Err(QuantityError::Suffix),
        _ => return Err(QuantityError::Format),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn cpu_and_memory() {
        assert_eq!(q("500m").millis(), 500);
        assert_eq!(q("0.5").millis(), 500);
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("2").millis(), 2000);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("128Mi").value(), 128 << 20);
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("1.5Ki").value(), 1536);
        assert_eq!(q("2e3").value(), 2000);
        assert_eq!(q("2E-3").millis(), 2);
        assert_eq!(q("-1").value(), -1);
        assert_eq!(q("+.5").millis(), 500);
        assert_eq!(q("100n").nanos(), 100);
    }

    #[test]
    fn rounding_up_below_nano_and_milli() {
        assert_eq!(q("0.1n").nanos(), 1);
        assert_eq!(q("1n").millis(), 1);
        assert_eq!(q("1500m").value(), 2);
    }

    #[test]
    fn ordering_is_exact() {
        assert!(q("999m") < q("1"));
        assert!(q("1Ki") > q("1k"));
        assert_eq!(q("1").saturating_add(q("500m")).to_string(), "1500m");
        assert_eq!(Quantity::from_units(3).to_string(), "3");
    }

    #[test]
    fn canonical_forms() {
        for (input, want) in [
            ("0.5", "500m"),
            ("500m", "500m"),
            ("2000m", "2"),
            ("1000", "1k"),
            ("1200000", "1200k"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("0.5Ki", "512"),
            ("1Ki", "1Ki"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("1e3", "1e3"),
            ("0.1m", "1m"),
            ("0", "0"),
            ("-1.5", "-1500m"),
            ("100M", "100M"),
        ] {
            assert_eq!(canonicalize(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(canonicalize("lots"), None);
    }

    #[test]
    fn errors() {
        assert_eq!(Quantity::parse("abc"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse(""), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1.2.3"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1Xi"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1e"), Err(QuantityError::Format));
        assert_eq!(Quantity::parse("1 k"), Err(QuantityError::Format));
        assert_eq!(
            Quantity::parse("99999999999999999999999999999999999999999"),
            Err(QuantityError::TooLarge)
        );
        assert_eq!(QuantityError::Format.to_string(), QUANTITY_FORMAT_MSG);
    }

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
            assert_eq!(
                Quantity::parse(input).ok().map(|q| q.milli_value()),
                want,
                "{input:?}"
            );
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
            assert_eq!(
                Quantity::parse(input).ok().map(|q| q.int_value()),
                want,
                "{input:?}"
            );
        }
    }
}
