#!/usr/bin/env bash
# Issue 5's figures (HiNFS in Amber): `bench compare` runs, interleaved,
# medians of 3, written to $OUT (default docs/results/hinfs).
#
#   bash bench/hinfs-figures.sh [AMBERFS] [OUT_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
amberfs=${1:-$top/target/release/amberfs}
out=${2:-$top/docs/results/hinfs}
mkdir -p "$out"
common=(--reps 3 --ops 20000 --threads 1)
run() { # name, emulate, then bench compare arguments
    local name=$1 emulate=$2; shift 2
    "$amberfs" --emulate "$emulate" bench --quiet compare "$@" "${common[@]}" \
        --json "$out/$name.json" > "$out/$name.txt"
}

# hinfs against direct under pcm, the four workloads (paper's Figure 8).
for w in fileserver webproxy webserver varmail; do
    run "$w-pcm" pcm --workload $w --target amberfs:direct --target amberfs:hinfs
done
# fsync-heavy: hinfs against hinfs-wb (every write buffered).
run varmail-wb pcm --workload varmail --target amberfs:hinfs-wb --target amberfs:hinfs
run randwrite-fsync4-wb pcm --workload randwrite --io-size 4K --fsync 4 \
    --target amberfs:hinfs-wb --target amberfs:hinfs
# 1 KiB unaligned writes: cache-line against whole-block fetch/write-back (Figure 10).
run fileserver-1k-nclfw pcm --workload fileserver --io-size 1000 --append-size 1000 \
    --target amberfs:hinfs-nclfw --target amberfs:hinfs
# Sensitivity to the emulated write latency (Figure 12), and plain DRAM.
for lat in 0 50 100 200 400 800; do
    run "fileserver-lat$lat" "lat=${lat}ns,per=line,bw=1GB/s" --workload fileserver \
        --target amberfs:direct --target amberfs:hinfs
done
run fileserver-dram dram --workload fileserver --target amberfs:direct --target amberfs:hinfs
# Buffer size from 10% to 100% of fileserver's ~250 MiB working set (Figure 11).
run fileserver-buffer pcm --workload fileserver --target amberfs:direct \
    --target amberfs:hinfs,buffer=25M --target amberfs:hinfs,buffer=50M \
    --target amberfs:hinfs,buffer=125M --target amberfs:hinfs,buffer=250M
echo "results in $out"
