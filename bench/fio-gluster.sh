#!/usr/bin/env bash
# fio through the Gluster client on a replica-3 volume whose bricks are
# three Amber mounts, beside one whose bricks are three ext4 file systems
# on RAM-backed loop devices, in one run, interleaved, medians of REPS
# repetitions (issue 33, point 5). Needs root, /dev/fuse, glusterfs-server
# and glusterfs-client, fio (installed if missing).
#
#   bash bench/fio-gluster.sh [AMBERFS] [REPS] [RUNTIME_SECONDS]
#
# Prints a Markdown table and writes the raw fio JSON under $OUT
# (default docs/results/fio-gluster).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
amberfs=${1:-$top/target/release/amberfs}
reps=${2:-3}
runtime=${3:-10}
out=${OUT:-$top/docs/results/fio-gluster}
[ "$(id -u)" = 0 ] || { echo "needs root (loop devices, mounts)"; exit 1; }
need=()
command -v fio >/dev/null || need+=(fio)
command -v glusterd >/dev/null || need+=(glusterfs-server glusterfs-client)
[ ${#need[@]} -eq 0 ] || { apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need[@]}" >/dev/null; }
ip=$(hostname -I | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.')
mkdir -p "$out"
work=$(mktemp -d /tmp/fio-gluster.XXXXXX)
started_glusterd=""
cleanup() {
    set +e
    for t in amber ext4; do
        umount -l "$work/$t/client" 2>/dev/null
        gluster --mode=script volume stop "fio$t$$" force >/dev/null 2>&1
        gluster --mode=script volume delete "fio$t$$" >/dev/null 2>&1
    done
    for i in 1 2 3; do
        "$amberfs" umount "$work/amber/b$i" >/dev/null 2>&1
        umount "$work/ext4/b$i" 2>/dev/null
        rm -f "/dev/shm/fio-gluster-$i.pool" "/dev/shm/fio-gluster-$i.img"
    done
    [ -n "$started_glusterd" ] && pkill -x glusterd
    rm -rf "$work"
}
trap cleanup EXIT
if ! pgrep -x glusterd >/dev/null; then
    glusterd --log-file="$work/glusterd.log"
    started_glusterd=1
    for _ in $(seq 1 100); do gluster pool list >/dev/null 2>&1 && break; sleep 0.1; done
fi

# Three bricks of each kind, a volume on each trio, its client mounted.
for i in 1 2 3; do
    mkdir -p "$work/amber/b$i" "$work/ext4/b$i"
    "$amberfs" mkfs "/dev/shm/fio-gluster-$i.pool" --size 2G >/dev/null
    "$amberfs" mount "/dev/shm/fio-gluster-$i.pool" "$work/amber/b$i" --log "$work/amber$i.log" >/dev/null
    truncate -s 2G "/dev/shm/fio-gluster-$i.img"
    mkfs.ext4 -q -F "/dev/shm/fio-gluster-$i.img"
    mount -o loop "/dev/shm/fio-gluster-$i.img" "$work/ext4/b$i"
done
for t in amber ext4; do
    bricks=()
    for i in 1 2 3; do mkdir "$work/$t/b$i/brick"; bricks+=("$ip:$work/$t/b$i/brick"); done
    gluster --mode=script volume create "fio$t$$" replica 3 "${bricks[@]}" force >/dev/null
    gluster --mode=script volume start "fio$t$$" >/dev/null
    mkdir -p "$work/$t/client"
    mount -t glusterfs "$ip:/fio$t$$" "$work/$t/client"
    for _ in $(seq 1 300); do
        mkdir "$work/$t/client/.probe" 2>/dev/null && rmdir "$work/$t/client/.probe" && break
        sleep 0.1
    done
done

# name | fio arguments
jobs=(
  "seq-write-1m|--rw=write --bs=1M --size=256M --end_fsync=1"
  "rand-write-4k-fsync|--rw=randwrite --bs=4k --size=32M --fsync=1 --time_based --runtime=$runtime"
)
for rep in $(seq 1 "$reps"); do
  for job in "${jobs[@]}"; do
    name=${job%%|*}; args=${job#*|}
    for t in amber ext4; do
      # shellcheck disable=SC2086
      fio --name="$name" --directory="$work/$t/client" --ioengine=psync $args \
          --output-format=json --output="$out/$name.$t.$rep.json" >/dev/null
      rm -f "$work/$t/client/$name".*
    done
  done
done

python3 "$top/bench/fio_table.py" "$out" "$reps" seq-write-1m,rand-write-4k-fsync amber,ext4
