#!/usr/bin/env bash
# A/B of two interposer builds on passed-through calls (overhead.c's
# `kernel` mode: pread and stat of a tmpfs file), plain, plain with an
# idle thread, and preloaded with the pool open under OLD.so and NEW.so;
# REPS rounds, interleaved. Used for the background threads' private
# descriptor table (BENCHMARKS, "In-process").
#
#   bash bench/preload/threads_ab.sh OLD.so NEW.so OVERHEAD_BINARY AMBERFS [REPS]
#
# OVERHEAD_BINARY is bench/preload/overhead.c built as bench/preload.sh
# builds it.
set -euo pipefail
old=$1 new=$2 overhead=$3 amberfs=$4
pool=/dev/shm/threads-ab.pool; m=/tmp/threads-ab-mount; f=/dev/shm/threads-ab.bin
mkdir -p $m
for rep in $(seq 1 "${5:-5}"); do
  for so in old new; do
    lib=$old
    [ "$so" = new ] && lib=$new
    rm -f $pool; "$amberfs" mkfs $pool --size 256M >/dev/null
    AMBERFS_POOL=$pool AMBERFS_MOUNT=$m AMBERFS_EMULATE=dram LD_PRELOAD=$lib "$overhead" kernel $f 200000 $m | sed "s/^/$so /"
  done
  "$overhead" kernel $f 200000 | sed 's/^/plain /'
  "$overhead" kernel-mt $f 200000 | sed 's/^/threaded /'
done
rm -f "$pool" "$f"
