#!/usr/bin/env bash
# The workbench figures of BENCHMARKS.md (issue 4), in one script: the
# iozone matrix and the four filebench-like workloads, on Amber `direct`
# under `dram` and `pcm` beside tmpfs and ext4 on a RAM-backed loop device.
# Needs root (loop device, mounts).
#
#   bash bench/workbench-figures.sh [AMBERFS] [OUT_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
amberfs=${1:-$top/target/release/amberfs}
out=${2:-$top/docs/results/workbench}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices, mounts)"; exit 1; }
mkdir -p "$out"
work=$(mktemp -d /tmp/workbench.XXXXXX)
loopdev=""
cleanup() {
    umount "$work/ext4" 2>/dev/null || true
    umount "$work/tmpfs" 2>/dev/null || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    rm -f /dev/shm/workbench-ext4.img
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/ext4" "$work/tmpfs"
truncate -s 4G /dev/shm/workbench-ext4.img
loopdev=$(losetup -f --show /dev/shm/workbench-ext4.img)
mkfs.ext4 -q "$loopdev"
mount "$loopdev" "$work/ext4"
mount -t tmpfs -o size=4G tmpfs "$work/tmpfs"
dirs=(--target "dir:$work/tmpfs" --target "dir:$work/ext4")

# iozone: a reduced matrix (every test, three file sizes, three record
# sizes), POSIX read/write on the kernel file systems, the library on Amber.
for preset in dram pcm; do
    "$amberfs" --emulate $preset bench --quiet iozone --target amberfs:direct "${dirs[@]}" \
        --file-sizes 1M,16M,64M --record-sizes 4K,64K,1M --trials 3 \
        --json "$out/iozone-$preset.json" --csv "$out/iozone-$preset.csv" > "$out/iozone-$preset.txt"
done

# msync against CPU flushes on an mmap'd file (NVMFS-IOzone), on tmpfs.
"$amberfs" bench --quiet iozone --target "dir:$work/tmpfs" --mode mmap-msync,mmap-flush,loadstore,nt \
    --file-sizes 64M --record-sizes 4K,64K --tests write,rewrite,random-write,read --trials 3 \
    --json "$out/iozone-mmap.json" > "$out/iozone-mmap.txt"

# The four filebench-like workloads, 1 and 2 threads, interleaved.
for preset in dram pcm; do
    for w in fileserver webserver webproxy varmail; do
        "$amberfs" --emulate $preset bench --quiet compare --workload $w \
            --target amberfs:direct "${dirs[@]}" --threads 1,2 --reps 3 --ops 20000 \
            --json "$out/$w-$preset.json" > "$out/$w-$preset.txt"
    done
done
echo "results in $out"
