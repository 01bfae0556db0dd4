//! How data reaches a file: the data paths NVMFS-IOzone compares, over a
//! directory on any mounted file system, and the Amber library.

use std::path::PathBuf;

/// A data path for a directory target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// `pwrite`/`pread` from and into a DRAM buffer, as IOzone does.
    Posix,
    /// The file mapped; records copied from DRAM and each made durable with
    /// `msync`, as traditional tools persist a mapping.
    MmapMsync,
    /// The file mapped; records copied from DRAM and each made durable with
    /// cache-flush instructions and a fence (NVMFS-IOzone's libpmem path).
    MmapFlush,
    /// Data generated in registers stored straight to the mapping, flushed
    /// and fenced; reads load every word into registers. No DRAM buffer.
    LoadStore,
    /// As `LoadStore` with non-temporal stores that bypass the cache: one
    /// fence per record, no flush.
    Nt,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Posix,
        Mode::MmapMsync,
        Mode::MmapFlush,
        Mode::LoadStore,
        Mode::Nt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Posix => "posix",
            Mode::MmapMsync => "mmap-msync",
            Mode::MmapFlush => "mmap-flush",
            Mode::LoadStore => "loadstore",
            Mode::Nt => "nt",
        }
    }

    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name.trim())
    }

    /// Whether the mode goes through a mapping of the file.
    pub fn maps(self) -> bool {
        self != Mode::Posix
    }
}

/// Where an iozone run goes, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// `dir:/path`: a directory on any mounted file system, through each
    /// selected mode.
    Dir(PathBuf),
    /// `amberfs:POLICY`: the Amber library on a fresh pool, through its own
    /// file interface (the modes are about kernel data paths and do not
    /// apply).
    Amber { policy: String },
}

impl TargetSpec {
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        if let Some(path) = text.strip_prefix("dir:") {
            if path.is_empty() {
                return Err("dir: needs a directory, e.g. dir:/mnt/ext4".into());
            }
            return Ok(TargetSpec::Dir(PathBuf::from(path)));
        }
        if let Some(policy) = text.strip_prefix("amberfs:") {
            if policy.is_empty() {
                return Err("amberfs: needs a policy, e.g. amberfs:direct".into());
            }
            return Ok(TargetSpec::Amber {
                policy: policy.to_string(),
            });
        }
        Err(format!(
            "unknown target {text:?}: use dir:/path (any mounted file system) or amberfs:POLICY"
        ))
    }
}

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn modes_and_targets_parse() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(
            TargetSpec::parse("dir:/tmp/x").unwrap(),
            TargetSpec::Dir("/tmp/x".into())
        );
        assert_eq!(
            TargetSpec::parse("amberfs:direct").unwrap(),
            TargetSpec::Amber {
                policy: "direct".into()
            }
        );
        assert!(TargetSpec::parse("/tmp/x").is_err());
        assert!(TargetSpec::parse("dir:").is_err());
    }
}
