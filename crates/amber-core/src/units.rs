//! Sizes and durations as people type them: one grammar for mount options,
//! the CLI's flags and the workbench's notes, so `1.5s` or `64MiB` means
//! the same wherever it is accepted (README, "Sizes and durations").
//!
//! A value is a decimal number (`4096`, `1.5`) with an optional unit,
//! case-insensitive, with or without a space before it. Sizes are binary:
//! `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB`, and must come to whole
//! bytes. Durations take `ms`, `s` or `m` (a bare number is seconds) and
//! must come to whole nanoseconds. Neither takes a sign or an exponent.

use std::time::Duration;

/// Most digits a number may have: enough for any u64 and its fraction,
/// few enough that the arithmetic below cannot overflow a u128.
const MAX_DIGITS: usize = 24;

/// Parses a size: `4096`, `64K`, `1.5G`, `2 MiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let explain =
        "use bytes, or a number with a binary suffix K, M, G or T (KiB, MiB, ... alike), \
                   e.g. 4096, 64M or 1.5G";
    let (num, unit) = split(text).ok_or_else(|| malformed("size", text, explain))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => {
            return Err(format!(
                "size {text:?} has an unknown suffix {unit:?}; {explain}"
            ))
        }
    };
    let bytes = num
        .scaled(1u128 << shift)
        .ok_or_else(|| format!("size {text:?} is not a whole number of bytes; {explain}"))?;
    u64::try_from(bytes).map_err(|_| format!("size {text:?} is too large"))
}

/// Parses a duration: `5`, `1.5s`, `500ms`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let explain = "use seconds, or a number with a unit ms, s or m, e.g. 5s, 1.5s or 500ms";
    let (num, unit) = split(text).ok_or_else(|| malformed("duration", text, explain))?;
    let unit_ns: u128 = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        _ => {
            return Err(format!(
                "duration {text:?} has an unknown unit {unit:?}; {explain}"
            ))
        }
    };
    let ns = num
        .scaled(unit_ns)
        .ok_or_else(|| format!("duration {text:?} is not a whole number of nanoseconds"))?;
    let secs =
        u64::try_from(ns / 1_000_000_000).map_err(|_| format!("duration {text:?} is too long"))?;
    Ok(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

/// Why `text` does not parse as a number with a unit.
fn malformed(what: &str, text: &str, explain: &str) -> String {
    if text.trim().starts_with(|c: char| c.is_ascii_digit()) {
        format!("{what} {text:?} is not a well-formed number; {explain}")
    } else {
        format!("{what} {text:?} does not start with a number; {explain}")
    }
}

/// A decimal number as written: its digits without the point, and how
/// many of them follow the point.
struct Decimal {
    digits: u128,
    fraction: u32,
}

impl Decimal {
    /// `self × unit` when that is a whole number.
    fn scaled(&self, unit: u128) -> Option<u128> {
        let whole = self.digits.checked_mul(unit)?;
        let div = 10u128.pow(self.fraction);
        (whole % div == 0).then_some(whole / div)
    }
}

/// Splits `text` into its number and its unit (what follows the number,
/// spaces around it dropped); None unless the number is well formed.
fn split(text: &str) -> Option<(Decimal, &str)> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let well_formed = !int.is_empty()
        && frac.is_empty() != num.contains('.')
        && int.len() + frac.len() <= MAX_DIGITS
        && frac.bytes().all(|b| b.is_ascii_digit());
    if !well_formed {
        return None;
    }
    let digits = format!("{int}{frac}").parse().ok()?;
    let fraction = frac.len() as u32;
    Some((Decimal { digits, fraction }, unit.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        for (text, want) in [
            ("0", 0),
            ("4096", 4096),
            ("4096B", 4096),
            ("64K", 64 << 10),
            ("64KiB", 64 << 10),
            ("64 kib", 64 << 10),
            ("1M", 1 << 20),
            ("256m", 256 << 20),
            ("2MiB", 2 << 20),
            ("1G", 1 << 30),
            ("1.5G", 3 << 29),
            ("0.5K", 512),
            ("1T", 1 << 40),
            ("4.0 KiB", 4096),
            (" 8M ", 8 << 20),
            ("16777215T", 16777215 << 40),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "K",
            "-1",
            "1e3",
            "1.",
            ".5K",
            "1.2.3",
            "0.3K",
            "1.5",
            "1P",
            "1KB",
            "lots",
            "16777216T",
            "18446744073709551616",
            "1000000000000000000000000000",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        let said = |text| parse_size(text).unwrap_err();
        assert!(
            said("64X").contains("unknown suffix \"X\""),
            "{}",
            said("64X")
        );
        assert!(said("M").contains("does not start with a number"));
        assert!(said("1.2.3").contains("not a well-formed number"));
        assert!(said("99999999999T").contains("too large"));
    }

    #[test]
    fn durations() {
        for (text, want) in [
            ("0", Duration::ZERO),
            ("5", Duration::from_secs(5)),
            ("5s", Duration::from_secs(5)),
            ("1.5s", Duration::from_millis(1500)),
            ("500ms", Duration::from_millis(500)),
            ("0.5ms", Duration::from_micros(500)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("2m", Duration::from_secs(120)),
            ("10 MS", Duration::from_millis(10)),
            ("18446744073709551615s", Duration::from_secs(u64::MAX)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "s",
            "-1s",
            "soon",
            "1h",
            "5sec",
            "0.0000000001s",
            "1.s",
            "18446744073709551616s",
            "never",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
