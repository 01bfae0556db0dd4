#!/usr/bin/env bash
# Issue 18 point 3: amber's small overwrites through its zone against the
# same writes as own commits (`amber_zone_max=0`: no zone writes, each
# write inside one block merged into a new block with its checksummed
# record and one fence), beside direct, in one run per size and preset.
# Run from the repository root after `cargo build --release --bin
# amberfs`; about 2 minutes.
set -euo pipefail
out=docs/results/owncommit
for emu in dram pcm; do
  for size in 512 1K 2K; do
    target/release/amberfs --emulate "$emu" bench --quiet compare --workload randwrite \
      --target amberfs:direct --target amberfs:amber --target amberfs:amber,amber_zone_max=0 \
      --io-size "$size" --reps 5 --warmup 1 --duration 400ms --threads 1 --file-size 32M \
      --fsync every --pool-size 512M --seed 42 \
      --json "$out/randwrite-$size-$emu.json" > "$out/randwrite-$size-$emu.txt"
  done
done
