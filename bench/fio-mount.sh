#!/usr/bin/env bash
# fio through an Amber FUSE mount beside ext4 on a RAM-backed loop device
# and tmpfs, in one run, interleaved (amber, ext4, tmpfs, amber, ...),
# medians of REPS repetitions. Needs root, /dev/fuse, fio (Debian).
#
#   bash bench/fio-mount.sh [AMBERFS] [REPS] [RUNTIME_SECONDS] [EMULATE]
#
# Prints a Markdown table and writes the raw fio JSON under $OUT
# (default docs/results/fio-mount).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
amberfs=${1:-$top/target/release/amberfs}
reps=${2:-3}
runtime=${3:-10}
emulate=${4:-}
out=${OUT:-$top/docs/results/fio-mount}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices, mounts)"; exit 1; }
command -v fio >/dev/null || { apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 fio >/dev/null; }
mkdir -p "$out"
work=$(mktemp -d /tmp/fio-mount.XXXXXX)
loopdev=""
cleanup() {
    "$amberfs" umount "$work/amber" >/dev/null 2>&1 || umount -l "$work/amber" 2>/dev/null || true
    umount "$work/ext4" 2>/dev/null || true
    umount "$work/tmpfs" 2>/dev/null || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    rm -f /dev/shm/fio-amber.pool /dev/shm/fio-ext4.img
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/amber" "$work/ext4" "$work/tmpfs"

"$amberfs" mkfs /dev/shm/fio-amber.pool --size 3G >/dev/null
"$amberfs" mount /dev/shm/fio-amber.pool "$work/amber" ${emulate:+--emulate "$emulate"} --log "$work/amber.log"
truncate -s 3G /dev/shm/fio-ext4.img
loopdev=$(losetup -f --show /dev/shm/fio-ext4.img)
mkfs.ext4 -q "$loopdev"
mount "$loopdev" "$work/ext4"
mount -t tmpfs -o size=3G tmpfs "$work/tmpfs"

# name | fio arguments
jobs=(
  "seq-write-4k|--rw=write --bs=4k --size=512M --end_fsync=1"
  "rand-write-4k-fsync|--rw=randwrite --bs=4k --size=64M --fsync=1 --time_based --runtime=$runtime"
  "rand-overwrite-128b-fsync|--rw=randwrite --bs=128 --size=64M --fsync=1 --overwrite=1 --time_based --runtime=$runtime"
  "rand-read-4k|--rw=randread --bs=4k --size=512M --time_based --runtime=$runtime"
)
targets=(amber ext4 tmpfs)
for rep in $(seq 1 "$reps"); do
  for job in "${jobs[@]}"; do
    name=${job%%|*}; args=${job#*|}
    for t in "${targets[@]}"; do
      sync; echo 3 > /proc/sys/vm/drop_caches
      # shellcheck disable=SC2086
      fio --name="$name" --directory="$work/$t" --ioengine=psync $args \
          --output-format=json --output="$out/$name.$t.$rep.json" >/dev/null
      rm -f "$work/$t/$name".*
    done
  done
done

python3 "$top/bench/fio_table.py" "$out" "$reps" \
    seq-write-4k,rand-write-4k-fsync,rand-overwrite-128b-fsync,rand-read-4k amber,ext4,tmpfs
