#!/usr/bin/env bash
# Map leases (issue 32 point 3, design.md §17.14): the first pass over a
# mapped file on an Amber mount — mmap, a load from each page, a store to
# each page, msync — and how much page cache the loads filled, by a
# preloaded process, whose mapping shows the pool's own pages, against
# the same program without the preload, whose mapping is the kernel's
# page cache filled through FUSE. A fresh file each round, written
# through the kernel (so no page is cached) in 1 MiB writes (`dd`, its
# blocks in long runs) or in 8 KiB ones (`head -c`, in many more runs:
# each run is a mapping of its own in the preloaded process), targets
# interleaved, medians of REPS rounds.
#
#   bash bench/map_leases.sh [BIN_DIR] [REPS] [MIB]
#   (defaults: target/release 5 64)
#
# Needs root, /dev/fuse, cc. Prints a Markdown table; raw lines in $OUT
# (default docs/results/map-leases).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
mib=${3:-64}
out=${OUT:-$top/docs/results/map-leases}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (mounts)"; exit 1; }
mkdir -p "$out"
touch_bin=$(mktemp /tmp/map-touch.XXXXXX)
cc -O2 -o "$touch_bin" "$top/bench/map_leases/touch.c"
work=$(mktemp -d /tmp/map-leases.XXXXXX)
chmod 0755 "$work"
pool=/dev/shm/map-leases-$$.pool
cleanup() {
    "$amberfs" umount "$work/m" >/dev/null 2>&1 || umount -l "$work/m" 2>/dev/null || true
    rm -rf "$work" "$pool" "$touch_bin"
}
trap cleanup EXIT
mkdir -p "$work/m"
"$amberfs" mkfs "$pool" --size 2G >/dev/null
"$amberfs" mount "$pool" "$work/m" --log "$work/daemon.log" >/dev/null
preload=(env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/m")
: > "$out/runs.txt"
for r in $(seq "$reps"); do
    for w in 1M 8K; do
        for t in plain preloaded; do
            f=$work/m/f.$r.$t
            if [ "$w" = 1M ]; then
                dd if=/dev/urandom of="$f" bs=1M count="$mib" status=none
            else
                head -c "${mib}M" /dev/urandom > "$f"
            fi
            pre=()
            [ "$t" = preloaded ] && pre=("${preload[@]}")
            echo "$w $t $("${pre[@]}" "$touch_bin" "$f" "$mib")" >> "$out/runs.txt"
            rm -f "$f"
        done
    done
done
"$amberfs" stats "$work/m" | grep -E '^leases\.' > "$out/counters.txt"
python3 - "$out/runs.txt" "$mib" "$reps" <<'PY' | tee "$out/table.md"
import statistics, sys
runs, mib, reps = sys.argv[1], int(sys.argv[2]), sys.argv[3]
got = {}
for line in open(runs):
    w, t, *vals = line.split()
    got.setdefault((w, t), []).append([float(v) for v in vals[:5]])
med = {k: [statistics.median(x[i] for x in v) for i in range(5)] for k, v in got.items()}
print(f"`bash bench/map_leases.sh target/release {reps} {mib}`, {mib * 256:,} pages, medians of {reps} rounds:")
print()
print("| first pass over a mapped file | 1 MiB writes: plain mount | preloaded | 8 KiB writes: plain mount | preloaded |")
print("|---|---|---|---|---|")
rows = ["mmap (ms)", "a load from each page (ms)", "a store to each page (ms)",
        "msync MS_SYNC (ms)", "page cache the loads filled (MiB)"]
for i, what in enumerate(rows):
    cells = [f"{med[(w, t)][i]:.1f}" for w in ("1M", "8K") for t in ("plain", "preloaded")]
    print(f"| {what} | " + " | ".join(cells) + " |")
PY
