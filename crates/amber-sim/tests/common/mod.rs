//! Helpers shared by the integration tests.

use amber_sim::{CrashImage, CrashPoint, OverlayDevice};

/// The full bytes of one crash image.
pub fn image_bytes(point: &CrashPoint, image: &CrashImage) -> Vec<u8> {
    OverlayDevice::from_crash(point, image).to_image()
}
