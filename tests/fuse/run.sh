#!/usr/bin/env bash
# FUSE conformance and real applications on an Amber mount (issue 3).
#
#   bash tests/fuse/run.sh [AMBERFS_BINARY]
#
# By default it runs mkfs's and mount's defaults: the split layout and
# policy amber. AMBER_LAYOUT (mkfs --layout) and AMBER_OPTIONS (mount -o)
# run it under another policy, e.g.
#   AMBER_LAYOUT=classic AMBER_OPTIONS=policy=direct bash tests/fuse/run.sh
#
# Needs root and /dev/fuse; without them it says so and exits 0 (skipped).
# Installs what it needs: pjdfstest (crates.io), sqlite3, attr, acl (Debian).
# Every step prints what it does; any failure exits non-zero.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
amberfs=${1:-$top/target/release/amberfs}

if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
    echo "tests/fuse: skipped: needs root and /dev/fuse"
    exit 0
fi
[ -x "$amberfs" ] || { echo "tests/fuse: $amberfs not built (cargo build --release --bin amberfs)"; exit 1; }

need_apt=()
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)
command -v setfattr >/dev/null || need_apt+=(attr)
command -v setfacl >/dev/null || need_apt+=(acl)
command -v make >/dev/null || need_apt+=(make)
command -v cc >/dev/null || need_apt+=(gcc)
command -v git >/dev/null || need_apt+=(git)
if [ ${#need_apt[@]} -gt 0 ]; then
    apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need_apt[@]}" >/dev/null
fi
source "$here/pjd.sh"
pjd_setup

work=$(mktemp -d /tmp/amberfs-fuse.XXXXXX)
# pjdfstest switches to unprivileged users, who must reach the mount.
chmod 0755 "$work"
pool=/dev/shm/amberfs-fuse-$$.pool
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
    "$amberfs" umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" >/dev/null 2>&1 || true
    rm -f "$pool"
    rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
export AMBER_OPTIONS=${AMBER_OPTIONS:-}
opts=()
[ -n "$AMBER_OPTIONS" ] && opts=(-o "$AMBER_OPTIONS")
mount_pool() { "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log" "${opts[@]}"; }
cycle() {
    # Unmount (the pool is marked clean), check it, mount again.
    "$amberfs" umount "$mnt"
    "$amberfs" fsck "$pool"
    mount_pool
}

step "mkfs and mount"
layout=()
[ -n "${AMBER_LAYOUT:-}" ] && layout=(--layout "$AMBER_LAYOUT")
"$amberfs" mkfs "$pool" --size 2G --inodes 262144 "${layout[@]}"
mount_pool

step "statx attributes through FUSE (README: the kernel drops a daemon's)"
cc -O2 -Wall -Werror -o "$work/statx_probe" "$here/statx_probe.c" -lpthread
mkdir "$work/probe"
probe=$("$work/statx_probe" "$work/probe")
echo "$probe"
if grep -q "append shown" <<<"$probe"; then
    echo "this kernel passes statx attributes: README's note is stale; answer FUSE_STATX"; exit 1
fi

step "pjdfstest $("$pjd" --version 2>/dev/null || true)"
pjd_run "$mnt/pjd" "$work/pjd.log"

bash "$here/apps.sh" "$amberfs" "$pool" "$mnt" "$work"
echo
echo "tests/fuse: all passed"
