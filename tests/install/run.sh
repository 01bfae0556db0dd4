#!/usr/bin/env bash
# install.sh into a temporary prefix (binaries from TARGET_DIR, default
# target/debug), then the C example built against the installed copy
# with pkg-config, shared and static, and run; the installed CLI and its
# mount helper link answer.
#
#   bash tests/install/run.sh [TARGET_DIR]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
from=$(cd "${1:-$top/target/debug}" && pwd)
command -v pkg-config >/dev/null || { echo "tests/install: needs pkg-config"; exit 1; }
prefix=$(mktemp -d /tmp/amberfs-install.XXXXXX)
pool=/dev/shm/amberfs-install-$$.pool
trap 'rm -rf "$prefix"; rm -f "$pool"' EXIT
bash "$top/install.sh" --prefix "$prefix" --sbindir "$prefix/sbin" --from "$from"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
test "$(pkg-config --modversion amberfs)" = "$(sed -n 's/^version = "\(.*\)"/\1/p' "$top/Cargo.toml" | head -1)"
example=$top/crates/amber-ffi/examples/example.c
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
cc -Wall -Werror -o "$prefix/example" "$example" $(pkg-config --cflags --libs amberfs)
LD_LIBRARY_PATH=$prefix/lib "$prefix/example" "$pool"
rm -f "$pool"
# shellcheck disable=SC2046
cc -Wall -Werror -o "$prefix/example-static" "$example" $(pkg-config --cflags amberfs) \
    "$prefix/lib/libamberfs.a" $(pkg-config --static --libs-only-l amberfs | sed 's/-lamberfs//')
"$prefix/example-static" "$pool"
"$prefix/bin/amberfs" --version
test "$(readlink "$prefix/sbin/mount.fuse.amberfs")" = "$prefix/bin/amberfs"
test -f "$prefix/lib/libamberfs_preload.so" && test -f "$prefix/lib/libamberfs_served.so" && test -f "$prefix/include/amberfs.h"
echo "tests/install: ok"
