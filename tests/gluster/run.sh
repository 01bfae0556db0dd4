#!/usr/bin/env bash
# GlusterFS on Amber (issue 33, point 5): a replica-3 volume whose three
# bricks are Amber mounts on this machine. A tree is copied in through the
# Gluster client while one brick's Amber daemon is killed with kill -9;
# that pool is recovered and remounted, its brick restarted, Gluster heals
# it, and then the client's tree equals the source, the three bricks hold
# identical trees, and each pool checks clean.
#
#   bash tests/gluster/run.sh [AMBERFS_BINARY]
#
# Needs root and /dev/fuse (skipped, saying so, without them). Installs
# Debian's glusterfs-server and glusterfs-client if missing. Starts its own
# glusterd unless one runs, and removes its volume afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
amberfs=${1:-$top/target/release/amberfs}
amberfs=$(cd "$(dirname "$amberfs")" && pwd)/$(basename "$amberfs")

if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
    echo "tests/gluster: skipped: needs root and /dev/fuse"
    exit 0
fi
if ! command -v glusterd >/dev/null || ! command -v mount.glusterfs >/dev/null; then
    apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 glusterfs-server glusterfs-client >/dev/null
fi
# Gluster refuses loopback addresses for bricks.
ip=$(hostname -I | tr ' ' '\n' | grep -m1 -E '^[0-9]+\.' || true)
if [ -z "$ip" ]; then
    echo "tests/gluster: skipped: no IPv4 address other than loopback"
    exit 0
fi

step() { printf '\n== %s (at %d s)\n' "$*" "$SECONDS"; }
work=$(mktemp -d /tmp/amberfs-gluster.XXXXXX)
vol=amber$$
client=$work/client
started_glusterd=""
pool() { echo "/dev/shm/amberfs-gluster-$$-$1.pool"; }
mnt() { echo "$work/m$1"; }
mount_pool() { "$amberfs" mount "$(pool "$1")" "$(mnt "$1")" --log "$work/amber$1.log"; }
daemon_of() { pgrep -f "amberfs mount $(pool "$1") " | head -n 1; }
cleanup() {
    set +e
    umount -l "$client" 2>/dev/null
    gluster --mode=script volume stop "$vol" force >/dev/null 2>&1
    gluster --mode=script volume delete "$vol" >/dev/null 2>&1
    pkill -f "glusterfsd.*$work" 2>/dev/null
    [ -n "$started_glusterd" ] && pkill -x glusterd
    for i in 1 2 3; do
        "$amberfs" umount "$(mnt "$i")" >/dev/null 2>&1 || umount -l "$(mnt "$i")" 2>/dev/null
        rm -f "$(pool "$i")"
    done
    rm -rf "$work"
}
trap cleanup EXIT

step "glusterd"
if ! pgrep -x glusterd >/dev/null; then
    glusterd --log-file="$work/glusterd.log"
    started_glusterd=1
    for _ in $(seq 1 100); do gluster pool list >/dev/null 2>&1 && break; sleep 0.1; done
fi
gluster --version | head -n 1

step "three Amber pools, mounted, a brick in each"
bricks=()
for i in 1 2 3; do
    "$amberfs" mkfs "$(pool "$i")" --size 1G >/dev/null
    mkdir -p "$(mnt "$i")"
    mount_pool "$i"
    mkdir "$(mnt "$i")/brick"
    bricks+=("$ip:$(mnt "$i")/brick")
done

step "a replica-3 volume on them, mounted through the Gluster client"
gluster --mode=script volume create "$vol" replica 3 "${bricks[@]}" force
gluster --mode=script volume start "$vol"
mkdir -p "$client"
mount -t glusterfs "$ip:/$vol" "$client"
# The client connects to the bricks after mount returns: wait until all
# three answer (a directory made and removed), so the copy starts whole.
bricks_up() {
    gluster volume status "$vol" --xml | grep -A2 "<path>$work/m" | grep -c '<status>1</status>'
}
connected() {
    [ "$(bricks_up)" = 3 ] && mkdir "$client/.probe" 2>/dev/null && rmdir "$client/.probe"
}
for _ in $(seq 1 300); do connected && break; sleep 0.1; done
connected

# No symlinks: Gluster 10.3's self-heal cannot recreate one on a brick
# that missed it (it retries a hard link of the symlink's GFID handle,
# which fails with ESTALE, forever) — on ext4 bricks just the same.
step "a source tree: 900 files up to 64 KiB and hard links"
python3 - "$work/src" <<'PY'
import os, random, sys
root = sys.argv[1]
r = random.Random(33)
for d in range(30):
    dd = os.path.join(root, f"d{d:02}", "sub" if d % 3 == 0 else "")
    os.makedirs(dd, exist_ok=True)
    for f in range(30):
        with open(os.path.join(dd, f"f{f:02}"), "wb") as out:
            out.write(r.randbytes(r.choice([0, 100, 4096, 5000, 65536])))
    os.link(os.path.join(dd, "f01"), os.path.join(dd, "hard"))
PY

step "copy it in; kill -9 brick 2's Amber daemon in the middle"
cp -a "$work/src" "$client/tree" &
copy=$!
for _ in $(seq 1 600); do
    n=$( (find "$client/tree" -type f 2>/dev/null || true) | wc -l)
    [ "$n" -ge 250 ] && break
    sleep 0.05
done
victim=$(daemon_of 2)
kill -9 "$victim"
echo "killed Amber daemon $victim of brick 2 after $n files"
wait "$copy"
echo "the copy finished on the other two bricks"

step "recover pool 2, remount it, restart its brick"
pkill -f "glusterfsd.*$(mnt 2)/brick" || true
umount -l "$(mnt 2)"
for _ in $(seq 1 100); do kill -0 "$victim" 2>/dev/null || break; sleep 0.1; done
mount_pool 2
gluster --mode=script volume start "$vol" force

step "heal"
# The first request may come before the heal daemon reconnected.
gluster volume heal "$vol" >/dev/null 2>&1 || true
pending=""
for _ in $(seq 1 240); do
    pending=$(gluster volume heal "$vol" info | awk '/^Number of entries:/ {s += $4} END {print s + 0}')
    [ "$pending" = 0 ] && break
    gluster volume heal "$vol" >/dev/null 2>&1 || true
    sleep 1
done
[ "$pending" = 0 ] || { echo "heal left $pending entries"; gluster volume heal "$vol" info; exit 1; }
echo "healed at $SECONDS s"

step "the client's tree equals the source; the three bricks are identical"
diff -r --no-dereference "$work/src" "$client/tree"
listing() {
    (cd "$1" && find . -path ./.glusterfs -prune -o -printf '%p %y %m %s %n %l\n' | sort)
    (cd "$1" && find . -path ./.glusterfs -prune -o -type f -print0 | sort -z | xargs -0 md5sum)
}
listing "$(mnt 1)/brick" > "$work/brick1"
for i in 2 3; do
    listing "$(mnt "$i")/brick" > "$work/brick$i"
    diff "$work/brick1" "$work/brick$i"
done
echo "bricks identical ($(wc -l < "$work/brick1") lines)"

step "unmount; each pool checks clean"
umount "$client"
gluster --mode=script volume stop "$vol" force >/dev/null
for i in 1 2 3; do
    "$amberfs" umount "$(mnt "$i")"
    "$amberfs" fsck "$(pool "$i")"
done
echo
echo "tests/gluster: all passed"
