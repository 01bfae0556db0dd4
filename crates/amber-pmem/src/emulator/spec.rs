//! What the emulator charges, as a value and as the short text that
//! benchmarks and the CLI take (`lat=200ns,per=line,bw=1GB/s` or a preset).

use std::fmt;
use std::str::FromStr;

/// When the emulator's latency is paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Per {
    /// For every flushed cache line and every 64 B of non-temporal store,
    /// paid at the thread's next fence: models media whose write-back cost
    /// grows with the data persisted.
    Line,
    /// Once per drain: models a device where the fence waits for the write
    /// queue to empty.
    Fence,
}

impl Per {
    fn name(self) -> &'static str {
        match self {
            Per::Line => "line",
            Per::Fence => "fence",
        }
    }
}

/// The extra cost PM writes have over DRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmulatorSpec {
    /// Busy-wait added per [`Per`] unit, in nanoseconds (paid at fences).
    pub latency_ns: u64,
    /// What the latency is charged per.
    pub per: Per,
    /// Total write bandwidth shared by all threads; `None` is unlimited.
    pub bandwidth_bytes_per_sec: Option<u64>,
}

/// An emulator spec that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The whole text given.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad emulator spec {:?}: {}; expected a preset ({}) optionally followed by \
             overrides, or keys like `lat=200ns,per=line,bw=1GB/s` \
             (lat in ns/us/ms, per=line|fence, bw in B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s or none)",
            self.input,
            self.reason,
            EmulatorSpec::PRESETS.join(", ")
        )
    }
}

impl std::error::Error for SpecError {}

impl EmulatorSpec {
    /// Names accepted by [`EmulatorSpec::preset`].
    pub const PRESETS: [&'static str; 4] = ["dram", "pcm", "optane", "cxl"];

    /// No extra cost: the baseline every other preset is compared against.
    pub fn dram() -> EmulatorSpec {
        EmulatorSpec {
            latency_ns: 0,
            per: Per::Line,
            bandwidth_bytes_per_sec: None,
        }
    }

    /// Phase-change memory as emulated for HiNFS: 200 ns for each flushed
    /// cache line and 1 GB/s total write bandwidth (Ou et al., "HiNFS: A
    /// Persistent Memory File System with Both Buffering and Direct-Access",
    /// ACM Transactions on Storage 14(1), 2018, §5.1).
    pub fn pcm() -> EmulatorSpec {
        EmulatorSpec {
            latency_ns: 200,
            per: Per::Line,
            bandwidth_bytes_per_sec: Some(1_000_000_000),
        }
    }

    /// One Intel Optane DC PMM (first generation, App Direct): about 90 ns
    /// for a persisted 64 B write and about 2.3 GB/s sequential write
    /// bandwidth for a single DIMM (Izraelevitz et al., "Basic Performance
    /// Measurements of the Intel Optane DC Persistent Memory Module",
    /// arXiv:1903.05714, 2019, §3; the single-DIMM write bandwidth agrees
    /// with Yang et al., "An Empirical Guide to the Behavior and Use of
    /// Scalable Persistent Memory", FAST 2020).
    pub fn optane() -> EmulatorSpec {
        EmulatorSpec {
            latency_ns: 90,
            per: Per::Line,
            bandwidth_bytes_per_sec: Some(2_300_000_000),
        }
    }

    /// A CXL Type-3 memory expander: about 140 ns more than local DRAM per
    /// access and about 20 GB/s per device, the lower end of the ASIC
    /// device's figures in Sun et al., "Demystifying CXL Memory with Genuine
    /// CXL-Ready Systems and Devices", MICRO 2023 (read off its latency and
    /// bandwidth plots, so approximate).
    pub fn cxl() -> EmulatorSpec {
        EmulatorSpec {
            latency_ns: 140,
            per: Per::Line,
            bandwidth_bytes_per_sec: Some(20_000_000_000),
        }
    }

    /// The preset called `name` (case-insensitive).
    pub fn preset(name: &str) -> Option<EmulatorSpec> {
        match name.trim().to_ascii_lowercase().as_str() {
            "dram" => Some(EmulatorSpec::dram()),
            "pcm" => Some(EmulatorSpec::pcm()),
            "optane" => Some(EmulatorSpec::optane()),
            "cxl" => Some(EmulatorSpec::cxl()),
            _ => None,
        }
    }

    /// Parses a preset name, `key=value` items (`lat`, `per`, `bw`), or a
    /// preset followed by items overriding it. Keys left out keep the
    /// preset's value, or DRAM's (`lat=0ns,per=line,bw=none`).
    pub fn parse(input: &str) -> Result<EmulatorSpec, SpecError> {
        let fail = |reason: String| SpecError {
            input: input.to_string(),
            reason,
        };
        if input.trim().is_empty() {
            return Err(fail("it is empty".to_string()));
        }
        let mut spec = EmulatorSpec::dram();
        let mut seen: Vec<&str> = Vec::new();
        for (i, item) in input.split(',').map(str::trim).enumerate() {
            if item.is_empty() {
                return Err(fail("it has an empty item (stray comma?)".to_string()));
            }
            let Some((key, value)) = item.split_once('=') else {
                match EmulatorSpec::preset(item) {
                    Some(p) if i == 0 => {
                        spec = p;
                        continue;
                    }
                    Some(_) => return Err(fail(format!("preset `{item}` must come first"))),
                    None => {
                        return Err(fail(format!(
                            "`{item}` is neither a preset nor a key=value item"
                        )))
                    }
                }
            };
            let (key, value) = (key.trim(), value.trim());
            let canonical = match key.to_ascii_lowercase().as_str() {
                "lat" | "latency" => {
                    spec.latency_ns = parse_latency(value).map_err(&fail)?;
                    "lat"
                }
                "per" => {
                    spec.per = match value.to_ascii_lowercase().as_str() {
                        "line" => Per::Line,
                        "fence" => Per::Fence,
                        _ => return Err(fail(format!("per={value:?} must be `line` or `fence`"))),
                    };
                    "per"
                }
                "bw" | "bandwidth" => {
                    spec.bandwidth_bytes_per_sec = parse_bandwidth(value).map_err(&fail)?;
                    "bw"
                }
                _ => return Err(fail(format!("unknown key `{key}` (known: lat, per, bw)"))),
            };
            if seen.contains(&canonical) {
                return Err(fail(format!("`{canonical}` is given twice")));
            }
            seen.push(canonical);
        }
        Ok(spec)
    }
}

impl FromStr for EmulatorSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<EmulatorSpec, SpecError> {
        EmulatorSpec::parse(s)
    }
}

/// Prints the canonical key form with the largest exact unit, so that
/// parsing the output gives back the same spec.
impl fmt::Display for EmulatorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.latency_ns > 0 && self.latency_ns.is_multiple_of(1000) {
            write!(f, "lat={}us", self.latency_ns / 1000)?;
        } else {
            write!(f, "lat={}ns", self.latency_ns)?;
        }
        write!(f, ",per={}", self.per.name())?;
        match self.bandwidth_bytes_per_sec {
            None => write!(f, ",bw=none"),
            Some(bw) => {
                let (unit, scale) = BANDWIDTH_UNITS
                    .iter()
                    .copied()
                    .find(|&(_, scale)| bw % scale == 0)
                    .unwrap_or(("B/s", 1));
                write!(f, ",bw={}{unit}", bw / scale)
            }
        }
    }
}

/// Bandwidth units, largest first (Display picks the first exact one).
const BANDWIDTH_UNITS: [(&str, u64); 7] = [
    ("GiB/s", 1 << 30),
    ("GB/s", 1_000_000_000),
    ("MiB/s", 1 << 20),
    ("MB/s", 1_000_000),
    ("KiB/s", 1 << 10),
    ("KB/s", 1_000),
    ("B/s", 1),
];

const LATENCY_UNITS: [(&str, u64); 4] =
    [("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000)];

fn parse_latency(value: &str) -> Result<u64, String> {
    let (number, unit) = split_number(value);
    if number.is_empty() {
        return Err(format!(
            "lat={value:?} must start with a non-negative number"
        ));
    }
    let scale = LATENCY_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, s)| s)
        .ok_or_else(|| {
            if unit.is_empty() {
                format!("lat={value:?} needs a unit: ns or us")
            } else {
                format!("lat={value:?} has unknown unit `{unit}` (use ns or us)")
            }
        })?;
    scaled(number, scale).ok_or_else(|| format!("lat={value:?} is not a valid duration"))
}

fn parse_bandwidth(value: &str) -> Result<Option<u64>, String> {
    if value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let (number, unit) = split_number(value);
    if number.is_empty() {
        return Err(format!(
            "bw={value:?} must start with a positive number (or be `none`)"
        ));
    }
    let scale = BANDWIDTH_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, s)| s)
        .ok_or_else(|| {
            format!("bw={value:?} needs a unit: B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s or GiB/s (or bw=none)")
        })?;
    match scaled(number, scale) {
        Some(0) => Err(format!(
            "bw={value:?} must be positive (use bw=none for unlimited)"
        )),
        Some(bw) => Ok(Some(bw)),
        None => Err(format!("bw={value:?} is not a valid bandwidth")),
    }
}

/// Splits `"1.5GB/s"` into `("1.5", "GB/s")`.
fn split_number(value: &str) -> (&str, &str) {
    let end = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    (&value[..end], value[end..].trim())
}

/// `number * scale` as a whole count; `None` if `number` is not a plain
/// non-negative decimal or the result does not fit.
fn scaled(number: &str, scale: u64) -> Option<u64> {
    if number.is_empty() || number.matches('.').count() > 1 || number == "." {
        return None;
    }
    if !number.contains('.') {
        return number.parse::<u64>().ok()?.checked_mul(scale);
    }
    let value = number.parse::<f64>().ok()? * scale as f64;
    (value.is_finite() && value < u64::MAX as f64).then(|| value.round() as u64)
}
