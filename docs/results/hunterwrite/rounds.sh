#!/usr/bin/env bash
# Issue 18 point 4: the 4 KiB command with 41 repetitions, six
# rounds alternating a build before a change ($1) and after it ($2),
# outputs to $3 (at-ac77fee: 7b508d5 against ac77fee; at-9b8f207:
# 39c1f8e against 9b8f207), because one run's median moves by up to
# +-0.1 between runs (rsd 5-15% a run: 256 MiB at 9 GB/s is 28 ms a
# repetition). About 3 minutes.
set -euo pipefail
before=$1 after=$2 out=$3
mkdir -p "$out"
for r in 1 2 3 4 5 6; do
  for which in before after; do
    bin=${!which}
    "$bin" --emulate dram bench --quiet compare --workload populate --file-size 256M \
      --pool-size 700M --io-size 4K --threads 1,2 --target bare --target amberfs:hunter \
      --reps 41 --warmup 3 --seed 42 > "$out/round$r-$which-4K.txt"
  done
done
