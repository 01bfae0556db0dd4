#!/usr/bin/env bash
# Issue 18 point 4: hunter populating files in 4 KiB and 64 KiB writes
# under `dram`, against the bare non-temporal copy in the same run.
# Two shapes: the issue's own command (one 256 MiB file; with
# `--threads 1,2` the second thread has no file of its own, so both rows
# are one writer beside hunter's worker), and one file per thread (1 GiB
# for one thread, two 512 MiB files for two, so both cores write).
# Run from the repository root after `cargo build --release --bin
# amberfs`; about 6 minutes. `$1` is another build to measure (the
# before/after runs), `$2` the directory its outputs go to.
set -euo pipefail
bin=${1:-target/release/amberfs}
out=${2:-docs/results/hunterwrite}
mkdir -p "$out"
for io in 4K 64K; do
  "$bin" --emulate dram bench --quiet compare --workload populate --file-size 256M \
    --pool-size 700M --io-size "$io" --threads 1,2 --target bare --target amberfs:hunter \
    --reps 9 --warmup 1 --seed 42 --json "$out/issue-$io.json" > "$out/issue-$io.txt"
  "$bin" --emulate dram bench --quiet compare --workload populate --files 1 --file-size 1G \
    --pool-size 2600M --io-size "$io" --threads 1 --target bare --target amberfs:hunter \
    --reps 9 --warmup 1 --seed 42 --json "$out/one-file-$io.json" > "$out/one-file-$io.txt"
  "$bin" --emulate dram bench --quiet compare --workload populate --files 2 --file-size 512M \
    --pool-size 2600M --io-size "$io" --threads 2 --target bare --target amberfs:hunter \
    --reps 9 --warmup 1 --seed 42 --json "$out/two-files-$io.json" > "$out/two-files-$io.txt"
done
