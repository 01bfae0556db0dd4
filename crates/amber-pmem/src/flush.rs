//! Cache write-back and fence primitives, chosen once when a pool is mapped.
//!
//! libpmem2's model: the map step decides how a store reaches the
//! persistence domain (which flush instruction, or none on eADR platforms,
//! or `msync` for a disk-backed file) so every later flush is a plain loop
//! with no feature checks.

use std::fmt;

use crate::{cpu, MapError, CACHE_LINE};

/// How flushed cache lines reach the persistence domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushKind {
    /// `clwb`: writes the line back and may keep it cached, so a re-read
    /// after persisting still hits the cache.
    Clwb,
    /// `clflushopt`: writes back and evicts; weakly ordered, so many flushes
    /// overlap before the drain.
    Clflushopt,
    /// `clflush`: writes back and evicts, serialised with other stores; the
    /// slow path every x86-64 CPU has.
    Clflush,
    /// The platform persists CPU caches on power loss (eADR or battery
    /// backed), so flushing is unnecessary; drains still order
    /// non-temporal stores.
    None,
    /// The pool is a file on an ordinary (non-DAX) file system whose
    /// durability was requested: flushes `msync` the touched pages.
    Msync,
}

impl FlushKind {
    /// Every kind, in the order of preference for CPU flushes.
    pub const ALL: [FlushKind; 5] = [
        FlushKind::Clwb,
        FlushKind::Clflushopt,
        FlushKind::Clflush,
        FlushKind::None,
        FlushKind::Msync,
    ];

    /// The name accepted by `AMBER_FLUSH` and printed by `Display`.
    pub fn name(self) -> &'static str {
        match self {
            FlushKind::Clwb => "clwb",
            FlushKind::Clflushopt => "clflushopt",
            FlushKind::Clflush => "clflush",
            FlushKind::None => "none",
            FlushKind::Msync => "msync",
        }
    }

    /// Parses a name as printed by [`FlushKind::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<FlushKind> {
        FlushKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The fastest cache flush instruction this CPU has; on CPUs without
    /// any (non-x86), `msync` is the only way to make a store durable.
    pub fn best_cpu() -> FlushKind {
        let f = cpu::features();
        if f.clwb {
            FlushKind::Clwb
        } else if f.clflushopt {
            FlushKind::Clflushopt
        } else if f.clflush {
            FlushKind::Clflush
        } else {
            FlushKind::Msync
        }
    }

    /// Whether this CPU can execute the kind's instruction.
    pub fn is_supported(self) -> bool {
        let f = cpu::features();
        match self {
            FlushKind::Clwb => f.clwb,
            FlushKind::Clflushopt => f.clflushopt,
            FlushKind::Clflush => f.clflush,
            FlushKind::None | FlushKind::Msync => true,
        }
    }
}

impl fmt::Display for FlushKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Environment variable that forces a flush kind, so tests and benchmarks
/// can exercise the slower paths on a CPU that has faster ones.
pub const FLUSH_ENV: &str = "AMBER_FLUSH";

/// Picks the flush kind for a new mapping.
///
/// Precedence: the caller's explicit override, then `AMBER_FLUSH`, then
/// detection. `msync_needed` says the mapping is an ordinary page-cache file
/// whose durability was requested; `dax` says stores reach PM directly.
pub(crate) fn choose(
    forced: Option<FlushKind>,
    msync_needed: bool,
    dax: bool,
) -> Result<FlushKind, MapError> {
    let kind = match forced {
        Some(k) => k,
        None => match env_override()? {
            Some(k) => k,
            None if msync_needed => FlushKind::Msync,
            None if dax && platform_persists_caches() => FlushKind::None,
            None => FlushKind::best_cpu(),
        },
    };
    if kind.is_supported() {
        Ok(kind)
    } else {
        Err(MapError::FlushUnsupported { kind })
    }
}

fn env_override() -> Result<Option<FlushKind>, MapError> {
    match std::env::var(FLUSH_ENV) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => FlushKind::from_name(&v)
            .map(Some)
            .ok_or(MapError::BadFlushOverride { value: v }),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(MapError::BadFlushOverride {
            value: v.to_string_lossy().into_owned(),
        }),
    }
}

/// True when every NVDIMM region reports the CPU cache inside its
/// persistence domain (eADR), the same sysfs test libpmem2 uses.
fn platform_persists_caches() -> bool {
    let Ok(dir) = std::fs::read_dir("/sys/bus/nd/devices") else {
        return false;
    };
    let mut regions = 0;
    for entry in dir.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("region") {
            continue;
        }
        regions += 1;
        let domain = std::fs::read_to_string(entry.path().join("persistence_domain"));
        if domain.map(|d| d.trim() != "cpu_cache").unwrap_or(true) {
            return false;
        }
    }
    regions > 0
}

/// Writes back every cache line overlapping `[addr, addr + len)` with the
/// instruction of `kind`; a no-op for kinds that do not flush caches.
///
/// # Safety
/// `[addr, addr + len)` must lie inside one live mapping whose start is
/// cache-line aligned (so the rounded-down first line is mapped too), and
/// `kind` must be supported by this CPU.
pub(crate) unsafe fn flush_lines(kind: FlushKind, addr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = addr as usize & !(CACHE_LINE as usize - 1);
    let end = addr as usize + len;
    // SAFETY: the caller guarantees the lines are mapped and the instruction
    // exists on this CPU.
    unsafe { arch::flush_lines(kind, start, end) }
}

/// Store fence: orders every earlier flush and non-temporal store before any
/// later store.
#[inline]
pub(crate) fn sfence() {
    arch::sfence();
}

/// Starts loading the cache lines of `[addr, addr + len)` into the cache
/// (PREFETCHT0). A hint: it never faults, even on an unmapped address,
/// and changes no byte.
#[inline]
pub(crate) fn prefetch_lines(addr: *const u8, len: usize) {
    let start = addr as usize & !(CACHE_LINE as usize - 1);
    for line in (start..addr as usize + len).step_by(CACHE_LINE as usize) {
        arch::prefetch(line);
    }
}

#[cfg(target_arch = "x86_64")]
mod arch {
    use super::FlushKind;
    use crate::CACHE_LINE;
    use std::arch::asm;

    /// # Safety
    /// Lines from `start` (line aligned) to `end` must be mapped, and
    /// `kind`'s instruction must exist on this CPU.
    pub(super) unsafe fn flush_lines(kind: FlushKind, start: usize, end: usize) {
        let step = CACHE_LINE as usize;
        match kind {
            FlushKind::Clwb => {
                for line in (start..end).step_by(step) {
                    // SAFETY: the line is mapped and the CPU has CLWB (caller);
                    // no `nomem`, so the compiler keeps earlier stores before it.
                    unsafe { asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags)) }
                }
            }
            FlushKind::Clflushopt => {
                for line in (start..end).step_by(step) {
                    // SAFETY: as above, for CLFLUSHOPT.
                    unsafe {
                        asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags))
                    }
                }
            }
            FlushKind::Clflush => {
                for line in (start..end).step_by(step) {
                    // SAFETY: as above; CLFLUSH is baseline x86-64.
                    unsafe {
                        asm!("clflush [{0}]", in(reg) line, options(nostack, preserves_flags))
                    }
                }
            }
            FlushKind::None | FlushKind::Msync => {}
        }
    }

    #[inline]
    pub(super) fn sfence() {
        // SAFETY: SFENCE only orders stores; it is baseline x86-64 (SSE).
        unsafe { asm!("sfence", options(nostack, preserves_flags)) }
    }

    #[inline]
    pub(super) fn prefetch(line: usize) {
        // SAFETY: PREFETCHT0 is baseline x86-64 (SSE); it reads and writes
        // no memory the program sees and never faults, whatever the address.
        unsafe {
            asm!("prefetcht0 [{0}]", in(reg) line, options(nostack, preserves_flags, readonly))
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod arch {
    use super::FlushKind;

    /// # Safety
    /// Only `None` and `Msync` are supported off x86-64, and neither flushes.
    pub(super) unsafe fn flush_lines(kind: FlushKind, _start: usize, _end: usize) {
        debug_assert!(matches!(kind, FlushKind::None | FlushKind::Msync));
    }

    #[inline]
    pub(super) fn sfence() {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    #[inline]
    pub(super) fn prefetch(_line: usize) {}
}
