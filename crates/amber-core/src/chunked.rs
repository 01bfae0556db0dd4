//! Ordered walks over hash maps of fixed-size chunks keyed by chunk
//! number (the block-map policies' DRAM index, amber's buffer table): a
//! range far larger than the map — SEEK_DATA from 0 over a file whose one
//! block sits at 256 TiB — must cost the map's size, not the range's.

use rustc_hash::FxHashMap;

/// The chunks of `map` numbered `lo..=hi`, in order: probed number by
/// number when the range holds fewer numbers than the map has chunks,
/// else the map's own keys in the range, sorted.
pub(crate) fn in_order<V>(
    map: &FxHashMap<u64, V>,
    lo: u64,
    hi: u64,
) -> impl Iterator<Item = (u64, &V)> {
    let keys: Vec<u64> = if hi.saturating_sub(lo) < map.len() as u64 {
        (lo..=hi).filter(|c| map.contains_key(c)).collect()
    } else {
        let mut k: Vec<u64> = map
            .keys()
            .copied()
            .filter(|c| (lo..=hi).contains(c))
            .collect();
        k.sort_unstable();
        k
    };
    keys.into_iter().map(move |c| (c, &map[&c]))
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
