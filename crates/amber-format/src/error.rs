//! Why a pool's bytes could not be accepted. Kept apart from I/O errors:
//! these mean the media holds something this version must not trust.

/// A structure read from media failed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The pool does not start with Amber's magic.
    BadMagic,
    /// The pool was made by a newer, incompatible version of Amber.
    UnsupportedVersion {
        /// The version the structure's header carries.
        found: u32,
        /// The only version this code reads and writes.
        supported: u32,
    },
    /// The pool uses incompatible features this version does not know.
    UnknownIncompatFeatures(u64),
    /// Neither superblock copy has a valid checksum.
    BadChecksum,
    /// The pool file is smaller than the superblock says.
    Truncated {
        /// Bytes the superblock's pool size promises.
        expected: u64,
        /// Bytes the file or device actually has.
        actual: u64,
    },
    /// A field holds a value that cannot be right.
    InvalidField {
        /// The field, in words a user can look up in docs/design.md.
        what: &'static str,
        /// The value found (or, for a region, its start), for the report.
        value: u64,
    },
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::BadMagic => write!(
                f,
                "not an Amber pool (bad magic): check the path, or create one with `amberfs mkfs`"
            ),
            FormatError::UnsupportedVersion { found, supported } => write!(
                f,
                "pool format version {found} is newer than this amberfs supports ({supported}): \
                 use a newer amberfs"
            ),
            FormatError::UnknownIncompatFeatures(bits) => write!(
                f,
                "pool uses features unknown to this amberfs (incompat bits {bits:#x}): \
                 use a newer amberfs"
            ),
            FormatError::BadChecksum => write!(
                f,
                "both superblock copies fail their checksum: the pool is corrupt; \
                 run `amberfs fsck` for details"
            ),
            FormatError::Truncated { expected, actual } => write!(
                f,
                "pool is truncated: superblock says {expected} bytes but the file has {actual}; \
                 restore the full file"
            ),
            FormatError::InvalidField { what, value } => {
                write!(f, "corrupt superblock: {what} = {value} is impossible")
            }
        }
    }
}

impl std::error::Error for FormatError {}
