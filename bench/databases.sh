#!/usr/bin/env bash
# Embedded databases on an Amber mount, by a preloaded process writing
# under write leases ("preloaded"), by the same program without the
# preload ("mount"), by the single-process interposer on a pool of its
# own with no mount ("single") and on ext4 over a RAM-backed loop device
# ("ext4"); a fresh database each run, targets interleaved, medians of
# REPS rounds, operations a second:
#
#   sqlite   SQLite in WAL mode, one-row transactions, synchronous=FULL
#            (tests/preload/dbs.c sqlite-bench)
#   lmdb     LMDB, one put per synced commit (dbs.c lmdb-bench)
#   leveldb  LevelDB, 20,000 puts across flushes and compactions
#            (tests/preload/leveldb.cc write; puts a second)
#
#   bash bench/databases.sh [BIN_DIR] [REPS] [TXS]
#   (defaults: target/release 5 5000; TXS for sqlite and lmdb)
#
# Needs root, /dev/fuse, mkfs.ext4, cc, g++, libsqlite3-dev, liblmdb-dev
# and libleveldb-dev. Prints a Markdown table and the mount's lease
# counters, and draws the table relative to the plain mount
# ($OUT/plot.svg and .png); raw lines in $OUT (default
# docs/results/databases).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
txs=${3:-5000}
out=${OUT:-$top/docs/results/databases}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
mkdir -p "$out"
single_pool=/dev/shm/databases-single-$$.pool
bench_cleanup() { rm -f "$single_pool"; }
source "$top/bench/lib/amber_and_ext4.sh"
amber_and_ext4 databases-bench 2G
mkdir -p "$work/single"
"$amberfs" mkfs "$single_pool" --size 2G >/dev/null
cc -O2 -o "$work/dbs" "$top/tests/preload/dbs.c" -lsqlite3 -llmdb
g++ -O2 -o "$work/leveldb" "$top/tests/preload/leveldb.cc" -lleveldb

# Ops a second of database job $1 at path $2, run with "${pre[@]}".
job() {
    local s e
    case $1 in
    sqlite) "${pre[@]}" "$work/dbs" sqlite-bench "$2" "$txs" | cut -d' ' -f1 ;;
    lmdb) "${pre[@]}" mkdir -p "$2" && "${pre[@]}" "$work/dbs" lmdb-bench "$2" "$txs" | cut -d' ' -f1 ;;
    leveldb)
        s=$(date +%s.%N)
        "${pre[@]}" "$work/leveldb" "$2" write 20000 >/dev/null
        e=$(date +%s.%N)
        python3 -c "print(f'{20000 / ($e - $s):.0f}')"
        ;;
    esac
}

: > "$out/runs.txt"
for r in $(seq "$reps"); do
    for db in sqlite lmdb leveldb; do
        for t in preloaded mount single ext4; do
            pre=(env) dir=$work/amber
            case $t in
            preloaded) pre=(env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber") ;;
            single)
                pre=(env LD_PRELOAD="$lib" AMBERFS_POOL="$single_pool" AMBERFS_MOUNT="$work/single")
                dir=$work/single
                ;;
            ext4) dir=$work/ext4 ;;
            esac
            echo "$db $t $(job "$db" "$dir/$db-$r")" >> "$out/runs.txt"
            "${pre[@]}" rm -rf "$dir/$db-$r" "$dir/$db-$r-wal" "$dir/$db-$r-shm"
        done
    done
done
"$amberfs" stats "$work/amber" | grep -E '^leases\.' > "$out/counters.txt"
python3 - "$out/runs.txt" "$reps" "$txs" <<'PY' | tee "$out/table.md"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    db, t, v = line.split()[:3]
    runs.setdefault((db, t), []).append(float(v))
m = {k: statistics.median(v) for k, v in runs.items()}
print(f"`bash bench/databases.sh target/release {sys.argv[2]} {sys.argv[3]}`, "
      f"medians of {sys.argv[2]} rounds, operations a second:\n")
print("| database | preloaded (mount up) | mount | single-process interposer | ext4 (RAM loop) "
      "| preloaded / mount | preloaded / single | preloaded / ext4 |")
print("|---|---|---|---|---|---|---|---|")
for db in ("sqlite", "lmdb", "leveldb"):
    p, f, s, e = (m[(db, t)] for t in ("preloaded", "mount", "single", "ext4"))
    print(f"| {db} | {p:,.0f} | {f:,.0f} | {s:,.0f} | {e:,.0f} "
          f"| {p / f:.2f}x | {p / s:.2f}x | {p / e:.2f}x |")
PY
python3 "$top/bench/lib/plot_runs.py" "$out/runs.txt" "$amberfs" "$out/plot" --job-first \
    --title "SQLite, LMDB and LevelDB, operations a second relative to the plain mount" \
    --baseline mount --command "bash bench/databases.sh $*" \
    --label "sqlite=SQLite WAL" --label "lmdb=LMDB" --label "leveldb=LevelDB"
cat "$out/counters.txt"
