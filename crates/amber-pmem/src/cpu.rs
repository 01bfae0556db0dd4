//! What this CPU offers for persistence, probed once per process.
//!
//! The persistence primitives are chosen from these flags at map time so the
//! hot paths never re-check CPUID (libpmem2 does the same).

use std::sync::OnceLock;

/// The CPU features the device layer chooses between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuFeatures {
    /// `clwb`: write back a line and keep it cached.
    pub clwb: bool,
    /// `clflushopt`: weakly ordered write back and evict.
    pub clflushopt: bool,
    /// `clflush`: strongly ordered write back and evict (every x86-64 CPU).
    pub clflush: bool,
    /// AVX: 32-byte streaming stores, and aligned 16-byte vector stores are
    /// single-copy atomic (Intel SDM vol. 3A §9.1.1, AMD APM vol. 2 §7.3.2).
    pub avx: bool,
    /// `cmpxchg16b`: the fallback 16-byte atomic store.
    pub cmpxchg16b: bool,
}

/// Probes the CPU once; the result cannot change while the process runs.
pub(crate) fn features() -> CpuFeatures {
    static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();
    *FEATURES.get_or_init(probe)
}

#[cfg(target_arch = "x86_64")]
fn probe() -> CpuFeatures {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    // std cannot detect CLWB/CLFLUSHOPT, so read CPUID leaf 7 ourselves.
    let max_leaf = __cpuid(0).eax;
    let leaf7_ebx = if max_leaf >= 7 {
        __cpuid_count(7, 0).ebx
    } else {
        0
    };
    CpuFeatures {
        clwb: leaf7_ebx & (1 << 24) != 0,
        clflushopt: leaf7_ebx & (1 << 23) != 0,
        // CLFLUSH is part of SSE2, which x86-64 mandates.
        clflush: true,
        avx: std::arch::is_x86_feature_detected!("avx"),
        cmpxchg16b: std::arch::is_x86_feature_detected!("cmpxchg16b"),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn probe() -> CpuFeatures {
    CpuFeatures {
        clwb: false,
        clflushopt: false,
        clflush: false,
        avx: false,
        cmpxchg16b: false,
    }
}

/// The CPU's marketing name, so a benchmark report says what it ran on.
pub(crate) fn model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}
