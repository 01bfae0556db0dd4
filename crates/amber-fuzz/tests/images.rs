//! The fsck fuzz test: seeded inputs through `check_case`, the body of the
//! cargo-fuzz target `image`, spread over every base pool (the classic and
//! the split layout with a small-write zone, each cleanly unmounted and
//! crashed, and the split layout with its records in the log). Most inputs damage one byte, word, line or block, the damage
//! a user meets; the rest several, or cut the pool short. The oracle is
//! `check_image`'s (docs/design.md §7.1).
//!
//! Prints its seed; `AMBER_FUZZ_SEED=S` replays a run, `AMBER_FUZZ_CASE=N`
//! one case of it, `AMBER_FUZZ_CASES=N` runs more.

use amber_fuzz::check_case;
use amber_fuzz::image::{DAMAGE_BYTES, TRUNCATE};
use amber_fuzz::pools::bases;
use amber_sim::SplitMix64;

/// Cases per run: a few seconds here.
const CASES: u64 = 1000;
/// Failures reported in full before the run stops.
const MAX_FAILURES: usize = 3;

fn env(var: &str) -> Option<u64> {
    std::env::var(var).ok().and_then(|s| s.parse().ok())
}

/// Case `case` of the run seeded `seed`: the base pool by turns, then one
/// damage (half the time), a few, or many.
fn input(seed: u64, case: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed ^ case.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut data = vec![(case % bases().len() as u64) as u8];
    let damages = match rng.below(4) {
        0 | 1 => 1,
        2 => 2 + rng.below(3),
        _ => 5 + rng.below(20),
    };
    for _ in 0..damages {
        let mut d = [0u8; DAMAGE_BYTES];
        rng.fill(&mut d);
        d[0] = if rng.below(50) == 0 {
            TRUNCATE
        } else {
            d[0] % TRUNCATE
        };
        data.extend_from_slice(&d);
    }
    data
}

#[test]
fn damaged_pools_never_fool_fsck_or_repair() {
    let seed = env("AMBER_FUZZ_SEED").unwrap_or(1);
    let cases = match env("AMBER_FUZZ_CASE") {
        Some(c) => c..c + 1,
        None => 0..env("AMBER_FUZZ_CASES").unwrap_or(CASES),
    };
    eprintln!("fsck fuzz seed {seed}, cases {cases:?} (replay with AMBER_FUZZ_SEED={seed})");
    let mut failures = Vec::new();
    for case in cases {
        if let Err(e) = check_case(&input(seed, case)) {
            failures.push(format!(
                "case {case} (replay with AMBER_FUZZ_SEED={seed} AMBER_FUZZ_CASE={case}): {e}"
            ));
            if failures.len() == MAX_FAILURES {
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The bases hold what the damage is aimed at: every one checks clean and
/// keeps its promises undamaged, and the split ones have valid slices in
/// their zone.
#[test]
fn the_bases_are_whole_and_have_slices() {
    for base in bases() {
        amber_fuzz::check_image(base.image.to_vec(), &base.options)
            .unwrap_or_else(|e| panic!("{}: {e}", base.name));
        if base.name.starts_with("split") {
            let dev = amber_sim::OverlayDevice::new(base.image.clone());
            let (fs, _) = amber_core::Fs::mount(dev, base.options.clone()).unwrap();
            let zone = fs.core().zone().expect("a zone");
            assert!(zone.occupancy().1 > 0, "{}: no valid slice", base.name);
        }
    }
}
