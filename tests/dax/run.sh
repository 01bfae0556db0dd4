#!/usr/bin/env bash
# Amber on real DAX (issue 15 §7): boots a QEMU guest with two emulated
# NVDIMMs, one an fsdax namespace holding an ext4 file system mounted
# -o dax, the other a device-dax namespace, and runs tests/dax/guest.sh
# in it against a pool on each: mkfs, info (MAP_SYNC, device-DAX), offline
# put/get, a FUSE mount with a copied tree, kill -9 of the daemon and
# recovery, a short crashtest, fsck.
#
#   bash tests/dax/run.sh [AMBERFS_BINARY]      # default target/debug/amberfs
#
# The guest is an initramfs this script builds from the host: busybox
# (busybox-static), ndctl, mke2fs, the amberfs binary and the shared
# libraries ldd lists, and the kernel modules the test needs, booted with
# Debian's kernel under TCG (no KVM needed). It reports over the serial
# console; the guest's last line AMBER-DAX-RESULT: PASS or FAIL decides.
# Installs qemu-system-x86, linux-image-amd64, busybox-static and ndctl
# (Debian) when root; where they cannot be had, or the guest does not come
# up, it says why and exits 0 (skipped). AMBER_DAX_TIMEOUT (seconds,
# default 900) bounds the guest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
amberfs=$(realpath "${1:-$top/target/debug/amberfs}")
timeout_s=${AMBER_DAX_TIMEOUT:-900}

skip() {
    echo "tests/dax: skipped: $*"
    exit 0
}
[ -x "$amberfs" ] || { echo "tests/dax: $amberfs not built (cargo build --bin amberfs)"; exit 1; }
[ "$(uname -m)" = x86_64 ] || skip "the guest is x86-64 and this host is $(uname -m)"

have_tools() {
    command -v qemu-system-x86_64 >/dev/null && command -v ndctl >/dev/null &&
        command -v mke2fs >/dev/null && ls /boot/vmlinuz-* >/dev/null 2>&1 &&
        busybox_static >/dev/null
}
# Debian's busybox-static replaces the dynamic busybox at the same path.
busybox_static() {
    local bb
    bb=$(command -v busybox) || return 1
    ! ldd "$bb" >/dev/null 2>&1 && echo "$bb"
}
if ! have_tools; then
    [ "$(id -u)" = 0 ] || skip "qemu-system-x86, linux-image-amd64, busybox-static or ndctl missing and not root to install them"
    { apt-get update -qq -o DPkg::Lock::Timeout=600 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
        --no-install-recommends qemu-system-x86 linux-image-amd64 busybox-static ndctl e2fsprogs \
        >/dev/null; } || skip "could not install qemu-system-x86, linux-image-amd64, busybox-static, ndctl"
    have_tools || skip "qemu, a kernel in /boot, a static busybox or ndctl still missing after apt-get"
fi
kernel=$(ls /boot/vmlinuz-* | sort -V | tail -n 1)
kver=${kernel#/boot/vmlinuz-}
[ -d "/lib/modules/$kver" ] || skip "no modules for $kernel in /lib/modules/$kver"

work=$(mktemp -d /tmp/amberfs-dax.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
root=$work/root

# Copies binaries and the shared libraries each needs into the guest.
install_bin() {
    local bin lib
    for bin in "$@"; do
        cp -L "$bin" "$root/usr/local/bin/"
        for lib in $(ldd "$bin" 2>/dev/null | grep -o '/[^ ]*' || true); do
            [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
        done
    done
}

# The modules, in an order insmod can load them (dependencies first);
# -C /dev/null skips modprobe.d's install hooks (Debian's ndctl one for
# libnvdimm), which would hide the module behind a command.
install_modules() {
    local mod ko
    mkdir -p "$root/modules"
    : > "$root/modules/order"
    for mod in nfit nd_pmem dax_pmem device_dax crc32c_generic ext4 fuse; do
        for ko in $(modprobe -C /dev/null -S "$kver" --show-depends "$mod" | awk '$1 == "insmod" { print $2 }'); do
            grep -qx "$(basename "$ko")" "$root/modules/order" && continue
            case $ko in
                *.ko) cp "$ko" "$root/modules/" ;;
                *.ko.xz) xz -dc "$ko" > "$root/modules/$(basename "$ko" .xz)"; ko=${ko%.xz} ;;
                *.ko.zst) zstd -qdc "$ko" > "$root/modules/$(basename "$ko" .zst)"; ko=${ko%.zst} ;;
            esac
            basename "$ko" >> "$root/modules/order"
        done
    done
}

echo "== building the guest ($kernel, $(basename "$amberfs") $(du -h "$amberfs" | cut -f1))"
mkdir -p "$root"/{bin,sbin,usr/local/bin,proc,sys,dev,tmp,run,mnt,etc}
cp "$(busybox_static)" "$root/bin/busybox"
install_bin "$(command -v ndctl)" "$(command -v mke2fs)" "$amberfs"
# Mapped files under the interposer: tests/preload/mapped.c and the
# interposer (the shim and the library it loads) built beside the
# amberfs binary, with their libraries.
preload=$(dirname "$amberfs")/libamberfs_preload.so
if command -v cc >/dev/null && [ -f "$preload" ]; then
    cc -O1 -o "$work/mapped" "$top/tests/preload/mapped.c"
    install_bin "$work/mapped" "$preload" "$(dirname "$preload")/libamberfs_served.so"
fi
[ -e /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$root/etc/"
install_modules
cp "$here/guest.sh" "$root/init"
chmod 0755 "$root/init"
# Two of the host's crates (44 files and directories) make the tree the
# guest copies through the mount: every FUSE request is slow under TCG.
mkdir -p "$root/tree"
cp -a "$top/crates/amber-pmem" "$top/crates/amber-format" "$root/tree/"
( cd "$root" && find . | cpio -o -H newc --quiet ) > "$work/initramfs.cpio"

# Two NVDIMMs with label areas: the guest makes one fsdax, one devdax.
# QEMU takes the label area from the end of the backing file and places
# the next NVDIMM right after the PM it leaves; with 1 GiB left each, both
# regions start on the 16 MiB boundary ndctl wants for fsdax and devdax.
nvdimm_size=$(( (1 << 30) + (128 << 10) ))
for n in 0 1; do
    truncate -s "$nvdimm_size" "$work/nvdimm$n.img"
done
echo "== booting the guest (TCG; timeout ${timeout_s}s)"
start=$(date +%s)
status=0
timeout "$timeout_s" qemu-system-x86_64 -accel tcg -machine pc,nvdimm=on -cpu max -smp 2 \
    -m 2G,slots=2,maxmem=4G \
    -object memory-backend-file,id=mem0,share=on,mem-path="$work/nvdimm0.img",size=$nvdimm_size \
    -device nvdimm,id=nvdimm0,memdev=mem0,label-size=128K \
    -object memory-backend-file,id=mem1,share=on,mem-path="$work/nvdimm1.img",size=$nvdimm_size \
    -device nvdimm,id=nvdimm1,memdev=mem1,label-size=128K \
    -kernel "$kernel" -initrd "$work/initramfs.cpio" \
    -append "console=ttyS0 panic=-1 quiet" \
    -display none -monitor none -serial stdio -no-reboot </dev/null \
    | tee "$work/console.log" || status=$?
echo "== guest finished after $(( $(date +%s) - start ))s (qemu status $status)"
if grep -q '^AMBER-DAX-RESULT: PASS' "$work/console.log"; then
    echo "tests/dax: PASS"
    exit 0
fi
if ! grep -q '^AMBER-DAX: guest up' "$work/console.log"; then
    [ "$status" = 124 ] && skip "the guest did not come up within ${timeout_s}s"
    skip "the guest did not come up (qemu status $status)"
fi
echo "tests/dax: FAIL (see the guest's output above)"
exit 1
