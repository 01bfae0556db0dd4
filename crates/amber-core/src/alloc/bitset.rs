//! A fixed-size bit set, used for block ownership during rebuilds and fsck.

/// `len` bits, all clear at first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
    len: u64,
}

impl BitSet {
    pub fn new(len: u64) -> BitSet {
        BitSet {
            words: vec![0; len.div_ceil(64) as usize],
            len,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn get(&self, i: u64) -> bool {
        assert!(i < self.len);
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Sets bit `i`; returns whether it was already set.
    pub fn set(&mut self, i: u64) -> bool {
        assert!(i < self.len);
        let w = &mut self.words[(i / 64) as usize];
        let was = *w & (1 << (i % 64)) != 0;
        *w |= 1 << (i % 64);
        was
    }

    pub fn clear(&mut self, i: u64) {
        assert!(i < self.len);
        self.words[(i / 64) as usize] &= !(1 << (i % 64));
    }

    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// Little-endian bytes, bit i of byte i/8 for bit i.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.truncate(self.len.div_ceil(8) as usize);
        out
    }

    /// Inverse of `to_bytes`; bits past `len` are ignored.
    pub fn from_bytes(bytes: &[u8], len: u64) -> BitSet {
        let mut s = BitSet::new(len);
        for (i, w) in s.words.iter_mut().enumerate() {
            let mut a = [0u8; 8];
            for (k, byte) in a.iter_mut().enumerate() {
                *byte = bytes.get(i * 8 + k).copied().unwrap_or(0);
            }
            *w = u64::from_le_bytes(a);
        }
        if !len.is_multiple_of(64) {
            if let Some(last) = s.words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_bytes_round_trip() {
        let mut s = BitSet::new(130);
        assert!(!s.set(0));
        assert!(s.set(0));
        s.set(129);
        s.set(64);
        s.clear(64);
        assert_eq!(s.count_ones(), 2);
        let t = BitSet::from_bytes(&s.to_bytes(), 130);
        assert_eq!(s, t);
    }
}
