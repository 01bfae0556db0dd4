#!/usr/bin/env bash
# Write leases (issue 32 point 6, design.md §17.10-§17.11), measured with
# fio's psync engine, every write fsync'd, two jobs on two files, as
#   preloaded — two processes with the interposer over an Amber mount
#               (writes under write leases, fsync a no-op);
#   mount     — the same two processes without it (every call a FUSE
#               request);
#   single    — the single-process interposer (its own pool, no mount:
#               `AMBERFS_POOL` alone), the two jobs as threads of one
#               process, the baseline the goal names.
# MODE=overwrites (the default): random overwrites of 4 KiB and of 128 B
# on two 16 MiB files (one lease window each), SECONDS each.
# MODE=appends: 8,192 appends of 4 KiB and of 128 B to two new files
# (32 MiB and 1 MiB each: two lease windows for 4 KiB).
# Per-job IOPS; targets interleaved, medians of REPS rounds.
#
#   [MODE=appends] bash bench/write_leases.sh [BIN_DIR] [REPS] [SECONDS]
#   (defaults: target/release 5 5)
#
# Needs root, /dev/fuse, fio, mkfs.ext4. Prints a Markdown table and
# draws it relative to the single-process interposer ($OUT/plot.svg and
# .png); raw lines in $OUT (default docs/results/write-leases, or
# docs/results/lease-appends for appends).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
secs=${3:-5}
mode=${MODE:-overwrites}
case $mode in
overwrites) out=${OUT:-$top/docs/results/write-leases} ;;
appends) out=${OUT:-$top/docs/results/lease-appends} ;;
*) echo "MODE is overwrites or appends"; exit 1 ;;
esac
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (mounts)"; exit 1; }
command -v fio >/dev/null || { echo "needs fio"; exit 1; }
mkdir -p "$out"
single_pool=/dev/shm/write-leases-single-$$.pool
bench_cleanup() { rm -f "$single_pool"; }
source "$top/bench/lib/amber_and_ext4.sh"
amber_and_ext4 write-leases-bench 2G
mkdir -p "$work/single"
"$amberfs" mkfs "$single_pool" --size 2G >/dev/null
single_env=(LD_PRELOAD="$lib" AMBERFS_POOL="$single_pool" AMBERFS_MOUNT="$work/single")
mount_env=(LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber")
for j in 0 1; do
    head -c 16M /dev/urandom > "$work/amber/w.$j"
done
env "${single_env[@]}" python3 -c "
import os, sys
for j in (0, 1):
    with open(sys.argv[1] + f'/w.{j}', 'wb') as f:
        f.write(os.urandom(16 << 20))
" "$work/single"

# fio's workload for block size $1 in this mode.
workload() {
    if [ "$mode" = overwrites ]; then
        echo --filesize=16m --rw=randwrite --time_based --runtime="$secs"
    else
        # New, empty files each round; fio's offsets start at their end.
        echo --size=$(( $([ "$1" = 4k ] && echo 4096 || echo 128) * 8192 )) \
            --rw=write --file_append=1 --fallocate=none
    fi
}

# fio as target $1 with block size $2: prints each job's write IOPS.
fio_jobs() {
    local t=$1 bs=$2 pre=() dir=$work/amber extra=()
    case $t in
    preloaded) pre=(env "${mount_env[@]}") ;;
    single) pre=(env "${single_env[@]}"); dir=$work/single; extra=(--thread) ;;
    esac
    [ "$mode" = appends ] && "${pre[@]}" rm -f "$dir/w.0" "$dir/w.1"
    # shellcheck disable=SC2046
    "${pre[@]}" fio --name=w --directory="$dir" --filename_format='w.$jobnum' $(workload "$bs") \
        --ioengine=psync --bs="$bs" --fsync=1 --numjobs=2 "${extra[@]}" \
        --output-format=json 2>/dev/null |
        python3 -c "import json,sys; print(*(round(j['write']['iops']) for j in json.load(sys.stdin)['jobs']))"
}

for rep in $(seq 1 "$reps"); do
    for bs in 4k 128; do
        for t in preloaded mount single; do
            for iops in $(fio_jobs "$t" "$bs"); do
                echo "$t $bs $iops"
            done
        done
    done
done | tee "$out/runs.txt"
"$amberfs" stats "$work/amber" | grep -E '^leases\.|adopted|own_commits' | tee "$out/counters.txt"
python3 - "$out/runs.txt" "MODE=$mode bash bench/write_leases.sh $*" "$mode" <<'PY' | tee "$out/table.md"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, bs, v = line.split()
    runs.setdefault((t, bs), []).append(float(v))
m = lambda t, bs: statistics.median(runs[(t, bs)])
n = len(runs[("single", "4k")]) // 2
print(f"`{sys.argv[2]}`, per-job write IOPS, medians of {n} rounds x 2 jobs:\n")
what = {"overwrites": "random overwrites", "appends": "appends"}[sys.argv[3]]
print(f"| fsync'd {what} | preloaded (2 processes) | mount (2 processes) "
      "| single-process interposer (2 threads) | preloaded / single | preloaded / mount |")
print("|---|---|---|---|---|---|")
for bs, name in [("4k", "4 KiB"), ("128", "128 B")]:
    p, f, s = m("preloaded", bs), m("mount", bs), m("single", bs)
    print(f"| {name} | {p:,.0f} | {f:,.0f} | {s:,.0f} | {p / s:.2f}x | {p / f:.1f}x |")
PY
python3 "$top/bench/lib/plot_runs.py" "$out/runs.txt" "$amberfs" "$out/plot" \
    --title "Fsync'd random $mode per process, relative to the single-process interposer" \
    --baseline single --command "MODE=$mode bash bench/write_leases.sh $*" \
    --label "4k=4 KiB" --label "128=128 B"
