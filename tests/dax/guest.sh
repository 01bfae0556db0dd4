#!/bin/busybox sh
# /init of the guest tests/dax/run.sh boots: makes an fsdax namespace
# (ext4 -o dax on /dev/pmemN) and a device-dax one (/dev/daxN.M) on the two
# emulated NVDIMMs, runs the same checks on a pool in each, and prints
# AMBER-DAX-RESULT: PASS or FAIL as its last line before powering off.
/bin/busybox mkdir -p /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
echo "AMBER-DAX: guest up, kernel $(uname -r), $(grep -c ^processor /proc/cpuinfo) CPU(s)"
up=$(date +%s)

step() { echo "== [$(($(date +%s) - up))s] $*"; }
fail() {
    echo "AMBER-DAX: FAIL: $*"
    exit 1
}

load_modules() {
    for ko in $(cat /modules/order); do
        insmod "/modules/$ko" || fail "insmod $ko"
    done
}

# One fsdax and one devdax namespace, on labels the test writes itself.
make_namespaces() {
    step "namespaces"
    ndctl disable-region all
    ndctl init-labels -f all
    ndctl enable-region all
    ndctl create-namespace -r region0 -m fsdax || fail "ndctl create-namespace -m fsdax"
    # Two device-dax namespaces: one aligned to 2 MiB (huge pages; a file
    # on it cannot be mapped in 4 KiB blocks), one to 4 KiB (mappable).
    ndctl create-namespace -r region1 -m devdax -a 2M -s 512M || fail "ndctl create-namespace -m devdax -a 2M"
    ndctl create-namespace -r region1 -m devdax -a 4K -s 256M || fail "ndctl create-namespace -m devdax -a 4K"
    ls -l /dev/pmem* /dev/dax* || fail "no /dev/pmem or /dev/dax node"
}

# $1 pool, $2 what `info` must report as its kind.
check_info() {
    step "$1: info"
    amberfs info "$1" > /tmp/info.txt || fail "amberfs info $1"
    cat /tmp/info.txt
    grep -q "kind: *$2" /tmp/info.txt || fail "info does not report $2"
    grep -q 'map_sync: *yes' /tmp/info.txt || fail "info does not report MAP_SYNC"
    grep -q 'huge_page_aligned: *yes' /tmp/info.txt || fail "the mapping is not 2 MiB aligned"
    grep -q 'flush: *msync' /tmp/info.txt && fail "a DAX pool must not flush with msync"
    return 0
}

check_offline() {
    step "$1: offline put/get/ls"
    dd if=/dev/urandom of=/tmp/blob bs=4096 count=777 2>/dev/null
    amberfs mkdir "$1" /offline || fail "mkdir"
    amberfs put "$1" /tmp/blob /offline/blob || fail "put"
    amberfs get "$1" /offline/blob /tmp/blob.back || fail "get"
    cmp /tmp/blob /tmp/blob.back || fail "get returned other bytes than put"
    amberfs ls "$1" /offline -l || fail "ls"
}

check_mount() {
    step "$1: FUSE mount, copy a tree, diff -r"
    mkdir -p /mnt/amber
    amberfs mount "$1" /mnt/amber --log /tmp/daemon.log || fail "mount"
    cp -a /tree /mnt/amber/tree || fail "cp -a"
    cp /tmp/blob /mnt/amber/tree/blob
    diff -r /tree /mnt/amber/tree | grep -v '^Only in /mnt/amber/tree: blob' && fail "the copy differs"
    cmp /tmp/blob /mnt/amber/tree/blob || fail "blob differs through the mount"
    cmp /tmp/blob /mnt/amber/offline/blob || fail "put's blob differs through the mount"
    amberfs umount /mnt/amber || fail "umount"
    amberfs fsck "$1" || fail "fsck after umount"
    amberfs mount "$1" /mnt/amber --log /tmp/daemon.log || fail "mount again"
    diff -r /tree /mnt/amber/tree | grep -v '^Only in /mnt/amber/tree: blob' && fail "the copy differs after remount"
    amberfs umount /mnt/amber || fail "umount"
}

# kill -9 of the daemon mid-write, mounted -o sync: stores went straight
# to PM through the DAX mapping; the next mount recovers, the fsync'd file
# is intact, and the file being written holds a prefix of what was written
# to it, at least as long as it was seen before the kill.
check_kill() {
    step "$1: kill -9 the daemon while writing (-o sync), recover"
    amberfs mount "$1" /mnt/amber -o sync --log /tmp/daemon.log || fail "mount"
    dd if=/tmp/blob of=/mnt/amber/synced bs=4096 conv=fsync 2>/dev/null || fail "fsync'd write"
    dd if=/tmp/blob of=/mnt/amber/busy bs=1000 2>/dev/null &
    writer=$!
    tries=0
    seen=0
    until [ "$seen" -gt 100000 ]; do
        tries=$((tries + 1))
        [ $tries -lt 300 ] || fail "the writer made no progress"
        sleep 0.1
        seen=$(stat -c %s /mnt/amber/busy 2>/dev/null || echo 0)
    done
    pid=$(head -n 1 /run/amberfs/*.pid)
    [ -n "$pid" ] || fail "no daemon pid file"
    kill -9 "$pid"
    wait "$writer" 2>/dev/null
    umount -l /mnt/amber
    amberfs mount "$1" /mnt/amber --log /tmp/daemon.log || fail "mount after kill -9"
    cmp /tmp/blob /mnt/amber/synced || fail "an fsync'd file changed across kill -9"
    size=$(stat -c %s /mnt/amber/busy)
    echo "the file being written had $seen bytes before the kill, $size after"
    [ "$size" -ge "$seen" ] || fail "writes that returned under -o sync were lost"
    head -c "$size" /tmp/blob | cmp - /mnt/amber/busy || fail "the file holds bytes never written to it"
    diff -r /tree /mnt/amber/tree | grep -v '^Only in /mnt/amber/tree: blob' && fail "the tree changed across kill -9"
    amberfs umount /mnt/amber || fail "umount"
    amberfs fsck "$1" || fail "fsck after recovery"
}

# $1 pool, $2 mapped.c's mode: mapped files under the interposer (on DAX a
# MAP_SYNC mapping is accepted; "nomap" where the pool cannot map 4 KiB
# blocks), then fsck.
check_mapped() {
    [ -x /usr/local/bin/mapped ] || { step "$1: mapped files skipped (no cc on the host)"; return 0; }
    step "$1: mapped files under the interposer ($2)"
    AMBERFS_POOL="$1" AMBERFS_MOUNT=/amp LD_PRELOAD=/usr/local/bin/libamberfs_preload.so \
        mapped /amp "$2" || fail "mapped files on $1"
    amberfs fsck "$1" || fail "fsck after mapped files"
}

check_pool() {
    check_info "$1" "$2"
    check_offline "$1"
    check_mount "$1"
    check_kill "$1"
}

main() {
    load_modules
    make_namespaces
    pmem=$(ls /dev/pmem* | head -n 1)
    dax=$(ls /dev/dax* | head -n 1)
    dax4k=$(ls /dev/dax* | sed -n 2p)

    step "ext4 -o dax on $pmem"
    # By full path: busybox runs its own applets before PATH.
    /usr/local/bin/mke2fs -q -t ext4 -b 4096 -F "$pmem" || fail "mkfs.ext4"
    mkdir -p /mnt/pm
    mount -t ext4 -o dax "$pmem" /mnt/pm || fail "mount -o dax"
    grep " /mnt/pm " /proc/mounts
    step "mkfs a pool file on ext4-DAX"
    amberfs mkfs /mnt/pm/amber.pool --size 256M || fail "mkfs on ext4-DAX"
    check_pool /mnt/pm/amber.pool "file on a DAX file system (MAP_SYNC)"
    check_mapped /mnt/pm/amber.pool dax

    step "mkfs on device-dax $dax"
    amberfs mkfs "$dax" --force || fail "mkfs on device-dax"
    check_pool "$dax" "device-DAX"
    check_mapped "$dax" nomap

    step "mkfs on device-dax $dax4k (4 KiB alignment)"
    amberfs mkfs "$dax4k" --force || fail "mkfs on device-dax aligned to 4 KiB"
    check_mapped "$dax4k" dax

    step "crashtest (short)"
    amberfs crashtest --workload writes --max-images 100 || fail "crashtest"
    step "fsck both pools"
    amberfs fsck /mnt/pm/amber.pool || fail "fsck ext4-DAX pool"
    amberfs fsck "$dax" || fail "fsck device-dax pool"
    amberfs fsck "$dax4k" || fail "fsck 4 KiB device-dax pool"
    umount /mnt/pm
}

( main )
status=$?
step "done"
if [ $status = 0 ]; then
    echo "AMBER-DAX-RESULT: PASS"
else
    echo "AMBER-DAX-RESULT: FAIL (status $status)"
fi
sync
poweroff -f
