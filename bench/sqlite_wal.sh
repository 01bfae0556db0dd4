#!/usr/bin/env bash
# SQLite in WAL mode (tests/preload/dbs.c sqlite-bench: one-row
# transactions, synchronous=FULL) on an Amber mount, by a preloaded
# process writing under a write lease ("preloaded"), by the same program
# without the preload ("mount"), by the single-process interposer on a
# pool of its own with no mount ("single") and on ext4 over a RAM-backed
# loop device ("ext4"); a fresh database each run, targets interleaved,
# medians of REPS rounds (transactions a second).
#
#   bash bench/sqlite_wal.sh [BIN_DIR] [REPS] [TXS]
#   (defaults: target/release 5 5000)
#
# Needs root, /dev/fuse, mkfs.ext4, cc, libsqlite3-dev and liblmdb-dev.
# Prints a Markdown table and the mount's lease counters; raw lines in
# $OUT (default docs/results/sqlite-wal).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
txs=${3:-5000}
out=${OUT:-$top/docs/results/sqlite-wal}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
mkdir -p "$out"
single_pool=/dev/shm/sqlite-wal-single-$$.pool
bench_cleanup() { rm -f "$single_pool"; }
source "$top/bench/lib/amber_and_ext4.sh"
amber_and_ext4 sqlite-wal-bench 2G
mkdir -p "$work/single"
"$amberfs" mkfs "$single_pool" --size 2G >/dev/null
cc -O2 -o "$work/dbs" "$top/tests/preload/dbs.c" -lsqlite3 -llmdb
: > "$out/runs.txt"
for r in $(seq "$reps"); do
    for t in preloaded mount single ext4; do
        pre=() dir=$work/amber
        case $t in
        preloaded) pre=(env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber") ;;
        single)
            pre=(env LD_PRELOAD="$lib" AMBERFS_POOL="$single_pool" AMBERFS_MOUNT="$work/single")
            dir=$work/single
            ;;
        ext4) dir=$work/ext4 ;;
        esac
        echo "$t $("${pre[@]}" "$work/dbs" sqlite-bench "$dir/w-$r.db" "$txs")" >> "$out/runs.txt"
        "${pre[@]}" rm -f "$dir/w-$r.db" "$dir/w-$r.db-wal" "$dir/w-$r.db-shm"
    done
done
"$amberfs" stats "$work/amber" | grep -E '^leases\.' > "$out/counters.txt"
python3 - "$out/runs.txt" "$reps" "$txs" <<'PY' | tee "$out/table.md"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, v = line.split()[:2]
    runs.setdefault(t, []).append(float(v))
m = {t: statistics.median(v) for t, v in runs.items()}
print(f"`bash bench/sqlite_wal.sh target/release {sys.argv[2]} {sys.argv[3]}`, "
      f"medians of {sys.argv[2]} rounds, transactions a second:\n")
print("| preloaded (mount up) | mount | single-process interposer | ext4 (RAM loop) "
      "| preloaded / mount | preloaded / single | preloaded / ext4 |")
print("|---|---|---|---|---|---|---|")
p = m["preloaded"]
print(f"| {p:,.0f} | {m['mount']:,.0f} | {m['single']:,.0f} | {m['ext4']:,.0f} "
      f"| {p / m['mount']:.2f}x | {p / m['single']:.2f}x | {p / m['ext4']:.2f}x |")
PY
cat "$out/counters.txt"
