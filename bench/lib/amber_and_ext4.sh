# Sourced by benchmarks that compare an Amber mount with ext4 on a
# RAM-backed loop device: makes both, and removes both at exit.
#
#   amber_and_ext4 NAME SIZE [MKFS_ARGS...]
#
# Needs $amberfs (the binary). Sets $work (a fresh directory under /tmp,
# mode 0755, with the mounts at $work/amber and $work/ext4) and $pool
# (the pool, /dev/shm/NAME.pool). A benchmark that must stop something of
# its own first defines bench_cleanup before calling it.
amber_and_ext4() {
    local name=$1 size=$2
    shift 2
    work=$(mktemp -d "/tmp/$name.XXXXXX")
    chmod 0755 "$work"
    pool=/dev/shm/$name.pool
    _img=/dev/shm/$name-ext4.img
    _loopdev=""
    trap _amber_and_ext4_cleanup EXIT
    mkdir -p "$work/amber" "$work/ext4"
    "$amberfs" mkfs "$pool" --size "$size" "$@" >/dev/null
    "$amberfs" mount "$pool" "$work/amber" --log "$work/amber.log" >/dev/null
    truncate -s "$size" "$_img"
    _loopdev=$(losetup -f --show "$_img")
    mkfs.ext4 -q "$_loopdev"
    mount "$_loopdev" "$work/ext4"
}

_amber_and_ext4_cleanup() {
    if declare -F bench_cleanup >/dev/null; then bench_cleanup; fi
    "$amberfs" umount "$work/amber" >/dev/null 2>&1 || umount -l "$work/amber" 2>/dev/null || true
    umount "$work/ext4" 2>/dev/null || true
    [ -n "$_loopdev" ] && losetup -d "$_loopdev" 2>/dev/null || true
    rm -f "$pool" "$_img"
    rm -rf "$work"
}
