//! The checksum every structure that must detect corruption carries.

/// CRC-32C (Castagnoli), hardware-accelerated where the CPU has it.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continues a CRC-32C over more bytes.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}
