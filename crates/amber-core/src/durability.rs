//! Per-file durability and atomicity (`user.amberfs.durability`,
//! `user.amberfs.atomicity`). The values are ordinary extended attributes
//! of the inode, so they persist and change atomically through the xattr
//! transaction; the core keeps them parsed in the DRAM inode
//! (`InodeState::durability`, `InodeState::atomicity`) so that no write
//! ever parses attributes. docs/design.md §14 has the rules and the
//! crash argument.

use crate::error::{FsError, Result};
use amber_format::xattr::Xattr;

/// Every attribute name Amber interprets starts with this.
pub const PREFIX: &[u8] = b"user.amberfs.";
/// The attribute choosing a file's [`Durability`].
pub const DURABILITY_XATTR: &[u8] = b"user.amberfs.durability";
/// The attribute choosing a file's [`Atomicity`].
pub const ATOMICITY_XATTR: &[u8] = b"user.amberfs.atomicity";
/// A read-only report, made when read and never stored or listed, of what
/// the mounted policy did with the file: where its blocks' newest copies
/// are, whether its metadata waits in DRAM, and the policy's counters
/// (`Core::policy_report`).
pub const POLICY_XATTR: &[u8] = b"user.amberfs.policy";

/// When a write to the file becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Durable once fsync/fdatasync returns (or at once for an O_SYNC
    /// write, or under a policy durable on return). The default.
    #[default]
    Posix,
    /// Every write is durable on return, data, size and times, as if the
    /// file were always opened O_SYNC.
    Sync,
    /// fsync/fdatasync does not force the file's data out of a policy's
    /// DRAM buffers or queues: it becomes durable by the policy's
    /// background write-back, syncfs or unmount. No change under a policy
    /// durable on return.
    Lazy,
}

/// How much of a write a crash may tear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atomicity {
    /// Each byte of an interrupted write is old or new. The default.
    #[default]
    None,
    /// Every write() is all-or-nothing across a crash; only policies whose
    /// writes are all atomic (`DataPolicy::atomic_writes`) accept it.
    Write,
}

impl Durability {
    /// The attribute value naming it.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Posix => "posix",
            Durability::Sync => "sync",
            Durability::Lazy => "lazy",
        }
    }

    fn parse(word: &[u8]) -> Option<Durability> {
        [Durability::Posix, Durability::Sync, Durability::Lazy]
            .into_iter()
            .find(|d| d.name().as_bytes() == word)
    }
}

impl Atomicity {
    /// The attribute value naming it.
    pub fn name(self) -> &'static str {
        match self {
            Atomicity::None => "none",
            Atomicity::Write => "write",
        }
    }

    fn parse(word: &[u8]) -> Option<Atomicity> {
        [Atomicity::None, Atomicity::Write]
            .into_iter()
            .find(|a| a.name().as_bytes() == word)
    }
}

/// A value set on one of the two attributes, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    Durability(Durability),
    Atomicity(Atomicity),
}

impl Setting {
    /// The canonical value stored: the bare word, whatever trailing NUL or
    /// newline the caller sent.
    pub(crate) fn value(self) -> &'static [u8] {
        match self {
            Setting::Durability(d) => d.name().as_bytes(),
            Setting::Atomicity(a) => a.name().as_bytes(),
        }
    }
}

/// The word a value spells: one trailing NUL (a C string passed with its
/// terminator) or newline (`echo` into a tool) is forgiven, nothing else.
fn word(value: &[u8]) -> &[u8] {
    match value {
        [w @ .., 0 | b'\n'] => w,
        w => w,
    }
}

/// Validates a setxattr of `name` to `value`: None for a name outside
/// `user.amberfs.`, the parsed setting for one of Amber's two, and
/// InvalidArgument (listing the valid names or values) for anything else.
/// `atomic_policy` is whether the mounted policy makes every write atomic:
/// without it `atomicity=write` is refused, as it could not be honoured.
pub(crate) fn check_set(name: &[u8], value: &[u8], atomic_policy: bool) -> Result<Option<Setting>> {
    if !name.starts_with(PREFIX) {
        return Ok(None);
    }
    let w = word(value);
    let s = if name == DURABILITY_XATTR {
        Durability::parse(w)
            .map(Setting::Durability)
            .ok_or(FsError::InvalidArgument(
                "user.amberfs.durability takes posix, sync or lazy",
            ))?
    } else if name == ATOMICITY_XATTR {
        Atomicity::parse(w)
            .map(Setting::Atomicity)
            .ok_or(FsError::InvalidArgument(
                "user.amberfs.atomicity takes write or none",
            ))?
    } else if name == POLICY_XATTR {
        return Err(FsError::InvalidArgument(
            "user.amberfs.policy is read-only: it reports what the policy did with the file",
        ));
    } else {
        return Err(FsError::InvalidArgument(
            "the user.amberfs. attributes are user.amberfs.durability \
             (posix, sync or lazy), user.amberfs.atomicity (write or none) and the \
             read-only user.amberfs.policy",
        ));
    };
    if s == Setting::Atomicity(Atomicity::Write) && !atomic_policy {
        return Err(FsError::Unsupported(ATOMIC_POLICIES));
    }
    Ok(Some(s))
}

/// Why `atomicity=write` is refused (a test holds the list to the
/// policies' `atomic_writes`).
pub(crate) const ATOMIC_POLICIES: &str =
    "user.amberfs.atomicity=write needs a policy whose every write is atomic: \
     mount with -o policy=amber, cow, finelog, lawn or nova";

/// The durability and atomicity an attribute list gives a file. A stored
/// value this version does not know (set before these attributes were
/// checked, or by a newer version) counts as the default: the file then
/// behaves as every file did before they existed.
pub(crate) fn of(attrs: &[Xattr]) -> (Durability, Atomicity) {
    let value = |n: &[u8]| attrs.iter().find(|a| a.name == n).map(|a| word(&a.value));
    (
        value(DURABILITY_XATTR)
            .and_then(Durability::parse)
            .unwrap_or_default(),
        value(ATOMICITY_XATTR)
            .and_then(Atomicity::parse)
            .unwrap_or_default(),
    )
}

/// The attributes a new file inherits from a directory with `durability`
/// and `atomicity`: those that differ from the defaults (a default needs no
/// attribute).
pub(crate) fn inherited(durability: Durability, atomicity: Atomicity) -> Vec<Xattr> {
    let mut out = Vec::new();
    if durability != Durability::default() {
        out.push(Xattr {
            name: DURABILITY_XATTR.to_vec(),
            value: durability.name().as_bytes().to_vec(),
        });
    }
    if atomicity != Atomicity::default() {
        out.push(Xattr {
            name: ATOMICITY_XATTR.to_vec(),
            value: atomicity.name().as_bytes().to_vec(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{by_name, POLICIES};
    use crate::fs::MountOptions;
    use amber_pmem::MmapDevice;

    #[test]
    fn values_are_exact_words_with_one_optional_terminator() {
        let d = |v: &[u8]| check_set(DURABILITY_XATTR, v, false);
        assert_eq!(d(b"sync"), Ok(Some(Setting::Durability(Durability::Sync))));
        assert_eq!(
            d(b"lazy\0"),
            Ok(Some(Setting::Durability(Durability::Lazy)))
        );
        assert_eq!(
            d(b"posix\n"),
            Ok(Some(Setting::Durability(Durability::Posix)))
        );
        for bad in [&b"Sync"[..], b"sync\n\n", b" sync", b"", b"\0", b"syncx"] {
            let e = d(bad).unwrap_err();
            assert!(
                e.to_string().contains("posix, sync or lazy"),
                "{bad:?}: {e}"
            );
        }
        let a = |v: &[u8], atomic| check_set(ATOMICITY_XATTR, v, atomic);
        assert_eq!(
            a(b"none", false),
            Ok(Some(Setting::Atomicity(Atomicity::None)))
        );
        assert_eq!(
            a(b"write", true),
            Ok(Some(Setting::Atomicity(Atomicity::Write)))
        );
        assert!(matches!(a(b"write", false), Err(FsError::Unsupported(_))));
        assert!(a(b"all", true)
            .unwrap_err()
            .to_string()
            .contains("write or none"));
        let e = check_set(b"user.amberfs.speed", b"fast", true).unwrap_err();
        assert!(e.to_string().contains("user.amberfs.durability"), "{e}");
        assert_eq!(check_set(b"user.amberfsx", b"anything", false), Ok(None));
        assert_eq!(
            check_set(b"trusted.amberfs.durability", b"x", false),
            Ok(None)
        );
    }

    #[test]
    fn unknown_stored_values_read_as_the_defaults() {
        let x = |n: &[u8], v: &[u8]| Xattr {
            name: n.to_vec(),
            value: v.to_vec(),
        };
        assert_eq!(of(&[]), (Durability::Posix, Atomicity::None));
        let attrs = [x(DURABILITY_XATTR, b"lazy"), x(ATOMICITY_XATTR, b"write\0")];
        assert_eq!(of(&attrs), (Durability::Lazy, Atomicity::Write));
        let attrs = [x(DURABILITY_XATTR, b"eventually"), x(b"user.a", b"sync")];
        assert_eq!(of(&attrs), (Durability::Posix, Atomicity::None));
        assert_eq!(
            of(&inherited(Durability::Sync, Atomicity::Write)),
            (Durability::Sync, Atomicity::Write)
        );
        assert!(inherited(Durability::Posix, Atomicity::None).is_empty());
    }

    #[test]
    fn the_refusal_names_exactly_the_atomic_policies() {
        let atomic: Vec<&str> = POLICIES
            .iter()
            .copied()
            .filter(|&name| {
                let opts = MountOptions::parse(&format!("policy={name}")).unwrap();
                by_name::<MmapDevice>(&opts).unwrap().atomic_writes()
            })
            .collect();
        assert_eq!(atomic, ["amber", "cow", "finelog", "nova", "lawn"]);
        for name in atomic {
            assert!(ATOMIC_POLICIES.contains(name), "{name}");
        }
    }
}
