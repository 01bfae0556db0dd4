#!/usr/bin/env bash
# `bench seeds --quick` on two builds, interleaved (before, after, before,
# after, ...), then every figure's median over the runs of each build and
# their ratio (bench/before_after.py): for a change that must leave
# performance as it was (issue 17). Each build runs inside its own
# checkout, so its report names its commit.
#
#   bash bench/before_after.sh BEFORE_CHECKOUT AFTER_CHECKOUT [RUNS] [OUT]
#
# Each checkout needs `cargo build --release --bin amberfs` first. About
# 80 s per run here; OUT (default /tmp/before-after) gets one directory
# per run and table.md.
set -euo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
runs=${3:-3}
out=${4:-/tmp/before-after}
here=$(dirname "$(realpath "$0")")
rm -rf "$out"
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
    for who in before after; do
        dir=$before
        [ "$who" = after ] && dir=$after
        mkdir -p "$out/$who-$i"
        start=$(date +%s)
        (cd "$dir" && target/release/amberfs bench --quiet seeds --quick \
            --out "$out/$who-$i/results.md") >"$out/$who-$i/log" 2>&1
        echo "$who $i: $(($(date +%s) - start)) s"
    done
done
python3 "$here/before_after.py" "$out" | tee "$out/table.md"
