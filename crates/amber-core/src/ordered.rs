//! Ordered walks over hashed keys (the block-map policies' DRAM index and
//! amber's buffer table, by chunk number; the zone's blocks of a file): a
//! range far larger than the keys — SEEK_DATA from 0 over a file whose
//! one block sits at 256 TiB — must cost the keys' number, not the
//! range's length, and a short range must not sort every key.

use rustc_hash::FxHashMap;

/// The keys in `lo..=hi`, in order, of a set of `len` keys (`keys` lists
/// them, `contains` tests one): probed number by number when the range
/// holds fewer numbers than the set has keys, else the set's own keys in
/// the range, sorted.
pub(crate) fn keys_in<I: Iterator<Item = u64>>(
    len: usize,
    keys: impl FnOnce() -> I,
    contains: impl Fn(u64) -> bool,
    lo: u64,
    hi: u64,
) -> Vec<u64> {
    if hi.saturating_sub(lo) < len as u64 {
        (lo..=hi).filter(|&k| contains(k)).collect()
    } else {
        let mut k: Vec<u64> = keys().filter(|k| (lo..=hi).contains(k)).collect();
        k.sort_unstable();
        k
    }
}

/// The entries of `map` keyed `lo..=hi`, in key order (`keys_in`).
pub(crate) fn in_order<V>(
    map: &FxHashMap<u64, V>,
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = (u64, &V)> {
    let keys = keys_in(
        map.len(),
        || map.keys().copied(),
        |k| map.contains_key(&k),
        lo,
        hi,
    );
    keys.into_iter().map(move |k| (k, &map[&k]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_in_order_whichever_way_it_looks() {
        let map: FxHashMap<u64, char> = [(9, 'c'), (2, 'a'), (5, 'b'), (1 << 40, 'z')]
            .into_iter()
            .collect();
        let walk = |lo, hi| {
            in_order(&map, lo, hi)
                .map(|(c, &v)| (c, v))
                .collect::<Vec<_>>()
        };
        assert_eq!(walk(2, 5), vec![(2, 'a'), (5, 'b')]);
        assert_eq!(walk(3, u64::MAX), vec![(5, 'b'), (9, 'c'), (1 << 40, 'z')]);
        assert_eq!(walk(6, 8), vec![]);
    }
}
