#!/usr/bin/env bash
# What preloading costs a shell script over an Amber mount (issue 32,
# point 5): tests/multiproc/shell_script.py's script of COMMANDS file
# commands, run with nothing preloaded, with an empty C library preloaded
# (any LD_PRELOAD's floor) and with the interposer, targets interleaved.
# Prints, per target, the median over REPS rounds of the CPU time of
# every process of the script (`perf stat -e task-clock`, children
# included) and of its wall time.
#
#   bash bench/preload_cost.sh [BIN_DIR] [REPS] [COMMANDS]
#   (defaults: target/release 7 500)
#
# Needs root, /dev/fuse, perf, cc.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-7}
commands=${3:-500}
amberfs=$bin/amberfs
[ "$(id -u)" = 0 ] || { echo "needs root (mounts)"; exit 1; }
command -v perf >/dev/null || { echo "needs perf"; exit 1; }
work=$(mktemp -d /tmp/preload-cost.XXXXXX)
pool=/dev/shm/preload-cost-$$.pool
cleanup() {
    "$amberfs" umount "$work/amber" >/dev/null 2>&1 || umount -l "$work/amber" 2>/dev/null || true
    rm -rf "$work" "$pool"
}
trap cleanup EXIT
mkdir -p "$work/amber"
"$amberfs" mkfs "$pool" --size 1G >/dev/null
"$amberfs" mount "$pool" "$work/amber" --log "$work/amber.log" >/dev/null
echo 'int amber_preload_cost_empty(void) { return 0; }' > "$work/empty.c"
cc -shared -fPIC -O2 "$work/empty.c" -o "$work/libempty.so"
python3 "$top/tests/multiproc/shell_script.py" "$commands" > "$work/script.sh"

# Runs the script as target $1 in a fresh directory: "cpu_ms wall_ms".
once() {
    local pre=() d=$work/amber/$1-$2
    case $1 in
    empty) pre=(LD_PRELOAD="$work/libempty.so") ;;
    interposer) pre=(LD_PRELOAD="$bin/libamberfs_preload.so" AMBERFS_POOL="$pool"
        AMBERFS_MOUNT="$work/amber") ;;
    esac
    mkdir -p "$d"
    local s e cpu
    s=$(date +%s%N)
    cpu=$(cd "$d" && env "${pre[@]}" perf stat -x, -e task-clock -- bash "$work/script.sh" 2>&1 >/dev/null |
        sed -n 's/^\([0-9.]*\),msec,task-clock.*/\1/p')
    e=$(date +%s%N)
    rm -rf "$d"
    echo "$cpu $(((e - s) / 1000000))"
}

for rep in $(seq 1 "$reps"); do
    for t in none empty interposer; do
        echo "$t $(once "$t" "$rep")"
    done
done | python3 -c '
import statistics, sys
cpu, wall = {}, {}
for line in sys.stdin:
    t, c, w = line.split()
    cpu.setdefault(t, []).append(float(c))
    wall.setdefault(t, []).append(float(w))
base = statistics.median(cpu["none"])
n = len(cpu["none"])
print(f"`{sys.argv[1]}`, medians of {n} rounds:\n")
print("| preloaded | CPU of all processes (ms) | vs nothing | wall (ms) |")
print("|---|---|---|---|")
for t in ["none", "empty", "interposer"]:
    c, w = statistics.median(cpu[t]), statistics.median(wall[t])
    print(f"| {t} | {c:,.0f} | {c / base:.2f}x | {w:,.0f} |")
' "bash bench/preload_cost.sh $*"
