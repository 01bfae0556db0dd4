#!/usr/bin/env bash
# Issue 16's measurement in one run: fio (psync, one job as a thread) on
# the LD_PRELOAD interposer, the FUSE mount, ext4 on a RAM-backed loop
# device and tmpfs, and the library (`bench compare`) on the same fsync'd
# random writes; SQLite (10,000 one-row transactions with
# synchronous=FULL, 1,000,000 rows in one transaction) on the interposer,
# the mount and ext4; the interposer's own cost per call. Under each
# emulator preset, targets interleaved, medians of REPS repetitions.
# Needs root (loop device, mounts), /dev/fuse, fio, sqlite3, cc.
#
#   bash bench/preload.sh [BIN_DIR] [REPS] [RUNTIME_SECONDS] [PRESETS]
#   (defaults: target/release 3 10 "dram pcm"; QUICK=1: small files, a
#   sanity run of a minute or two, not for the record)
#
# Writes raw fio JSON, timings and results-PRESET.json (the format
# `amberfs bench plot` reads) under $OUT (default docs/results/preload),
# plots to docs/plots/preload-PRESET.{svg,png}, and prints Markdown tables.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-3}
runtime=${3:-10}
presets=${4:-dram pcm}
out=${OUT:-$top/docs/results/preload}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
[ -x "$amberfs" ] && [ -f "$lib" ] && [ -f "$bin/libamberfs.so" ] || {
    echo "build first: cargo build --release -p amber-cli -p amber-ffi -p amber-ffi-preload -p amber-ffi-served"; exit 1; }
for tool in fio sqlite3 cc mkfs.ext4; do
    command -v $tool >/dev/null || { echo "needs $tool (apt-get install fio sqlite3 gcc e2fsprogs)"; exit 1; }
done
seq_size=512M read_size=512M rows=1000000 txs=10000
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
    seq_size=32M read_size=32M rows=100000 txs=1000 reps=1 runtime=2
fi
mkdir -p "$out" "$top/docs/plots"
work=$(mktemp -d /tmp/preload-bench.XXXXXX)
ip_pool=/dev/shm/preload-bench-ip.pool fuse_pool=/dev/shm/preload-bench-fuse.pool
lib_pool=/dev/shm/preload-bench-lib.pool img=/dev/shm/preload-bench-ext4.img
loopdev=""
cleanup() {
    "$amberfs" umount "$work/fuse" >/dev/null 2>&1 || umount -l "$work/fuse" 2>/dev/null || true
    umount "$work/ext4" 2>/dev/null || true
    umount "$work/tmpfs" 2>/dev/null || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    rm -f "$ip_pool" "$fuse_pool" "$lib_pool" "$img"
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/ip" "$work/fuse" "$work/ext4" "$work/tmpfs"
truncate -s 4G "$img"
loopdev=$(losetup -f --show "$img")
mkfs.ext4 -q "$loopdev"
mount "$loopdev" "$work/ext4"
mount -t tmpfs -o size=4G tmpfs "$work/tmpfs"
cc -O2 -pthread -I "$top/crates/amber-ffi/include" -o "$work/overhead" "$top/bench/preload/overhead.c" \
    -L "$bin" -lamberfs -Wl,-rpath,"$bin"

# Runs "$@" on target $t: the interposer serving $work/ip, else plainly.
on() {
    local t=$1; shift
    if [ "$t" = interposer ]; then
        AMBERFS_POOL=$ip_pool AMBERFS_MOUNT=$work/ip AMBERFS_EMULATE=$preset LD_PRELOAD=$lib "$@"
    else
        "$@"
    fi
}
dir_of() { echo "$work/$([ "$1" = interposer ] && echo ip || echo "$1")"; }
fresh_pools() {
    "$amberfs" umount "$work/fuse" >/dev/null 2>&1 || true
    rm -f "$ip_pool" "$fuse_pool"
    "$amberfs" mkfs "$ip_pool" --size 3G >/dev/null
    "$amberfs" mkfs "$fuse_pool" --size 3G >/dev/null
    "$amberfs" --emulate "$preset" mount "$fuse_pool" "$work/fuse" --log "$work/fuse.log" >/dev/null
}

jobs=(
  "seq-write-4k|--rw=write --bs=4k --size=$seq_size --end_fsync=1"
  "rand-write-4k-fsync|--rw=randwrite --bs=4k --size=64M --fsync=1 --time_based --runtime=$runtime"
  "rand-overwrite-128b-fsync|--rw=randwrite --bs=128 --size=64M --fsync=1 --overwrite=1 --time_based --runtime=$runtime"
  "rand-read-4k|--rw=randread --bs=4k --size=$read_size --time_based --runtime=$runtime"
)
targets=(interposer fuse ext4 tmpfs)

fio_runs() {
    for rep in $(seq 1 "$reps"); do
        for job in "${jobs[@]}"; do
            local name=${job%%|*} args=${job#*|}
            for t in "${targets[@]}"; do
                sync; echo 3 > /proc/sys/vm/drop_caches
                # shellcheck disable=SC2086
                on "$t" fio --name="$name" --directory="$(dir_of "$t")" --thread --ioengine=psync $args \
                    --output-format=json --output="$out/$preset.$name.$t.$rep.json" >/dev/null
                on "$t" rm -f "$(dir_of "$t")/$name".*
            done
        done
    done
}

library_runs() {
    for size in 128 4096; do
        "$amberfs" --emulate "$preset" bench --quiet compare --workload randwrite \
            --target amberfs:amber --target "dir:$work/tmpfs" --io-size $size --fsync every \
            --file-size 64M --threads 1 --reps "$reps" --duration "${runtime}s" --pool-size 2G \
            --json "$out/$preset.library-$size.json" > "$out/$preset.library-$size.txt"
    done
}

# SQLite's own clock brackets each workload, so neither the process's
# start nor the interposer opening the pool (at the database's open) is
# timed: seconds since the epoch, to the millisecond.
sqlite_runs() {
    local now="SELECT '%s', (julianday('now') - 2440587.5) * 86400.0;"
    {
        echo "PRAGMA synchronous=FULL; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
        printf "$now\n" tx0
        for i in $(seq 1 "$txs"); do echo "INSERT INTO t(v) VALUES ('row $i');"; done
        printf "$now\n" tx1
        echo "CREATE TABLE b(id INTEGER PRIMARY KEY, v TEXT);"
        printf "$now\n" bulk0
        echo "BEGIN; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $rows)"
        echo "INSERT INTO b SELECT x, 'row ' || x FROM c; COMMIT;"
        printf "$now\n" bulk1
    } > "$work/sqlite.sql"
    for rep in $(seq 1 "$reps"); do
        for t in interposer fuse ext4; do
            local db; db=$(dir_of "$t")/bench.db
            on "$t" rm -f "$db" "$db-journal"
            on "$t" sqlite3 "$db" < "$work/sqlite.sql" | sed "s/^/$t $rep /" >> "$out/$preset.sqlite.txt"
            on "$t" rm -f "$db" "$db-journal"
        done
    done
}

overhead_runs() {
    local n=200000 f="$work/tmpfs/overhead.bin"
    rm -f "$lib_pool"; "$amberfs" mkfs "$lib_pool" --size 256M >/dev/null
    for rep in $(seq 1 "$reps"); do
        on interposer "$work/overhead" served "$work/ip/overhead.bin" $n
        AMBERFS_EMULATE=$preset "$work/overhead" library "$lib_pool" $n
        "$work/overhead" kernel "$f" $n | sed 's/^/plain_/'
        "$work/overhead" kernel-mt "$f" $n | sed 's/^/threaded_/'
        on interposer "$work/overhead" kernel "$f" $n | sed 's/^/idle_/'
        on interposer "$work/overhead" kernel "$f" $n "$work/ip" | sed 's/^/preloaded_/'
    done > "$out/$preset.overhead.txt"
}

# fio's own work per I/O is most of the gap between fio on the interposer
# and `bench compare` on the library: the same C loop of fsync'd random
# writes on every path measures the interposer against the library alone.
same_loop_runs() {
    local n=$((QUICK ? 2000 : 20000))
    for rep in $(seq 1 "$reps"); do
        for size in 128 4096; do
            rm -f "$lib_pool"; "$amberfs" mkfs "$lib_pool" --size 256M >/dev/null
            AMBERFS_EMULATE=$preset "$work/overhead" library-write "$lib_pool" $n $size
            for t in interposer fuse ext4 tmpfs; do
                on "$t" "$work/overhead" write "$(dir_of "$t")/loop.bin" $n $size | sed "s/^/${t}_/"
                on "$t" rm -f "$(dir_of "$t")/loop.bin"
            done
        done
    done > "$out/$preset.loop.txt"
}

for preset in $presets; do
    echo "== $preset"
    rm -f "$out/$preset".*
    fresh_pools
    fio_runs
    library_runs
    fresh_pools
    sqlite_runs
    overhead_runs
    same_loop_runs
    "$amberfs" umount "$work/fuse" >/dev/null
    python3 "$top/bench/preload/report.py" "$out" "$preset" "$reps" "bash bench/preload.sh $*" \
        "$txs" "$rows" > "$out/$preset.table.md"
    cat "$out/$preset.table.md"
    "$amberfs" bench plot --input "$out/results-$preset.json" --kind bars --baseline ext4 \
        --metric throughput --title "fio psync, 1 job, $preset: ops/s over ext4 on a RAM loop" \
        --out "$top/docs/plots/preload-$preset" >/dev/null
done
echo "results in $out, plots in docs/plots/preload-*"
