#!/usr/bin/env bash
# Issue 18 point 3: fsync'd random overwrites, amber's one-fence zone
# against direct (in place), amber with LAWN's zone commit, and lawn, in
# one run per size and preset. Run from the repository root after
# `cargo build --release --bin amberfs`; about 4 minutes.
set -euo pipefail
out=docs/results/onefence
for emu in dram pcm; do
  for size in 128 256 512 1K 2K 4K; do
    target/release/amberfs --emulate "$emu" bench --quiet compare --workload randwrite \
      --target amberfs:direct --target amberfs:amber --target amberfs:amber,amber_zone=lawn \
      --target amberfs:lawn --io-size "$size" --reps 5 --warmup 1 --duration 400ms \
      --threads 1 --file-size 32M --fsync every --pool-size 512M --seed 42 \
      --json "$out/randwrite-$size-$emu.json" > "$out/randwrite-$size-$emu.txt"
  done
done
