//! The decoding target on stable: seeded random bytes, and every block of
//! the base pools (real superblocks, inodes, directory blocks, journals,
//! records, zone headers and descriptors) as they are and with bytes
//! changed, through `decode_all`, the body of the cargo-fuzz target
//! `decode`. Prints its seed; `AMBER_FUZZ_SEED=S` replays it.

use amber_fuzz::decode::decode_all;
use amber_fuzz::pools::bases;
use amber_sim::SplitMix64;

fn seed() -> u64 {
    let seed = std::env::var("AMBER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    eprintln!("decode fuzz seed {seed} (replay with AMBER_FUZZ_SEED={seed})");
    seed
}

#[test]
fn random_bytes_never_break_a_decoder() {
    let mut rng = SplitMix64::new(seed());
    for _ in 0..3000 {
        let mut data = vec![0u8; rng.below(9000) as usize];
        rng.fill(&mut data);
        decode_all(&data);
    }
}

#[test]
fn damaged_real_structures_never_break_a_decoder() {
    let mut rng = SplitMix64::new(seed());
    for base in bases() {
        let image = &base.image;
        let pair: Vec<u8> = [&image[..256], &image[4096..4096 + 256]].concat();
        let blocks = image.chunks_exact(4096).map(<[u8]>::to_vec);
        for mut block in std::iter::once(pair).chain(blocks) {
            decode_all(&block);
            for _ in 0..4 {
                let i = rng.below(block.len() as u64) as usize;
                block[i] = rng.next_u64() as u8;
                decode_all(&block);
            }
        }
    }
}
