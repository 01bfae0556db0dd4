#!/usr/bin/env bash
# The LAWN figures (lawn.txt §5.2-5.3: Figures 5, 6 and 8) as `bench compare`
# runs: every policy in the same run, interleaved, medians of 3 repetitions,
# 1 and 2 threads, under `dram` and `pcm`. Results (JSON, the printed table,
# CSV) go to $OUT, plots (SVG + PNG) to $PLOTS.
#
#   bash docs/results/lawn/commands.sh            # from the repository root
#
# About 18 minutes on the project's 2-vCPU machine. Stops at the first
# failure (an unknown policy or mount option fails the preflight, before
# any long run).
#
# RESUME=1 skips runs whose JSON is already in $OUT and redraws the plots.
#
# Dry run before lawn exists (hinfs in its place, which ignores lawn_slot;
# tiny runs; results outside the repository; about 2 minutes):
#   POLICIES="cow finelog direct hinfs" \
#     DUR=20ms PREWRITE=200 FILE_SIZE=1M OUT=/tmp/lawn-dry PLOTS=/tmp/lawn-dry/plots \
#     bash docs/results/lawn/commands.sh
# (SLOT_OPT=KEY names the slot option if it is not lawn_slot.)
set -euo pipefail

# The policies of every run: the baseline first (ratios are to it), lawn last.
read -r -a POL <<< "${POLICIES:-cow finelog direct lawn}"
# lawn's slot-size mount option (Figure 8) and the sizes swept.
SLOT_OPT=${SLOT_OPT:-lawn_slot}
SLOTS=(64 128 256 512)
SIZES=(128 256 512 1K 2K 4K)
PRESETS=(dram pcm)

A=${AMBERFS:-target/release/amberfs}
O=${OUT:-docs/results/lawn}
P=${PLOTS:-docs/plots}
# Each repetition runs this long per thread; one untimed warm-up first.
DUR=${DUR:-400ms}
# Random writes before the random-read runs (untimed; Figure 5(e)).
PREWRITE=${PREWRITE:-20000}
FILE_SIZE=${FILE_SIZE:-32M}
c=(--reps 3 --warmup 1 --duration "$DUR" --threads 1,2 --file-size "$FILE_SIZE"
   --fsync every --pool-size 512M --seed 42)

BASE=${POL[0]}
LAWN=${POL[${#POL[@]} - 1]}
targets=()
for p in "${POL[@]}"; do targets+=(--target "amberfs:$p"); done
slot_targets=(--target "amberfs:$BASE")
for s in "${SLOTS[@]}"; do slot_targets+=(--target "amberfs:$LAWN,$SLOT_OPT=$s"); done

[ -x "$A" ] || { echo "no amberfs binary at $A: cargo build --release --bin amberfs" >&2; exit 1; }
mkdir -p "$O" "$P"
start=$(date +%s)

# Every target once, tiny, so a policy or option the binary lacks stops the
# script now rather than after minutes of runs.
for t in "${targets[@]}" "${slot_targets[@]}"; do
  [ "$t" = --target ] && continue
  if ! err=$("$A" bench --quiet workload randwrite --target "$t" --file-size 64K \
      --ops 16 --reps 1 --warmup 0 --pool-size 64M 2>&1 >/dev/null); then
    echo "preflight: target $t does not run:" >&2
    echo "$err" >&2
    exit 1
  fi
done
echo "preflight ok: ${POL[*]}; slots ${SLOTS[*]} via $LAWN,$SLOT_OPT=N"

run() {
  local name=$1 em=$2
  shift 2
  # RESUME=1 keeps runs whose results exist (to redo a subset: delete its
  # JSON files and run again).
  if [ "${RESUME:-0}" = 1 ] && [ -e "$O/$name.json" ]; then
    return
  fi
  if ! "$A" --emulate "$em" bench --quiet compare --workload randwrite "$@" "${c[@]}" \
      --json "$O/$name.json" > "$O/$name.txt" 2>&1; then
    echo "FAILED: $name (log: $O/$name.txt)" >&2
    tail -n 20 "$O/$name.txt" >&2
    exit 1
  fi
  echo "$name done $(date +%T)"
}

# Figure 5(a-d): random writes and read/write mixes 3/7, 5/5, 7/3 over the
# request size; Figure 6 comes from the write-only runs (bytes per request).
# Figure 5(e): random reads of a file the prewrite phase scattered.
# Figure 8: slot size, 1 KiB random writes (the paper's FFSB request size).
for em in "${PRESETS[@]}"; do
  for rr in 0 3 5 7; do
    for s in "${SIZES[@]}"; do
      run "randwrite-r$rr-$s-$em" "$em" --io-size "$s" --read-ratio "$rr" "${targets[@]}"
    done
  done
  for s in "${SIZES[@]}"; do
    run "randread-$s-$em" "$em" --io-size "$s" --read-ratio 10 --prewrite "$PREWRITE" \
      "${targets[@]}"
  done
  run "slots-1K-$em" "$em" --io-size 1K "${slot_targets[@]}"
done

# plot NAME ARGS...: one figure; its records as CSV beside the results.
plot() {
  local name=$1
  shift
  "$A" bench plot "$@" --out "$P/$name" > /dev/null
  mv "$P/$name.csv" "$O/$name.csv"
}
inputs() { for s in "${SIZES[@]}"; do printf -- '--input\n%s\n' "$O/$1-$s-$2.json"; done; }

for em in "${PRESETS[@]}"; do
  for t in 1 2; do
    for panel in a:randwrite-r0:"random write" b:randwrite-r3:"read/write 3/7" \
                 c:randwrite-r5:"read/write 5/5" d:randwrite-r7:"read/write 7/3" \
                 e:randread:"random read after $PREWRITE random writes"; do
      IFS=: read -r letter stem what <<< "$panel"
      mapfile -t in < <(inputs "$stem" "$em")
      plot "lawn-fig5$letter-$stem-$em-${t}thr" --kind lines --x io_size --metric bandwidth \
        --threads "$t" "${in[@]}" --title "Fig. 5($letter) $what, $em, $t thread(s): MiB/s"
    done
    mapfile -t in < <(inputs randwrite-r0 "$em")
    plot "lawn-fig6-bytes-per-write-sizes-$em-${t}thr" --kind lines --x io_size \
      --metric pm_bytes_per_write --threads "$t" "${in[@]}" \
      --title "Fig. 6 PM bytes per random write, $em, $t thread(s)"
  done
  plot "lawn-fig6-bytes-per-write-1K-$em" --kind bars --metric pm_bytes_per_write \
    --input "$O/randwrite-r0-1K-$em.json" --title "Fig. 6 PM bytes per 1 KiB random write, $em, relative to $BASE"
  plot "lawn-fig8-slot-size-$em" --kind bars --metric bandwidth --input "$O/slots-1K-$em.json" \
    --title "Fig. 8 slot size, 1 KiB random writes, $em, relative to $BASE"
done
echo "ALL DONE in $(( $(date +%s) - start )) s"
