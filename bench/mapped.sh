#!/usr/bin/env bash
# Issue 31's measurement in one run: SQLite in WAL mode (100,000 one-row
# transactions, synchronous=FULL) and LMDB (10,000 puts, each its own
# synced commit) on the LD_PRELOAD interposer (the default policy, amber,
# and `direct`, whose writes go in place and are not atomic), the FUSE
# mount and ext4 on a RAM-backed loop device, targets interleaved; and
# fsync and msync of a written mapping, and sequential reads of a
# mapped 1 GiB file against memcpy from the pool's own mapping, in one
# process under the interposer. Under each emulator preset, medians of
# REPS repetitions. Needs root (loop device, mounts), /dev/fuse, cc,
# libsqlite3-dev, liblmdb-dev, mkfs.ext4.
#
#   bash bench/mapped.sh [BIN_DIR] [REPS] [PRESETS]
#   (defaults: target/release 5 "dram pcm"; QUICK=1: a sanity run;
#   TXS=N, PUTS=N: transactions and puts per run)
#
# Writes the raw lines and PRESET.table.md under $OUT (default
# docs/results/mapped) and prints the tables.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
presets=${3:-dram pcm}
out=${OUT:-$top/docs/results/mapped}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
[ -x "$amberfs" ] && [ -f "$lib" ] || {
    echo "build first: cargo build --release -p amber-cli -p amber-ffi-preload -p amber-ffi-served"; exit 1; }
for f in /usr/include/sqlite3.h /usr/include/lmdb.h; do
    [ -f "$f" ] || { echo "needs $f (apt-get install libsqlite3-dev liblmdb-dev)"; exit 1; }
done
# SQLite's WAL reaches its steady state (frames overwritten in place
# after each 1,000-page checkpoint) only after its first 1,000 appends: a
# run of 10,000 was a tenth appends, and ~50 ms under the interposer,
# short enough for one stall of this host to move it by a quarter.
txs=${TXS:-100000} puts=${PUTS:-10000} mib=1024
if [ "${QUICK:-0}" = 1 ]; then
    txs=1000 puts=1000 mib=64 reps=1
fi
mkdir -p "$out"
work=$(mktemp -d /tmp/mapped-bench.XXXXXX)
ip_pool=/dev/shm/mapped-bench-ip.pool fuse_pool=/dev/shm/mapped-bench-fuse.pool
direct_pool=/dev/shm/mapped-bench-direct.pool
img=/dev/shm/mapped-bench-ext4.img
loopdev=""
cleanup() {
    "$amberfs" umount "$work/fuse" >/dev/null 2>&1 || umount -l "$work/fuse" 2>/dev/null || true
    umount "$work/ext4" 2>/dev/null || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    rm -f "$ip_pool" "$fuse_pool" "$direct_pool" "$img"
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/ip" "$work/direct" "$work/fuse" "$work/ext4"
truncate -s 4G "$img"
loopdev=$(losetup -f --show "$img")
mkfs.ext4 -q "$loopdev"
mount "$loopdev" "$work/ext4"
cc -O2 -o "$work/dbs" "$top/tests/preload/dbs.c" -lsqlite3 -llmdb
cc -O2 -o "$work/read" "$top/bench/mapped/read.c"

# Runs "$@" on target $t: the interposer serving $work/ip (amber) or
# $work/direct (policy direct), else plainly.
on() {
    local t=$1; shift
    case $t in
        interposer) AMBERFS_POOL=$ip_pool AMBERFS_MOUNT=$work/ip AMBERFS_EMULATE=$preset LD_PRELOAD=$lib "$@" ;;
        direct) AMBERFS_POOL=$direct_pool AMBERFS_MOUNT=$work/direct AMBERFS_OPTIONS=policy=direct \
            AMBERFS_EMULATE=$preset LD_PRELOAD=$lib "$@" ;;
        *) "$@" ;;
    esac
}
dir_of() { echo "$work/$([ "$1" = interposer ] && echo ip || echo "$1")"; }
fresh_pools() {
    "$amberfs" umount "$work/fuse" >/dev/null 2>&1 || true
    rm -f "$ip_pool" "$fuse_pool" "$direct_pool"
    "$amberfs" mkfs "$ip_pool" --size 3G >/dev/null
    "$amberfs" mkfs "$direct_pool" --size 3G --layout classic >/dev/null
    "$amberfs" mkfs "$fuse_pool" --size 3G >/dev/null
    "$amberfs" --emulate "$preset" mount "$fuse_pool" "$work/fuse" --log "$work/fuse.log" >/dev/null
}

# Each run times itself from its first transaction to its last, so
# neither the process's start nor the interposer opening the pool is in
# the figure.
db_runs() {
    for rep in $(seq 1 "$reps"); do
        for t in interposer direct fuse ext4; do
            local d; d=$(dir_of "$t")
            on "$t" "$work/dbs" sqlite-bench "$d/wal-$rep.db" "$txs" | sed "s/^/$t sqlite /"
            on "$t" "$work/dbs" lmdb-bench "$d/lmdb-$rep" "$puts" | sed "s/^/$t lmdb /"
            on "$t" rm -rf "$d/wal-$rep.db" "$d/wal-$rep.db-wal" "$d/wal-$rep.db-shm" "$d/lmdb-$rep"
        done
    done > "$out/$preset.dbs.txt"
}

read_runs() {
    on interposer "$work/read" make "$work/ip/big" "$mib"
    on interposer "$work/read" read "$ip_pool" "$work/ip/big" "$mib" "$reps" > "$out/$preset.read.txt"
    on interposer rm -f "$work/ip/big"
    on interposer "$work/read" sync "$work/ip/synced" "$mib" "$reps" > "$out/$preset.sync.txt"
}

for preset in $presets; do
    echo "== $preset"
    rm -f "$out/$preset".*
    fresh_pools
    db_runs
    read_runs
    "$amberfs" umount "$work/fuse" >/dev/null
    python3 "$top/bench/mapped/report.py" "$out" "$preset" "bash bench/mapped.sh $*" "$txs" "$puts" "$mib" \
        > "$out/$preset.table.md"
    cat "$out/$preset.table.md"
done
echo "results in $out"
