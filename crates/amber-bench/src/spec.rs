//! `--target` strings: what a user types to name a file system to measure.
//! `amberfs:POLICY` makes a fresh pool for the run; `bare` makes one too
//! but puts no file system on it (each write one non-temporal copy into
//! the pool: the baseline of HUNTER's "bare PM" line); `dir:/path` uses a
//! directory on any mounted file system (ext4, xfs, tmpfs, a FUSE mount).

use crate::bare::BareTarget;
use crate::target::{AmberTarget, DropCaches, PosixTarget, Target};
use std::path::PathBuf;

/// A parsed `--target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// `policy` is the policy name, then any mount options: `hinfs,buffer=64M`.
    Amber {
        policy: String,
    },
    /// No file system: files are extents of a fresh pool, each write one
    /// non-temporal copy and a drain (`crate::bare`).
    Bare,
    Dir {
        path: PathBuf,
    },
}

/// What the specs leave to the command line as a whole.
#[derive(Debug, Clone)]
pub struct SpecOptions {
    /// Where the pools of Amber and bare targets are created (RAM-backed,
    /// so PM is emulated).
    pub pool_dir: PathBuf,
    pub pool_size: u64,
    /// The emulator preset (`--emulate`), for Amber and bare targets.
    pub preset: String,
    /// The clean-up between repetitions of directory targets.
    pub drop_caches: DropCaches,
}

impl TargetSpec {
    pub fn parse(s: &str) -> Result<TargetSpec, String> {
        let help = "use amberfs:POLICY (a fresh Amber pool), bare (a fresh pool with no file \
                    system: each write one non-temporal copy) or dir:/path (a directory on any \
                    mounted file system)";
        if s == "bare" {
            return Ok(TargetSpec::Bare);
        }
        let Some((kind, rest)) = s.split_once(':') else {
            return Err(format!("--target {s:?}: {help}"));
        };
        match kind {
            // `amberfs:POLICY[,OPTION...]`: mount options after the policy
            // (e.g. `amberfs:hinfs,buffer=64M`) let one run compare settings.
            "amberfs" => {
                let name = rest.split(',').next().unwrap_or_default();
                if !amber_core::data::POLICIES.contains(&name) {
                    return Err(format!(
                        "--target {s:?}: unknown policy {name:?}; Amber has {}",
                        amber_core::data::POLICIES.join(", ")
                    ));
                }
                amber_core::MountOptions::parse(&format!("policy={rest}"))
                    .map_err(|e| format!("--target {s:?}: {e}"))?;
                Ok(TargetSpec::Amber {
                    policy: rest.to_string(),
                })
            }
            "bare" => Err(format!(
                "--target {s:?}: bare takes no options; write just `bare`"
            )),
            "dir" if rest.starts_with('/') => Ok(TargetSpec::Dir {
                path: PathBuf::from(rest),
            }),
            "dir" => Err(format!(
                "--target {s:?}: give an absolute path, e.g. dir:/mnt/ext4"
            )),
            _ => Err(format!("--target {s:?}: unknown kind {kind:?}; {help}")),
        }
    }

    /// Makes the target; `index` keeps pools of one run apart.
    pub fn open(&self, o: &SpecOptions, index: usize) -> Result<OpenTarget, String> {
        let pool = o
            .pool_dir
            .join(format!("amber-bench-{}-{index}.pool", std::process::id()));
        match self {
            TargetSpec::Amber { policy } => {
                AmberTarget::create(&pool, o.pool_size, policy, &o.preset)
                    .map(OpenTarget::Amber)
                    .map_err(|e| format!("amberfs:{policy}: {e}"))
            }
            TargetSpec::Bare => BareTarget::create(&pool, o.pool_size, &o.preset)
                .map(OpenTarget::Bare)
                .map_err(|e| format!("bare: {e}")),
            TargetSpec::Dir { path } => {
                if !path.is_dir() {
                    return Err(format!("dir:{}: not a directory", path.display()));
                }
                if o.drop_caches != DropCaches::None && !is_root() {
                    return Err(format!(
                        "dir:{}: --drop-caches needs root (it writes /proc/sys/vm/drop_caches); run as root or pass --drop-caches none",
                        path.display()
                    ));
                }
                Ok(OpenTarget::Dir(PosixTarget::new(
                    path.clone(),
                    o.drop_caches,
                )))
            }
        }
    }
}

/// A target made from a spec; `close` removes what the run created.
pub enum OpenTarget {
    Amber(AmberTarget),
    Bare(BareTarget),
    Dir(PosixTarget),
}

impl OpenTarget {
    pub fn target(&self) -> &dyn Target {
        match self {
            OpenTarget::Amber(t) => t,
            OpenTarget::Bare(t) => t,
            OpenTarget::Dir(t) => t,
        }
    }

    /// Unmounts and deletes an Amber pool, deletes a bare one; a directory
    /// is left as found (the workloads remove their own files).
    pub fn close(self) -> Result<(), String> {
        match self {
            OpenTarget::Amber(t) => t.destroy().map_err(|e| e.to_string()),
            OpenTarget::Bare(t) => t.destroy().map_err(|e| e.to_string()),
            OpenTarget::Dir(_) => Ok(()),
        }
    }
}

/// Parses `--drop-caches none|page|dentries|all`.
pub fn parse_drop_caches(s: &str) -> Result<DropCaches, String> {
    match s {
        "none" => Ok(DropCaches::None),
        "page" => Ok(DropCaches::PageCache),
        "dentries" => Ok(DropCaches::Dentries),
        "all" => Ok(DropCaches::All),
        _ => Err(format!(
            "--drop-caches {s:?}: use none, page, dentries or all"
        )),
    }
}

/// All caches when we may drop them (root), else none: the default.
pub fn default_drop_caches() -> DropCaches {
    if is_root() {
        DropCaches::All
    } else {
        DropCaches::None
    }
}

/// Whether this process runs with effective uid 0 (read from /proc, as
/// this crate has no libc binding).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|r| r.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_why() {
        assert_eq!(
            TargetSpec::parse("amberfs:direct"),
            Ok(TargetSpec::Amber {
                policy: "direct".into()
            })
        );
        assert_eq!(
            TargetSpec::parse("dir:/mnt/x"),
            Ok(TargetSpec::Dir {
                path: "/mnt/x".into()
            })
        );
        assert_eq!(TargetSpec::parse("bare"), Ok(TargetSpec::Bare));
        assert!(TargetSpec::parse("bare:x")
            .unwrap_err()
            .contains("no options"));
        assert!(TargetSpec::parse("amberfs:nope")
            .unwrap_err()
            .contains("unknown policy"));
        assert!(TargetSpec::parse("amberfs:direct,sync").is_ok());
        assert!(TargetSpec::parse("amberfs:direct,bogus").is_err());
        assert!(TargetSpec::parse("dir:rel")
            .unwrap_err()
            .contains("absolute"));
        assert!(TargetSpec::parse("tmpfs")
            .unwrap_err()
            .contains("dir:/path"));
        assert!(parse_drop_caches("some").is_err());
    }
}
