//! Model-based random testing: seeded random operation sequences applied
//! both to Amber (through the public `Fs` API) and to a simple in-memory
//! model, comparing every result (errors included) and, at the end and
//! after every remount, the whole tree.
//!
//! * `random_ops_match_model` (proptest): short sequences, shrunk to a
//!   minimal failing one; proptest persists failing inputs.
//! * `seeded_long_sequence`: one long sequence from `AMBER_MODEL_SEED`
//!   (printed at start), replayable bit for bit with our own SplitMix64.
//! * `threads_share_one_fs`: 4 threads on one `Fs`, per-thread seeds
//!   printed; private subtrees checked against per-thread models, shared
//!   directories against invariants any interleaving must keep.

mod model {
    pub mod apply;
    pub mod check;
    pub mod harness;
    pub mod ops;
    pub mod rng;
    pub mod threads;
    pub mod tree;
}

use model::harness::Harness;
use model::ops::Op;
use model::rng::{seed_from_env, Rng};
use proptest::prelude::*;

/// Pool size of the single-threaded tests: room for a few sparse files
/// past 2 MiB, small enough to format in a few milliseconds.
const POOL: u64 = 16 << 20;
/// Operations of the seeded single-threaded run.
const LONG_RUN: usize = 2000;
/// Steps per thread of the multi-threaded run.
const THREAD_OPS: usize = 1500;

/// amber with its DRAM buffer taking every write that may persist lazily,
/// whatever the device measures (`auto` buffers only on slow PM).
const AMBER_BUFFERED: &str = "amber,amber_buffer=always";
/// amber as it runs on slow PM: HiNFS's model decides every block.
const AMBER_MODELLED: &str = "amber,amber_buffer=model";

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Each element seeds one operation, so proptest's shrinking removes
    /// operations until the failure needs every one left.
    #[test]
    fn random_ops_match_model(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "direct");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same under the data-atomic policies: copy-on-write and
    /// fine-grained logging must read back exactly what direct would.
    #[test]
    fn random_ops_match_model_cow(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "cow");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn random_ops_match_model_finelog(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "finelog");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn random_ops_match_model_lawn(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "lawn");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn random_ops_match_model_hunter(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "hunter");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same under amber: small overwrites through the zone, the rest
    /// into the data logs, reads from both.
    #[test]
    fn random_ops_match_model_amber(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "amber");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same under amber holding every lazy write in DRAM: buffered
    /// writes and appends, reads over the buffer, and whole-file
    /// write-backs before truncates, fsyncs and remounts.
    #[test]
    fn random_ops_match_model_amber_buffered(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, AMBER_BUFFERED);
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same under nova: copy-on-write pages named by per-file logs,
    /// replayed at every remount, garbage collected as they go.
    #[test]
    fn random_ops_match_model_nova(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "nova");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }

    /// The same under hinfs: buffered writes, reads from DRAM and PM, and
    /// write-back must keep every result the model predicts.
    #[test]
    fn random_ops_match_model_hinfs(seeds in proptest::collection::vec(any::<u64>(), 50..200)) {
        let ops: Vec<Op> = seeds.iter().map(|s| Op::generate(&mut Rng::new(*s), false)).collect();
        let mut h = Harness::new(POOL, "hinfs");
        if let Err(e) = h.run(&ops) {
            prop_assert!(false, "{}", e);
        }
    }
}

fn long_sequence(policy: &'static str) {
    let seed = seed_from_env(0x5EED_A3BE_2024);
    println!("model seed = {seed} ({policy}); rerun with AMBER_MODEL_SEED={seed}");
    let mut rng = Rng::new(seed);
    let ops: Vec<Op> = (0..LONG_RUN)
        .map(|_| Op::generate(&mut rng, false))
        .collect();
    let mut h = Harness::new(POOL, policy);
    if let Err(e) = h.run(&ops) {
        panic!("model seed = {seed} ({policy}): {e}");
    }
}

#[test]
fn seeded_long_sequence() {
    long_sequence("direct");
}

#[test]
fn seeded_long_sequence_hinfs() {
    long_sequence("hinfs");
}

#[test]
fn seeded_long_sequence_hinfs_nclfw() {
    long_sequence("hinfs-nclfw");
}

#[test]
fn seeded_long_sequence_cow() {
    long_sequence("cow");
}

#[test]
fn seeded_long_sequence_finelog() {
    long_sequence("finelog");
}

#[test]
fn seeded_long_sequence_lawn() {
    long_sequence("lawn");
}

#[test]
fn seeded_long_sequence_hunter() {
    long_sequence("hunter");
}

#[test]
fn seeded_long_sequence_amber() {
    long_sequence("amber");
}

#[test]
fn seeded_long_sequence_amber_buffered() {
    long_sequence(AMBER_BUFFERED);
}

#[test]
fn seeded_long_sequence_amber_modelled() {
    long_sequence(AMBER_MODELLED);
}

#[test]
fn seeded_long_sequence_hunter_lfs() {
    long_sequence("hunter-lfs");
}

#[test]
fn seeded_long_sequence_nova() {
    long_sequence("nova");
}

fn threads(policy: &str) {
    let seed = seed_from_env(0x7EAD_5EED);
    println!("threads base seed = {seed} ({policy}); rerun with AMBER_MODEL_SEED={seed}");
    if let Err(e) = model::threads::run(seed, THREAD_OPS, policy) {
        panic!("threads base seed = {seed} ({policy}): {e}");
    }
}

#[test]
fn threads_share_one_fs() {
    threads("direct");
}

#[test]
fn threads_share_one_fs_hinfs() {
    threads("hinfs");
}

#[test]
fn threads_share_one_fs_cow() {
    threads("cow");
}

#[test]
fn threads_share_one_fs_finelog() {
    threads("finelog");
}

#[test]
fn threads_share_one_fs_lawn() {
    threads("lawn");
}

#[test]
fn threads_share_one_fs_hunter() {
    threads("hunter");
}

#[test]
fn threads_share_one_fs_amber() {
    threads("amber");
}

#[test]
fn threads_share_one_fs_amber_buffered() {
    threads(AMBER_BUFFERED);
}

#[test]
fn threads_share_one_fs_amber_modelled() {
    threads(AMBER_MODELLED);
}

#[test]
fn threads_share_one_fs_hunter_lfs() {
    threads("hunter-lfs");
}

#[test]
fn threads_share_one_fs_nova() {
    threads("nova");
}
