#!/usr/bin/env bash
# Issue 32's multi-process programs, timed, on an Amber mount with every
# process under the interposer ("preloaded"), on the same mount without
# it ("mount"), and on ext4 over a RAM-backed loop device ("ext4"),
# targets interleaved, medians of REPS rounds: a shell script of 2,000
# file commands (tests/multiproc/shell_script.py), `make -j2` of 48 C
# files from clean, a git round (init, three commits of a 50-file tree,
# status, log, a local clone, gc) and PostgreSQL's pgbench (TPC-B-like,
# scale 2, 4 clients, SECONDS seconds, TPS). Needs root, /dev/fuse,
# mkfs.ext4, make, cc, git, python3, PostgreSQL (Debian's).
#
#   bash bench/multiproc.sh [BIN_DIR] [REPS] [SECONDS]
#   (defaults: target/release 3 10)
#
# Prints a Markdown table and draws it as bars of speed relative to the
# plain mount ($OUT/plot.svg and .png); raw lines in $OUT (default
# docs/results/multiproc).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$top/target/release}" && pwd)
reps=${2:-3}
secs=${3:-10}
out=${OUT:-$top/docs/results/multiproc}
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ "$(id -u)" = 0 ] || { echo "needs root (loop device, mounts)"; exit 1; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$pgbin" ] || { echo "needs PostgreSQL (apt-get install postgresql)"; exit 1; }
mkdir -p "$out"
bench_cleanup() { pkill -9 -u postgres -f "multiproc-bench" 2>/dev/null || true; }
source "$top/bench/lib/amber_and_ext4.sh"
amber_and_ext4 multiproc-bench 4G --inodes 262144
mkdir -p "$work/sock"
chown postgres: "$work/sock"
python3 "$top/tests/multiproc/shell_script.py" 2000 > "$work/script.sh"

# Runs "$@" as target $t would: preloaded over the mount, or plainly.
run_as() {
    local t=$1; shift
    if [ "$t" = preloaded ]; then
        env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber" "$@"
    else
        "$@"
    fi
}
dir_of() { [ "$1" = ext4 ] && echo "$work/ext4" || echo "$work/amber"; }
# Seconds "$@" takes.
timed() {
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    python3 -c "print(f'{$e - $s:.3f}')"
}
project() {
    mkdir -p "$1"
    for i in $(seq 1 48); do
        printf '#include <stdio.h>\nint f%d(int x) { return x * %d + 1; }\n' "$i" "$i" > "$1/f$i.c"
    done
    printf 'int main(void) { return 0; }\n' > "$1/main.c"
    printf 'SRCS := $(wildcard *.c)\nprog: $(SRCS:.c=.o)\n\t$(CC) -o $@ $^\n%%.o: %%.c\n\t$(CC) -O1 -c -o $@ $<\n' > "$1/Makefile"
}
git_round() {
    export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@b
    git init -q "$1/repo"
    for i in 1 2 3; do
        cp -r "$2" "$1/repo/src$i"
        git -C "$1/repo" add "src$i"
        git -C "$1/repo" commit -q -m "c$i"
    done
    git -C "$1/repo" status --porcelain
    git -C "$1/repo" log --oneline
    git clone -q "$1/repo" "$1/clone"
    git -C "$1/clone" gc -q
}
pgbench_tps() {
    local t=$1 d=$2 as
    as=(runuser -u postgres -- env)
    [ "$t" = preloaded ] && as+=(LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$work/amber")
    mkdir -p "$d/pg" && chown postgres: "$d/pg"
    "${as[@]}" "$pgbin/initdb" -D "$d/pg/data" -A trust --no-instructions >/dev/null
    "${as[@]}" "$pgbin/pg_ctl" -D "$d/pg/data" -l "$work/sock/pg.log" -w \
        -o "-p 5545 -k $work/sock -c listen_addresses=''" start >/dev/null
    "${as[@]}" "$pgbin/pgbench" -h "$work/sock" -p 5545 -i -s 2 -q postgres >/dev/null 2>&1
    "${as[@]}" "$pgbin/pgbench" -h "$work/sock" -p 5545 -c 4 -j 2 -T "$secs" postgres 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1
    "${as[@]}" "$pgbin/pg_ctl" -D "$d/pg/data" -m immediate -w stop >/dev/null
    rm -rf "$d/pg"
}

for rep in $(seq 1 "$reps"); do
    for t in preloaded mount ext4; do
        d=$(dir_of "$t")/r$rep-$t
        mkdir -p "$d/sh"
        echo "$t shell $(cd "$d/sh" && timed run_as "$t" bash "$work/script.sh")"
        project "$d/proj"
        echo "$t make $(timed run_as "$t" make -s -j2 -C "$d/proj")"
        echo "$t git $(timed run_as "$t" bash -c "$(declare -f git_round); git_round $d $d/proj")"
        echo "$t pgbench $(pgbench_tps "$t" "$d")"
        rm -rf "$d"
    done
done | tee "$out/runs.txt"
python3 - "$out/runs.txt" "bash bench/multiproc.sh $*" <<'EOF' | tee "$out/table.md"
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, job, v = line.split()
    runs.setdefault((t, job), []).append(float(v))
m = lambda t, j: statistics.median(runs[(t, j)])
print(f"`{sys.argv[2]}`, medians of {len(runs[('ext4', 'make')])} rounds:\n")
print("| job | preloaded | mount | ext4 (RAM loop) | preloaded / mount | preloaded / ext4 |")
print("|---|---|---|---|---|---|")
names = {"shell": "shell script, 2,000 commands (s)", "make": "make -j2, 49 files (s)",
         "git": "git round (s)", "pgbench": "pgbench -c 4, TPS"}
for j in ["shell", "make", "git", "pgbench"]:
    p, f, e = m("preloaded", j), m("mount", j), m("ext4", j)
    # Speed ratios: time is lower-better, TPS higher-better.
    r = (lambda a, b: b / a) if j != "pgbench" else (lambda a, b: a / b)
    print(f"| {names[j]} | {p:g} | {f:g} | {e:g} | {r(p, f):.2f}x | {r(p, e):.2f}x |")
EOF
python3 "$top/bench/lib/plot_runs.py" "$out/runs.txt" "$amberfs" "$out/plot" \
    --title "Issue 32's programs, speed relative to the plain mount" \
    --baseline mount --command "bash bench/multiproc.sh $*" --seconds shell,make,git \
    --label "shell=shell script" --label "make=make -j2" --label "git=git round" \
    --label "pgbench=pgbench -c 4"
