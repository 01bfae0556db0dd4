#!/usr/bin/env bash
# Read leases (issue 32, design.md §17.9), measured with fio's psync
# engine: one process reading a 256 MiB file on an Amber mount under the
# interposer ("preloaded", reads under a lease), the same without it
# ("mount", every read a FUSE request), and ext4 on a RAM-backed loop
# device ("ext4", reads from the page cache); 4 KiB random reads (IOPS)
# and 128 KiB sequential reads (MiB/s). Then what a lease costs a writer:
# a plain process writing 4 KiB blocks at random into a file that a
# second process reads at the same time, preloaded (each write recalls
# the reader's lease) or not; the writer's IOPS and the reader's.
# Targets interleaved, medians of REPS rounds of SECONDS each.
#
#   bash bench/leases.sh [BIN_DIR] [REPS] [SECONDS]
#   (defaults: target/release 5 5)
#
# Needs root, /dev/fuse, fio, mkfs.ext4. Prints a Markdown table; raw
# lines in $OUT (default docs/results/leases).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-5}
secs=${3:-5}
out=${OUT:-$top/docs/results/leases}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
command -v fio >/dev/null || { echo "needs fio"; exit 1; }
mkdir -p "$out"
source "$top/bench/lib/amber_and_ext4.sh"
amber_and_ext4 leases-bench 2G
for d in "$work/amber" "$work/ext4"; do
    head -c 256M /dev/urandom > "$d/data"
    head -c 64M /dev/urandom > "$d/shared"
done

# fio as target $1 (preloaded or not) on FILE with the given options;
# prints the IOPS and bandwidth (KiB/s) of its reads, or of its writes
# with `write`.
fio_job() {
    local t=$1 what=$2 file=$3 pre=()
    shift 3
    [ "$t" = preloaded ] && pre=(env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber")
    "${pre[@]}" fio --name=j --filename="$file" --ioengine=psync --time_based --runtime="$secs" \
        --output-format=json "$@" 2>/dev/null |
        python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['$what']; print(round(j['iops']), j['bw'])"
}
dir_of() { [ "$1" = ext4 ] && echo "$work/ext4" || echo "$work/amber"; }

for rep in $(seq 1 "$reps"); do
    for t in preloaded mount ext4; do
        d=$(dir_of "$t")
        set -- $(fio_job "$t" read "$d/data" --rw=randread --bs=4k)
        echo "$t randread4k_iops $1"
        set -- $(fio_job "$t" read "$d/data" --rw=read --bs=128k)
        echo "$t seqread128k_mibs $(( $2 / 1024 ))"
    done
    for reader in preloaded mount; do
        fio_job "$reader" read "$work/amber/shared" --rw=randread --bs=4k > "$work/r" &
        w=$(fio_job mount write "$work/amber/shared" --rw=randwrite --bs=4k | cut -d' ' -f1)
        wait
        echo "with-$reader-reader writer_iops $w"
        echo "with-$reader-reader reader_iops $(cut -d' ' -f1 "$work/r")"
    done
done | tee "$out/runs.txt"
"$amberfs" stats "$work/amber" | grep '^leases\.' | tee "$out/lease-counters.txt"
python3 - "$out/runs.txt" "bash bench/leases.sh $*" <<'PY' | tee "$out/table.md"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, k, v = line.split()
    runs.setdefault((t, k), []).append(float(v))
m = lambda t, k: statistics.median(runs[(t, k)])
n = len(runs[("ext4", "randread4k_iops")])
print(f"`{sys.argv[2]}`, medians of {n} rounds:\n")
print("| reads | preloaded | mount | ext4 (RAM loop) | preloaded / mount | preloaded / ext4 |")
print("|---|---|---|---|---|---|")
for k, name in [("randread4k_iops", "4 KiB random, IOPS"), ("seqread128k_mibs", "128 KiB sequential, MiB/s")]:
    p, f, e = m("preloaded", k), m("mount", k), m("ext4", k)
    print(f"| {name} | {p:,.0f} | {f:,.0f} | {e:,.0f} | {p / f:.1f}x | {p / e:.2f}x |")
print("\n| one file, a writer and a reader at once | reader preloaded | reader not |")
print("|---|---|---|")
for k, name in [("writer_iops", "writer (plain), 4 KiB random writes, IOPS"), ("reader_iops", "reader, 4 KiB random reads, IOPS")]:
    print(f"| {name} | {m('with-preloaded-reader', k):,.0f} | {m('with-mount-reader', k):,.0f} |")
PY
