//! Opening a pool for measurement: a file (default in /dev/shm) mapped
//! with the persistence primitives the CPU offers, wrapped in the PM
//! emulator preset the run asked for. Baselines and Amber use the very same
//! device, so they pay the same emulated costs.

use amber_pmem::{Emulated, EmulatorSpec, MapOptions, MmapDevice, PmDevice};
use std::path::Path;

/// The device every benchmark runs on.
pub type BenchDevice = Emulated<MmapDevice>;

/// Creates (replacing any old file) a pool file of `size` bytes and maps it.
pub fn open_pool(path: &Path, size: u64, preset: &str) -> Result<BenchDevice, String> {
    let spec = EmulatorSpec::parse(preset).map_err(|e| e.to_string())?;
    if path.exists() {
        std::fs::remove_file(path)
            .map_err(|e| format!("cannot remove old pool {}: {e}", path.display()))?;
    }
    let dev = MmapDevice::create(path, size, &MapOptions::default())
        .map_err(|e| format!("cannot create pool {}: {e}", path.display()))?;
    // Warm-up: fault every page in now, so no measured run pays for the
    // first touch of a fresh tmpfs file.
    dev.zero_nt(0, size);
    dev.drain().map_err(|e| e.to_string())?;
    Ok(Emulated::new(dev, spec))
}
