//! How data reaches a file: the data paths NVMFS-IOzone compares, over a
//! directory on any mounted file system, and the Amber library.

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

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn modes_parse_by_name() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_name("dax"), None);
    }
}
