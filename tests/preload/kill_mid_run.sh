# Sourced by tests/preload/run.sh and tests/multiproc/programs.sh, with
# $work, $pool, $mnt and $lib set.
#
#   kill_mid_run DBS CMD PATH CHECK RUNNER
#
# Runs `DBS CMD PATH` (tests/preload/dbs.c) with the interposer preloaded
# over $pool and $mnt, committing until killed: kills it with SIGKILL
# once it has reported 2,000 commits, then checks with `RUNNER DBS CHECK
# PATH K` that every commit it reported is there.
kill_mid_run() {
    local dbs=$1 cmd=$2 path=$3 check=$4 runner=$5 out=$work/run.out
    # Not through a function: one in the background is a subshell, and
    # the kill must reach the program itself.
    AMBERFS_POOL=$pool AMBERFS_MOUNT=$mnt LD_PRELOAD=$lib \
        "$dbs" "$cmd" "$path" 100000000 report > "$out" 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do
        [ "$(grep -c '^committed' "$out")" -ge 2000 ] && break
        sleep 0.05
    done
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    local k
    k=$(grep -E '^committed [0-9]+$' "$out" | tail -n 1 | cut -d' ' -f2)
    [ -n "$k" ] || { echo "never committed:"; cat "$out"; exit 1; }
    "$runner" "$dbs" "$check" "$path" "$k"
}
