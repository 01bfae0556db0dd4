//! Mount options: parsed from the `-o a=b,c` form the CLI and FUSE adapter
//! pass through, and checked so a typo is an error, not a silent default.

use crate::data::POLICIES;
use crate::error::{FsError, Result};

/// Options of one mount. The emulator preset is not here: it wraps the
/// device before the core sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Data policy name (see `data::POLICIES`).
    pub policy: String,
    /// Every write durable on return, as if opened O_SYNC.
    pub sync: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            policy: "direct".into(),
            sync: false,
        }
    }
}

impl MountOptions {
    /// Parses `policy=direct,sync`; unknown options are rejected by name.
    pub fn parse(s: &str) -> Result<MountOptions> {
        let mut o = MountOptions::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            match (key, value) {
                ("policy", Some(v)) if POLICIES.contains(&v) => o.policy = v.to_string(),
                ("policy", _) => {
                    return Err(FsError::InvalidArgument(
                        "policy= takes one of the known policies (direct)",
                    ))
                }
                ("sync", None) => o.sync = true,
                ("async", None) => o.sync = false,
                _ => {
                    return Err(FsError::InvalidArgument(
                        "unknown mount option (known: policy=NAME, sync, async)",
                    ))
                }
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_and_rejects_unknown() {
        assert_eq!(MountOptions::parse("").unwrap(), MountOptions::default());
        let o = MountOptions::parse("policy=direct, sync").unwrap();
        assert!(o.sync);
        assert!(MountOptions::parse("policy=nope").is_err());
        assert!(MountOptions::parse("bogus").is_err());
        assert!(MountOptions::parse("sync=1").is_err());
    }
}
