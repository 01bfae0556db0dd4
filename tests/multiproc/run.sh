#!/usr/bin/env bash
# Many processes, one pool (issue 32, point 5): real multi-process
# programs on an `amberfs mount` with every process under the LD_PRELOAD
# interposer (AMBERFS_POOL and AMBERFS_MOUNT naming the pool and the
# mount, as README's "Many processes" says): pjdfstest, a shell script of
# a few hundred file commands compared with the same script on a plain
# directory, make -j2, git, Python multiprocessing, SQLite in WAL mode and
# LMDB (full runs and kill -9 mid-run), LevelDB, fio with two job
# processes verifying crc32c, and PostgreSQL (initdb, pgbench, kill -9 of
# the postmaster in the middle of a run, recovery, pgbench's balance
# invariants and pg_amcheck). Then unmount and a clean fsck.
#
# What it pins today: with the mount up the interposer opens and changes
# names through the kernel, reads a file it reads again and again from its
# own mapping of the pool under a read lease (design.md §17.3), and
# writes a file it writes again and again — overwrites, appends, writes
# across blocks — under a write lease (§17.10-§17.11); none of these
# programs may notice it is preloaded. leases.py, write_leases.py and
# maps.py check the leases themselves, each on a mount of its own;
# stress.py runs many preloaded writers at once on this one.
#
#   bash tests/multiproc/run.sh [BIN_DIR]     (default target/debug)
#
# Needs root and /dev/fuse; without them it says so and exits 0
# (skipped). Installs what it needs (Debian: postgresql, fio, make, gcc,
# git, g++, libsqlite3-dev, liblmdb-dev, libleveldb-dev; pjdfstest from
# crates.io, as tests/fuse/run.sh does).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=$(cd "${1:-$top/target/debug}" && pwd)
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so

if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
    echo "tests/multiproc: skipped: needs root and /dev/fuse"
    exit 0
fi
[ -x "$amberfs" ] && [ -f "$lib" ] || {
    echo "tests/multiproc: build first: cargo build -p amber-cli -p amber-ffi-preload -p amber-ffi-served"; exit 1; }

# Debian's server binaries, of whichever major version it ships.
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
need_apt=()
[ -n "$(pg_bin)" ] || need_apt+=(postgresql)
command -v fio >/dev/null || need_apt+=(fio)
command -v make >/dev/null || need_apt+=(make)
command -v cc >/dev/null || need_apt+=(gcc)
command -v git >/dev/null || need_apt+=(git)
command -v pgrep >/dev/null || need_apt+=(procps)
[ -f /usr/include/sqlite3.h ] || need_apt+=(libsqlite3-dev)
[ -f /usr/include/lmdb.h ] || need_apt+=(liblmdb-dev)
[ -f /usr/include/leveldb/db.h ] || need_apt+=(libleveldb-dev)
command -v g++ >/dev/null || need_apt+=(g++)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need_apt[@]}" >/dev/null
fi
pgbin=$(pg_bin)
source "$top/tests/fuse/pjd.sh"
pjd_setup

work=$(mktemp -d /tmp/amberfs-multiproc.XXXXXX)
chmod 0755 "$work"
pool=/dev/shm/amberfs-multiproc-$$.pool
mnt=$work/mnt
mkdir -p "$mnt"
pg_pid_file=$work/pg.pid
cleanup() {
    [ -f "$pg_pid_file" ] && kill -9 "$(cat "$pg_pid_file")" 2>/dev/null || true
    "$amberfs" umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" >/dev/null 2>&1 || true
    rm -f "$pool"
    rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }

# Runs "$@" with the interposer preloaded over the pool and its mount.
pre() { LD_PRELOAD=$lib AMBERFS_POOL=$pool AMBERFS_MOUNT=$mnt "$@"; }

step "mkfs and mount; the interposer is loaded in every child"
"$amberfs" mkfs "$pool" --size 2G --inodes 262144 >/dev/null
"$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log"
pre bash -c 'grep -q libamberfs_preload /proc/$$/maps && sh -c "grep -q libamberfs_preload /proc/\$\$/maps"'
# A user who may not open the pool file is the mount's like any other,
# and the interposer says nothing about it.
echo shared > "$mnt/shared"
chmod 0644 "$mnt/shared"
[ "$(runuser -u tests -- env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$mnt" \
    cat "$mnt/shared" 2>"$work/err")" = shared ]
[ ! -s "$work/err" ] || { cat "$work/err"; echo "the interposer spoke for a mount client"; exit 1; }

step "pjdfstest, preloaded"
pjd_run "$mnt/pjd" "$work/pjd.log" env LD_PRELOAD="$lib" AMBERFS_POOL="$pool" AMBERFS_MOUNT="$mnt"

source "$here/programs.sh"
# What the programs above leased (the daemon's counters).
"$amberfs" stats "$mnt" | grep '^leases\.'

step "read leases: coherence across processes, forks, kill -9, a stopped lessee, a dead daemon"
python3 "$here/leases.py" "$bin"

step "write leases: leased overwrites and appends read right everywhere, a racing reader, kill -9 of the writer and of the daemon"
python3 "$here/write_leases.py" "$bin"

step "map leases: shared mappings on the pool's own pages, recalled by a kernel read, a truncate, a fork, kill -9 of a mapper and of the daemon"
python3 "$here/maps.py" "$bin"

step "stress: four preloaded workers, each writing its own file under write leases, all appending to one log"
pre python3 "$here/stress.py" "$mnt/stress" 4 8

step "unmount, fsck"
"$amberfs" umount "$mnt"
"$amberfs" fsck "$pool"
echo
echo "tests/multiproc: all passed"
