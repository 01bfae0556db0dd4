//! The multi-threaded test: threads share one `Fs`. Each owns a directory
//! with its own model (so every result stays checkable), and all of them
//! meet in shared places whose end state is known whatever the interleaving:
//! * `/shared/log`: fixed-size records appended by everyone; an append is
//!   atomic under the inode lock, so the file must be a whole number of
//!   intact records, each thread's in its own order.
//! * `/shared/t{tid}_{k}`: files with names unique to a thread, created,
//!   renamed and removed while others do the same in that directory.
//! * `/sa` and `/sb`: files and directories `m{j}` every thread moves back
//!   and forth; each must end up in exactly one of the two, intact.
//! * `/sa/x{tid}` and `/sb/x{tid}`: a pair each thread swaps with
//!   RENAME_EXCHANGE; the parity of its swaps says which is where.

use super::apply::{compare, first_diff, to_e};
use super::check::check_tree;
use super::harness::{fresh_fs, remount};
use super::ops::{pattern, Op};
use super::rng::Rng;
use super::tree::{Tree, E};
use amber_core::{Fs, OpenOptions, RenameMode};
use amber_pmem::MmapDevice;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const THREADS: usize = 4;
/// Not a divisor of 4096, so records straddle block boundaries.
const RECORD: usize = 100;
/// Files and directories moved between /sa and /sb.
const MOVERS: usize = 24;
/// How long the threads may take before the test calls it a hang.
const DEADLINE: Duration = Duration::from_secs(300);

fn record(tid: usize, seq: u32) -> Vec<u8> {
    let mut r = vec![0xA5, tid as u8];
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend(pattern((RECORD - 7) as u64, (tid as u8) ^ (seq as u8)));
    r.push(0x5A);
    r
}

fn mover_is_dir(j: usize) -> bool {
    j.is_multiple_of(6)
}

fn mover_data(j: usize) -> Vec<u8> {
    pattern(500 + 1000 * j as u64, j as u8)
}

/// What a thread leaves behind, for the final checks.
pub struct Outcome {
    tid: usize,
    tree: Tree,
    appended: u32,
    /// Its files in /shared, by name.
    own: BTreeMap<String, Vec<u8>>,
    exchanges: u32,
}

fn setup(fs: &Fs<MmapDevice>) -> amber_core::Result<()> {
    for t in 0..THREADS {
        fs.create_dir(&format!("/t{t}"))?;
    }
    for d in ["/shared", "/sa", "/sb"] {
        fs.create_dir(d)?;
    }
    fs.write("/shared/log", b"")?;
    for j in 0..MOVERS {
        if mover_is_dir(j) {
            fs.create_dir(&format!("/sa/m{j}"))?;
            fs.write(&format!("/sa/m{j}/inner"), &mover_data(j))?;
        } else {
            fs.write(&format!("/sa/m{j}"), &mover_data(j))?;
        }
    }
    for t in 0..THREADS {
        fs.write(&format!("/sa/x{t}"), format!("A{t}").as_bytes())?;
        fs.write(&format!("/sb/x{t}"), format!("B{t}").as_bytes())?;
    }
    Ok(())
}

/// One thread's run of `ops` steps.
fn worker(fs: Fs<MmapDevice>, tid: usize, seed: u64, ops: usize) -> Result<Outcome, String> {
    let mut rng = Rng::new(seed);
    let pre = format!("/t{tid}");
    let mut tree = Tree::new(0o755);
    let mut out = Outcome {
        tid,
        tree: Tree::new(0o755),
        appended: 0,
        own: BTreeMap::new(),
        exchanges: 0,
    };
    let mut next_name = 0u32;
    let fail =
        |step: usize, what: String| format!("thread {tid} (seed {seed}) step {step}: {what}");
    for step in 0..ops {
        match rng.below(100) {
            0..=64 => {
                let op = Op::generate(&mut rng, true);
                compare(&fs, &pre, &mut tree, &op).map_err(|e| fail(step, e))?;
            }
            65..=76 => {
                let f = OpenOptions::new()
                    .append(true)
                    .open(&fs, "/shared/log")
                    .map_err(|e| fail(step, format!("open log: {e:?}")))?;
                let n = f
                    .write_at(&record(tid, out.appended), 0)
                    .map_err(|e| fail(step, format!("append: {e:?}")))?;
                if n != RECORD {
                    return Err(fail(step, format!("short append of {n} bytes")));
                }
                out.appended += 1;
            }
            77..=86 => shared_step(&fs, &mut rng, tid, &mut out.own, &mut next_name)
                .map_err(|e| fail(step, e))?,
            87..=97 => {
                let j = rng.below(MOVERS as u64);
                let (a, b) = if rng.chance(50) {
                    ("/sa", "/sb")
                } else {
                    ("/sb", "/sa")
                };
                let mode = if rng.chance(50) {
                    RenameMode::Replace
                } else {
                    RenameMode::NoReplace
                };
                let (from, to) = (format!("{a}/m{j}"), format!("{b}/m{j}"));
                // Each m{j} lives in exactly one of the two: the move
                // either finds it or finds it gone, never a duplicate.
                match fs.rename_with(&from, &to, mode).map_err(to_e) {
                    Ok(()) | Err(E::NotFound) => {}
                    Err(e) => {
                        return Err(fail(step, format!("rename {from} {to} {mode:?}: {e:?}")))
                    }
                }
            }
            _ => {
                let (a, b) = (format!("/sa/x{tid}"), format!("/sb/x{tid}"));
                fs.rename_with(&a, &b, RenameMode::Exchange)
                    .map_err(|e| fail(step, format!("exchange: {e:?}")))?;
                out.exchanges += 1;
            }
        }
    }
    check_tree(&fs, &pre, &tree).map_err(|e| fail(ops, format!("end of thread: {e}")))?;
    out.tree = tree;
    Ok(out)
}

/// Create, rename, unlink or read back one of this thread's files in
/// /shared; each must succeed, as no one else uses these names.
fn shared_step(
    fs: &Fs<MmapDevice>,
    rng: &mut Rng,
    tid: usize,
    own: &mut BTreeMap<String, Vec<u8>>,
    next: &mut u32,
) -> Result<(), String> {
    let mut fresh = || {
        *next += 1;
        format!("t{tid}_{next}")
    };
    let pick = |rng: &mut Rng, own: &BTreeMap<String, Vec<u8>>| {
        let k = rng.below(own.len() as u64) as usize;
        own.keys().nth(k).cloned().expect("in range")
    };
    let action = if own.is_empty() { 0 } else { rng.below(4) };
    match action {
        0 => {
            let name = fresh();
            let data = pattern(rng.range(1, 9000), rng.next_u64() as u8);
            let f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(fs, &format!("/shared/{name}"))
                .map_err(|e| format!("create {name}: {e:?}"))?;
            f.write_at(&data, 0)
                .map_err(|e| format!("write {name}: {e:?}"))?;
            own.insert(name, data);
        }
        1 => {
            let old = pick(rng, own);
            let new = fresh();
            let mode = *rng.pick(&[RenameMode::Replace, RenameMode::NoReplace]);
            fs.rename_with(&format!("/shared/{old}"), &format!("/shared/{new}"), mode)
                .map_err(|e| format!("rename {old} {new}: {e:?}"))?;
            let data = own.remove(&old).expect("own");
            own.insert(new, data);
        }
        2 => {
            let old = pick(rng, own);
            fs.remove_file(&format!("/shared/{old}"))
                .map_err(|e| format!("unlink {old}: {e:?}"))?;
            own.remove(&old);
        }
        _ => {
            let name = pick(rng, own);
            let got = fs
                .read(&format!("/shared/{name}"))
                .map_err(|e| format!("read {name}: {e:?}"))?;
            if let Some(i) = first_diff(&got, &own[&name]) {
                return Err(format!("/shared/{name} differs at byte {i}"));
            }
        }
    }
    Ok(())
}

/// Checks the whole pool against what the threads left.
// Tests are exempt from the 80-line limit: one check after another.
#[allow(clippy::too_many_lines)]
fn verify(fs: &Fs<MmapDevice>, outs: &[Outcome]) -> Result<(), String> {
    for o in outs {
        check_tree(fs, &format!("/t{}", o.tid), &o.tree)?;
    }
    // The log: intact records, each thread's in order, none missing.
    let log = fs
        .read("/shared/log")
        .map_err(|e| format!("read log: {e:?}"))?;
    let total: u32 = outs.iter().map(|o| o.appended).sum();
    if log.len() != total as usize * RECORD {
        return Err(format!(
            "log is {} bytes, want {total} records of {RECORD}",
            log.len()
        ));
    }
    let mut seen = [0u32; THREADS];
    for (i, r) in log.chunks(RECORD).enumerate() {
        let tid = r[1] as usize;
        let seq = u32::from_le_bytes(r[2..6].try_into().expect("4 bytes"));
        if tid >= THREADS || seen[tid] != seq || r != record(tid, seq).as_slice() {
            return Err(format!(
                "log record {i} (offset {}) is torn or out of order: tid {tid} seq {seq}",
                i * RECORD
            ));
        }
        seen[tid] += 1;
    }
    // /shared: the log and exactly the names the threads kept.
    let mut want: Vec<String> = vec!["log".into()];
    for o in outs {
        want.extend(o.own.keys().cloned());
    }
    want.sort();
    let mut got: Vec<String> = fs
        .read_dir("/shared")
        .map_err(|e| format!("read_dir /shared: {e:?}"))?
        .into_iter()
        .map(|e| e.name)
        .collect();
    got.sort();
    if got != want {
        return Err(format!("/shared holds {got:?}, want {want:?}"));
    }
    for o in outs {
        for (name, data) in &o.own {
            let g = fs
                .read(&format!("/shared/{name}"))
                .map_err(|e| format!("{e:?}"))?;
            if g != *data {
                return Err(format!("/shared/{name} changed"));
            }
        }
    }
    // /sa and /sb: every mover exactly once, intact; the exchanged pairs
    // where the parity of their swaps puts them.
    let names = |d: &str| -> Result<Vec<String>, String> {
        Ok(fs
            .read_dir(d)
            .map_err(|e| format!("read_dir {d}: {e:?}"))?
            .into_iter()
            .map(|e| e.name)
            .collect())
    };
    let (sa, sb) = (names("/sa")?, names("/sb")?);
    if sa.len() + sb.len() != MOVERS + 2 * THREADS {
        return Err(format!(
            "/sa {sa:?} and /sb {sb:?}: wrong number of entries"
        ));
    }
    for j in 0..MOVERS {
        let n = format!("m{j}");
        let dir = match (sa.contains(&n), sb.contains(&n)) {
            (true, false) => "/sa",
            (false, true) => "/sb",
            (a, b) => return Err(format!("{n}: in /sa {a}, in /sb {b}")),
        };
        let p = if mover_is_dir(j) {
            format!("{dir}/{n}/inner")
        } else {
            format!("{dir}/{n}")
        };
        let m = fs.metadata(&p).map_err(|e| format!("{p}: {e:?}"))?;
        let g = fs.read(&p).map_err(|e| format!("{p}: {e:?}"))?;
        if g != mover_data(j) || m.attr().nlink != 1 {
            return Err(format!("{p}: contents or link count changed"));
        }
    }
    for o in outs {
        let t = o.tid;
        let (a, b) = if o.exchanges.is_multiple_of(2) {
            ("A", "B")
        } else {
            ("B", "A")
        };
        for (d, want) in [("/sa", a), ("/sb", b)] {
            let g = fs
                .read(&format!("{d}/x{t}"))
                .map_err(|e| format!("{d}/x{t}: {e:?}"))?;
            if g != format!("{want}{t}").as_bytes() {
                return Err(format!("{d}/x{t} after {} exchanges", o.exchanges));
            }
        }
    }
    Ok(())
}

/// Runs the threads with per-thread seeds derived from `base`, verifies,
/// remounts cleanly and verifies, then crash-remounts and verifies, all
/// under data policy `policy`.
pub fn run(base: u64, ops: usize, policy: &str) -> Result<(), String> {
    let fs = fresh_fs(64 << 20, policy);
    setup(&fs).map_err(|e| format!("setup: {e:?}"))?;
    let mut handles = Vec::new();
    for tid in 0..THREADS {
        let seed = Rng::new(base.wrapping_add(tid as u64)).next_u64();
        println!("thread {tid} seed = {seed}");
        let fs = fs.clone();
        handles.push(std::thread::spawn(move || worker(fs, tid, seed, ops)));
    }
    // Poll rather than join blindly, so a deadlock fails the test instead
    // of hanging it (the stuck threads die with the process).
    let start = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        if start.elapsed() > DEADLINE {
            panic!("threads still running after {DEADLINE:?}: deadlock? (base seed {base})");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut outs = Vec::new();
    let mut errors = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(o)) => outs.push(o),
            Ok(Err(e)) => errors.push(e),
            Err(_) => errors.push("a thread panicked".into()),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    verify(&fs, &outs).map_err(|e| format!("after the threads: {e}"))?;
    let fs = remount(fs, true, policy)?;
    verify(&fs, &outs).map_err(|e| format!("after a clean remount: {e}"))?;
    let fs = remount(fs, false, policy)?;
    verify(&fs, &outs).map_err(|e| format!("after a crash remount: {e}"))?;
    fs.unmount().map_err(|e| format!("unmount: {e:?}"))
}
