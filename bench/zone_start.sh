#!/usr/bin/env bash
# What a single-process start costs after small overwrites (design.md
# §11.5): a preloaded fio makes 128 B random overwrites, each fsync'd, of
# a 256 MiB file on a fresh 2 GiB pool for SECONDS (the zone takes them),
# and exits, which unmounts; then three preloaded `stat`s of the file each
# mount the pool, as any short program under the single-process
# interposer does. Two builds, rounds interleaved (A, B, A, B, ...):
# fio's whole run (its exit's unmount included), and one `stat`'s wall
# time and peak RSS, medians over REPS rounds.
#
#   bash bench/zone_start.sh BEFORE_BIN_DIR AFTER_BIN_DIR [REPS] [SECONDS]
#   (defaults: 3 rounds, 3 s)
#
# Needs fio and GNU time. Prints a Markdown table.
set -euo pipefail
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
reps=${3:-3}
secs=${4:-3}
command -v fio >/dev/null || { echo "needs fio"; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time (/usr/bin/time)"; exit 1; }
pool=/dev/shm/zone-start-$$.pool
dir=$(mktemp -d /tmp/zone-start.XXXXXX)
trap 'rm -f "$pool"; rm -rf "$dir"' EXIT

# One round of build $1: prints "fio_s stat_s stat_kb".
round() {
    local bin=$1
    rm -f "$pool"
    "$bin/amberfs" mkfs "$pool" --size 2G >/dev/null
    local env=(env LD_PRELOAD="$bin/libamberfs_preload.so" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$dir/mnt")
    local t0 t1
    t0=$(date +%s.%N)
    "${env[@]}" fio --name=z --filename="$dir/mnt/f" --size=256M --rw=randwrite --bs=128 \
        --fsync=1 --time_based --runtime="$secs" --ioengine=psync --thread >/dev/null
    t1=$(date +%s.%N)
    local starts=()
    for _ in 1 2 3; do
        starts+=("$(/usr/bin/time -f '%e %M' "${env[@]}" stat -c %s "$dir/mnt/f" 2>&1 >/dev/null)")
    done
    # The middle of three starts, by time.
    local mid
    mid=$(printf '%s\n' "${starts[@]}" | sort -n | sed -n 2p)
    echo "$(awk "BEGIN {printf \"%.2f\", $t1 - $t0}") $mid"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: >"$dir/before" && : >"$dir/after"
for r in $(seq 1 "$reps"); do
    round "$before" >>"$dir/before"
    round "$after" >>"$dir/after"
    echo "round $r of $reps" >&2
done
echo "| build | fio run, ${secs} s of writes + exit (s) | one stat's start (s) | its peak RSS (MB) |"
echo "|---|---|---|---|"
for b in before after; do
    fio_s=$(cut -d' ' -f1 "$dir/$b" | median)
    stat_s=$(cut -d' ' -f2 "$dir/$b" | median)
    rss=$(cut -d' ' -f3 "$dir/$b" | median)
    echo "| $b | $fio_s | $stat_s | $((rss / 1024)) |"
done
