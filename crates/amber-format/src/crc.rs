//! The checksum every structure that must detect corruption carries.

use crc_fast::{CrcAlgorithm, Digest};

/// CRC-32C (Castagnoli), by the fastest route the CPU has (chosen once,
/// at the first call).
pub fn crc32c(data: &[u8]) -> u32 {
    // The one-shot form builds no `Digest`, whose copy of the algorithm's
    // parameters (a memmove) cost more than a 64-byte record's checksum:
    // 3.8% of the daemon's lease thread went to it.
    u32::try_from(crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data))
        .expect("a CRC-32 fits in 32 bits")
}

/// Continues a CRC-32C over more bytes: `crc32c_append(crc32c(a), b)` is
/// the CRC-32C of `a` followed by `b`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    if crc == 0 {
        return crc32c(data);
    }
    // The digest's state is the register before the final inversion.
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    d.update(data);
    u32::try_from(d.finalize()).expect("a CRC-32 fits in 32 bits")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check value of CRC-32C (RFC 3720's iSCSI polynomial) and the
    /// append identity at every split of a buffer longer than a fold.
    #[test]
    fn known_value_and_append() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        let data: Vec<u8> = (0..600u32).map(|i| (i * 31 + 7) as u8).collect();
        let whole = crc32c(&data);
        for split in [0, 1, 7, 63, 64, 255, 256, 599, 600] {
            assert_eq!(crc32c_append(crc32c(&data[..split]), &data[split..]), whole);
        }
    }
}
