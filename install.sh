#!/usr/bin/env bash
# Installs Amber like a library and a file system: the amberfs CLI, the
# mount(8) helper mount.fuse.amberfs (a link to it), libamberfs.so and
# libamberfs.a, libamberfs_preload.so (and the libamberfs_served.so it
# loads), amberfs.h and amberfs.pc for
# pkg-config.
#
#   bash install.sh [--prefix DIR] [--destdir DIR] [--sbindir DIR] [--from TARGET_DIR]
#
#   --prefix   where it goes (default /usr/local): bin/, lib/, include/,
#              lib/pkgconfig/
#   --destdir  a staging root prepended to every path (packaging)
#   --sbindir  where the mount helper goes (default /sbin, the one place
#              mount(8) looks for helpers)
#   --from     take the binaries from this cargo target directory (e.g.
#              target/debug) instead of building a release first
#
# Then: cc app.c $(pkg-config --cflags --libs amberfs), and
# mount -t fuse.amberfs POOL DIR (README, "Install").
set -euo pipefail
top=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local destdir="" sbindir=/sbin from=""
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=$2; shift 2 ;;
        --destdir) destdir=$2; shift 2 ;;
        --sbindir) sbindir=$2; shift 2 ;;
        --from) from=$2; shift 2 ;;
        *) echo "install.sh: unknown argument $1 (see the comment at its top)" >&2; exit 2 ;;
    esac
done
case $prefix in /*) ;; *) echo "install.sh: --prefix must be absolute" >&2; exit 2 ;; esac
if [ -z "$from" ]; then
    (cd "$top" && cargo build --release -p amber-cli -p amber-ffi -p amber-ffi-preload -p amber-ffi-served)
    from=$top/target/release
fi
from=$(cd "$from" && pwd)
for f in amberfs libamberfs.so libamberfs.a libamberfs_preload.so libamberfs_served.so; do
    [ -f "$from/$f" ] || { echo "install.sh: $from/$f missing (build amber-cli, amber-ffi, amber-ffi-preload and amber-ffi-served)" >&2; exit 1; }
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$top/Cargo.toml" | head -1)
root=$destdir$prefix
install -d "$root/bin" "$root/lib/pkgconfig" "$root/include" "$destdir$sbindir"
install -m 0755 "$from/amberfs" "$root/bin/amberfs"
install -m 0755 "$from/libamberfs.so" "$from/libamberfs_preload.so" "$from/libamberfs_served.so" "$root/lib/"
install -m 0644 "$from/libamberfs.a" "$root/lib/"
install -m 0644 "$top/crates/amber-ffi/include/amberfs.h" "$root/include/"
ln -sf "$prefix/bin/amberfs" "$destdir$sbindir/mount.fuse.amberfs"
ln -sf "$prefix/bin/amberfs" "$destdir$sbindir/umount.fuse.amberfs"
cat > "$root/lib/pkgconfig/amberfs.pc" <<EOF
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: amberfs
Description: Amber, a persistent-memory file system in user space (libamberfs)
Version: $version
Libs: -L\${libdir} -lamberfs
Libs.private: -lpthread -ldl -lm
Cflags: -I\${includedir}
EOF
echo "installed amberfs $version under $destdir$prefix (mount helper in $destdir$sbindir)"
