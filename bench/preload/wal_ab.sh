#!/usr/bin/env bash
# A/B of two builds on SQLite's WAL under the interposer
# (tests/preload/dbs.c sqlite-bench: one-row transactions,
# synchronous=FULL), REPS rounds alternating the builds, each run on a
# fresh pool made by its own build's mkfs (a build may refuse a newer
# one's format), then each build's median. Used for amber's WAL route
# (BENCHMARKS, "Mapped files (issue 31)"). Build each tree with
# `cargo build --release -p amber-cli -p amber-ffi-preload` and pass its
# target/release directory.
#
#   bash bench/preload/wal_ab.sh OLD_DIR NEW_DIR [REPS] [TXS]
#   (PRESET=pcm for the pcm emulator; default dram)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)
reps=${3:-9} txs=${4:-10000}
for d in "$old" "$new"; do
    [ -x "$d/amberfs" ] && [ -f "$d/libamberfs_preload.so" ] || {
        echo "$d: needs amberfs and libamberfs_preload.so"; exit 1; }
done
work=$(mktemp -d /tmp/wal-ab.XXXXXX)
pool=/dev/shm/wal-ab.pool
trap 'rm -rf "$work" "$pool"' EXIT
cc -O2 -o "$work/dbs" "$top/tests/preload/dbs.c" -lsqlite3 -llmdb
mkdir -p "$work/m"
for rep in $(seq 1 "$reps"); do
    for build in old new; do
        d=$old
        [ "$build" = new ] && d=$new
        rm -f "$pool"
        "$d/amberfs" mkfs "$pool" --size 3G >/dev/null
        AMBERFS_POOL=$pool AMBERFS_MOUNT=$work/m AMBERFS_EMULATE=${PRESET:-dram} \
            LD_PRELOAD=$d/libamberfs_preload.so "$work/dbs" sqlite-bench "$work/m/w.db" "$txs" |
            sed "s/^/$build /"
    done
done | tee "$work/runs.txt"
for build in old new; do
    grep "^$build " "$work/runs.txt" | awk '{print $2}' | sort -n |
        awk -v b="$build" '{x[NR] = $1} END {print b, "median", x[int((NR + 1) / 2)], "tx/s of", NR}'
done
