#!/usr/bin/env bash
# The HUNTER figures (hunter.txt §IV: Figures 6-10 and the recovery times of
# §IV-E) as `bench compare` and `bench recovery` runs: every target in the
# same run, interleaved, medians of 3 repetitions after one warm-up, under
# `dram` and `optane`. Results (JSON, the printed table) go to $OUT, plots
# (SVG + PNG, records as CSV beside the results) to $PLOTS.
#
#   bash docs/results/hunter/commands.sh            # from the repository root
#
# About 25 minutes on the project's 2-vCPU machine (24 GiB of RAM: the
# pools live in /dev/shm, at most ~14.5 GiB at once). RESUME=1 skips runs
# whose JSON is already in $OUT and redraws the plots.
#
# `bare` is a non-temporal copy of the same volume into the same pool,
# each 4 KiB write one copy and a fence (crates/amber-bench/src/bare/).
# `hunter-lfs` is Figure 10's LFS layout (records in the data log).
set -euo pipefail

A=${AMBERFS:-target/release/amberfs}
O=${OUT:-docs/results/hunter}
P=${PLOTS:-docs/plots}
PRESETS=(dram optane)
c=(--reps 3 --warmup 1 --seed 42)

[ -x "$A" ] || { echo "no amberfs binary at $A: cargo build --release --bin amberfs" >&2; exit 1; }
mkdir -p "$O" "$P"
start=$(date +%s)

# pool SIZE: a pool for one file of SIZE (MiB) plus HUNTER's metadata
# (1.6%) and the inode tables, rounded up.
pool() { echo "$(( $1 + $1 / 8 + 96 ))M"; }

run() {
  local name=$1 em=$2 kind=$3
  shift 3
  if [ "${RESUME:-0}" = 1 ] && [ -e "$O/$name.json" ]; then
    return
  fi
  if ! "$A" --emulate "$em" bench --quiet "$kind" "$@" --json "$O/$name.json" \
      > "$O/$name.txt" 2>&1; then
    echo "FAILED: $name (log: $O/$name.txt)" >&2
    tail -n 20 "$O/$name.txt" >&2
    exit 1
  fi
  echo "$name done $(date +%T)"
}

six=(--target bare --target amberfs:hunter --target amberfs:hunter-sync
     --target amberfs:hunter-lfs --target amberfs:direct --target amberfs:cow)
for em in "${PRESETS[@]}"; do
  # Figures 6 and 10: one thread populating one file, 64 MiB to 2 GiB with
  # every target, and 4 GiB against the bare copy (six 4.6 GiB pools would
  # not fit in RAM beside each other).
  for mib in 64 256 1024 2048; do
    run "populate-${mib}M-$em" "$em" compare --workload populate --file-size "${mib}M" \
      --pool-size "$(pool "$mib")" "${six[@]}" "${c[@]}"
  done
  run "populate-4096M-$em" "$em" compare --workload populate --file-size 4G \
    --pool-size "$(pool 4096)" --target bare --target amberfs:hunter \
    --target amberfs:hunter-sync "${c[@]}"
  # Figure 8: 1 and 2 threads populating 4 GiB of files in one directory.
  run "populate-2x2G-$em" "$em" compare --workload populate --files 2 --file-size 2G \
    --threads 1,2 --pool-size "$(pool 4096)" --target bare --target amberfs:hunter \
    --target amberfs:direct "${c[@]}"
  # Figure 9: fileserver and varmail, 1 and 2 threads.
  for w in fileserver varmail; do
    run "$w-$em" "$em" compare --workload "$w" --threads 1,2 --duration 3s --pool-size 2G \
      --target amberfs:direct --target amberfs:hinfs --target amberfs:hunter "${c[@]}"
  done
done

# Figure 7: the worker's interval, 2 GiB populate under optane (long enough
# for a 1 s worker to wake while it runs).
iv=(--target bare)
for i in 1s 3s 5s never; do iv+=(--target "amberfs:hunter,hunter_interval=$i"); done
run "interval-2048M-optane" optane compare --workload populate --file-size 2G \
  --pool-size "$(pool 2048)" "${iv[@]}" "${c[@]}"

# §IV-E: mount time after a clean unmount and after a crash with 8 GiB of
# data, and the DRAM the queues and indexes hold.
run "recovery-8G-dram" dram recovery --data 8G --file-size 1G --io-size 1M \
  --target amberfs:hunter --target amberfs:direct --reps 3

plot() {
  local name=$1
  shift
  "$A" bench plot "$@" --out "$P/$name" > /dev/null
  mv "$P/$name.csv" "$O/$name.csv"
}
for em in "${PRESETS[@]}"; do
  in=()
  for mib in 64 256 1024 2048; do in+=(--input "$O/populate-${mib}M-$em.json"); done
  plot "hunter-fig6-populate-$em" --kind lines --x file_size --metric bandwidth "${in[@]}" \
    --title "Fig. 6/10 sequential 4 KiB writes populating one file, $em: MiB/s"
  plot "hunter-fig6-populate-4G-$em" --kind bars --metric bandwidth \
    --input "$O/populate-4096M-$em.json" \
    --title "Fig. 6 populating a 4 GiB file, $em, relative to bare"
  plot "hunter-fig8-threads-$em" --kind lines --x threads --metric bandwidth \
    --input "$O/populate-2x2G-$em.json" \
    --title "Fig. 8 populating 4 GiB of files in one directory, $em: MiB/s"
  for w in fileserver varmail; do
    plot "hunter-fig9-$w-$em" --kind lines --x threads --metric throughput \
      --input "$O/$w-$em.json" --title "Fig. 9 $w, $em: ops/s"
  done
done
plot "hunter-fig7-interval" --kind bars --metric bandwidth \
  --input "$O/interval-2048M-optane.json" \
  --title "Fig. 7 worker interval, 2 GiB populate, optane, relative to bare"
echo "ALL DONE in $(( $(date +%s) - start )) s"
