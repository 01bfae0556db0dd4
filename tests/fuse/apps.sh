#!/usr/bin/env bash
# Real applications on a mounted Amber pool, each followed by unmount,
# fsck and a fresh mount that must still show the content.
#
#   bash tests/fuse/apps.sh AMBERFS POOL MOUNTPOINT WORKDIR   (pool mounted)
set -euo pipefail
amberfs=$1 pool=$2 mnt=$3 work=$4
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

step() { printf '\n== %s\n' "$*"; }
cycle() {
    "$amberfs" umount "$mnt"
    "$amberfs" fsck "$pool"
    if [ -n "${AMBER_OPTIONS:-}" ]; then
        "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log" -o "$AMBER_OPTIONS"
    else
        "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log"
    fi
}

step "git: init, add, commit, clone, gc, fsck"
g="git -c user.name=amber -c user.email=amber@example.invalid -c init.defaultBranch=main"
mkdir "$mnt/git"
cp -r "$top/crates/amber-format/src" "$mnt/git/repo"
( cd "$mnt/git/repo" && $g init -q && $g add -A && $g commit -qm "first" \
  && echo "// more" >> lib.rs && $g commit -qam "second" )
$g clone -q "$mnt/git/repo" "$mnt/git/clone"
( cd "$mnt/git/clone" && $g gc -q && $g fsck --full --strict )
head_repo=$(cd "$mnt/git/repo" && git rev-parse HEAD)
cycle
( cd "$mnt/git/clone" && git fsck --full --strict >/dev/null && test "$(git rev-parse HEAD)" = "$head_repo" )
echo "git ok ($head_repo)"

step "mapped files: shared mappings through the page cache, msync, kill -9 of the daemon"
cc -Wall -Werror -o "$work/mapped" "$top/tests/preload/mapped.c"
mkdir "$mnt/mapped"
"$work/mapped" "$mnt/mapped" fuse
# What msync made durable survives kill -9 of the daemon; a store after it
# may be lost, never anything else (design.md §16.5).
python3 "$top/tests/preload/mapped_kill.py" store "$mnt/mapped/m.bin"
pid=$(pgrep -f "amberfs mount $pool $mnt" | head -n 1)
kill -9 "$pid"
umount -l "$mnt"
# The pool's lock goes with the daemon's last descriptor: wait until the
# process is gone (a busy machine takes a moment to reap it).
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
cycle_after_kill() {
    if [ -n "${AMBER_OPTIONS:-}" ]; then
        "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log" -o "$AMBER_OPTIONS"
    else
        "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log"
    fi
}
cycle_after_kill
python3 "$top/tests/preload/mapped_kill.py" check "$mnt/mapped/m.bin"
cycle
echo "mapped files ok"

step "tar: create and extract a source tree, byte-identical round trip"
tar -C "$top" -cf "$work/src.tar" crates docs
mkdir "$mnt/tar"
tar -C "$mnt/tar" -xf "$work/src.tar"
tar -C "$mnt/tar" -df "$work/src.tar"           # contents, modes, times, sizes
tar -C "$mnt/tar" -cf "$work/back.tar" crates docs
mkdir "$work/a" "$work/b"
tar -C "$work/a" -xf "$work/src.tar"
tar -C "$work/b" -xf "$work/back.tar"
diff -r "$work/a" "$work/b"
cycle
tar -C "$mnt/tar" -df "$work/src.tar"
echo "tar ok ($(tar -tf "$work/src.tar" | wc -l) entries)"

step "sqlite3: 10,000 inserts in transactions, integrity_check"
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
    for tx in $(seq 1 100); do
        echo "BEGIN;"
        for i in $(seq 1 100); do echo "INSERT INTO t(v) VALUES ('row $tx-$i');"; done
        echo "COMMIT;"
    done
} > "$work/inserts.sql"
mkdir "$mnt/db"
sqlite3 "$mnt/db/test.db" < "$work/inserts.sql"
test "$(sqlite3 "$mnt/db/test.db" 'PRAGMA integrity_check;')" = ok
test "$(sqlite3 "$mnt/db/test.db" 'SELECT count(*) FROM t;')" = 10000
cycle
test "$(sqlite3 "$mnt/db/test.db" 'PRAGMA integrity_check;')" = ok
test "$(sqlite3 "$mnt/db/test.db" 'SELECT count(*) FROM t;')" = 10000
echo "sqlite3 ok"

step "make: build a small C project"
mkdir -p "$mnt/cproj"
cat > "$mnt/cproj/util.c" <<'C'
int add(int a, int b) { return a + b; }
C
cat > "$mnt/cproj/main.c" <<'C'
#include <stdio.h>
int add(int, int);
int main(void) { printf("%d\n", add(40, 2)); return 0; }
C
printf 'hello: main.o util.o\n\tcc -o $@ $^\n%%.o: %%.c\n\tcc -c -o $@ $<\nclean:\n\trm -f hello *.o\n' > "$mnt/cproj/Makefile"
make -s -C "$mnt/cproj"
test "$("$mnt/cproj/hello")" = 42
make -s -C "$mnt/cproj"    # up to date: timestamps must say so
cycle
test "$("$mnt/cproj/hello")" = 42
test -z "$(make -s -n -C "$mnt/cproj")"    # still up to date after remount
echo "make ok"

step "cp -a: modes and timestamps preserved"
src=$work/cpsrc
mkdir -p "$src/sub/deeper"
echo one > "$src/a"; echo two > "$src/sub/b"; echo three > "$src/sub/deeper/c"
chmod 0640 "$src/a"; chmod 0751 "$src/sub"; chmod 4755 "$src/sub/b"
ln -s ../a "$src/sub/link"
ln "$src/sub/deeper/c" "$src/sub/hard"
touch -d '2001-02-03 04:05:06.123456789' "$src/a" "$src/sub/deeper/c"
cp -a "$src" "$mnt/cpdst"
listing() { (cd "$1" && find . -printf '%p %y %m %s %n %T@ %l\n' | sort); }
diff <(listing "$src") <(listing "$mnt/cpdst")
cycle
diff <(listing "$src") <(listing "$mnt/cpdst")
echo "cp -a ok"

step "extended attributes through setfattr/getfattr: a thousand of them, 64 KiB values"
touch "$mnt/x"
setfattr -n user.color -v blue "$mnt/x"
test "$(getfattr --only-values -n user.color "$mnt/x")" = blue
# A thousand attributes and a 64 KiB value on one file (a run of blocks);
# one byte more is E2BIG, as on ext4.
python3 - "$mnt/x" <<'PY'
import errno, os, sys
f = sys.argv[1]
for i in range(1000):
    os.setxattr(f, f"user.attr{i:04}", str(i).encode())
os.setxattr(f, "user.big", bytes(range(256)) * 256)
try:
    os.setxattr(f, "user.bigger", b"x" * 65537)
    sys.exit("a 65537-byte value was accepted")
except OSError as e:
    assert e.errno == errno.E2BIG, e
PY
cycle
test "$(getfattr --only-values -n user.color "$mnt/x")" = blue
python3 - "$mnt/x" <<'PY'
import os, sys
f = sys.argv[1]
names = os.listxattr(f)
assert len(names) == 1002, len(names)
assert os.getxattr(f, "user.attr0999") == b"999"
assert os.getxattr(f, "user.big") == bytes(range(256)) * 256
PY
echo "xattr ok"

step "per-file durability and atomicity: set, get, inherit, refuse"
dur=user.amberfs.durability atom=user.amberfs.atomicity
get() { getfattr --absolute-names --only-values -n "$1" "$2"; }
mkdir "$mnt/dur"
setfattr -n $dur -v sync "$mnt/dur"
mkdir "$mnt/dur/sub"
echo data > "$mnt/dur/sub/f"
test "$(get $dur "$mnt/dur/sub")" = sync
test "$(get $dur "$mnt/dur/sub/f")" = sync
setfattr -n $dur -v lazy "$mnt/dur/sub/f"
test "$(get $dur "$mnt/dur/sub/f")" = lazy
# A bad value or an unknown user.amberfs. name is EINVAL, the old value stays.
for bad in "$dur=eventually" "user.amberfs.speed=fast"; do
    if out=$(setfattr -n "${bad%%=*}" -v "${bad#*=}" "$mnt/dur/sub/f" 2>&1); then
        echo "setfattr $bad was accepted"; exit 1
    fi
    grep -q "Invalid argument" <<<"$out" || { echo "setfattr $bad: $out"; exit 1; }
done
test "$(get $dur "$mnt/dur/sub/f")" = lazy
# atomicity=write only under a policy whose every write is atomic; a
# mount that names none runs the default, amber.
policy=$(sed -n 's/.*policy=\([a-z-]*\).*/\1/p' <<<"${AMBER_OPTIONS:-}")
policy=${policy:-amber}
case "$policy" in
    amber|cow|finelog|lawn|nova) setfattr -n $atom -v write "$mnt/dur/sub/f" ;;
    *)
        if out=$(setfattr -n $atom -v write "$mnt/dur/sub/f" 2>&1); then
            echo "atomicity=write accepted under policy=$policy"; exit 1
        fi
        grep -q "Operation not supported" <<<"$out" || { echo "atomicity=write: $out"; exit 1; }
        ;;
esac
setfattr -n $atom -v none "$mnt/dur/sub/f"
cycle
test "$(get $dur "$mnt/dur/sub/f")" = lazy
test "$(get $dur "$mnt/dur")" = sync
test "$(cat "$mnt/dur/sub/f")" = data
setfattr -x $dur "$mnt/dur"
touch "$mnt/dur/g"
if get $dur "$mnt/dur/g" >/dev/null 2>&1; then
    echo "a file created after removexattr inherited"; exit 1
fi
echo "durability ok"

step "POSIX ACLs: setfacl/getfacl, enforcement, default ACLs, cp -a, tar --acls, --restore"
# The user `tests` (made by run.sh) is whom the ACLs name. Greps read
# all their input (no -q): an early exit would SIGPIPE the writer.
as_tests() { setpriv --reuid=tests --regid=tests --clear-groups "$@"; }
denied() { if as_tests "$@" 2>/dev/null; then echo "tests was allowed: $*"; exit 1; fi; }
acl=$mnt/acl
mkdir "$acl"; chmod 0755 "$acl"
echo secret > "$acl/f"; chmod 0640 "$acl/f"
denied cat "$acl/f"
setfacl -m u:tests:r "$acl/f"
test "$(as_tests cat "$acl/f")" = secret
test "$(stat -c %A "$acl/f")" = "-rw-r-----"
# chmod rewrites the mask: the named entry keeps r but is granted nothing.
chmod 0600 "$acl/f"
getfacl -cp "$acl/f" | grep >/dev/null "^user:tests:r--.*effective:---"
denied cat "$acl/f"
chmod 0640 "$acl/f"
# A default ACL replaces the umask for what is created under it.
mkdir "$acl/shared"
setfacl -d -m u:tests:rwx "$acl/shared"
( umask 077; echo x > "$acl/shared/new"; mkdir "$acl/shared/sub" )
getfacl -cp "$acl/shared/new" | grep >/dev/null "^user:tests:rwx"
test "$(stat -c %A "$acl/shared/new")" = "-rw-rw-r--"
as_tests sh -c "echo more >> '$acl/shared/new'"
getfacl -cpd "$acl/shared/sub" | grep >/dev/null "^user:tests:rwx"
setfacl -m g:tests:rx "$acl/shared/sub"
dump() { (cd "$mnt" && getfacl -R -p "$1" | sed "s|^# file: $1|# file: X|"); }
dump acl > "$work/acl.want"
cp -a "$acl" "$mnt/acl.cp"
diff "$work/acl.want" <(dump acl.cp)
tar --acls -C "$mnt" -cf "$work/acl.tar" acl
mkdir "$mnt/acl.tar"
tar --acls -C "$mnt/acl.tar" -xf "$work/acl.tar"
diff "$work/acl.want" <(dump acl.tar/acl)
setfacl -R -b -k "$mnt/acl.cp"
if getfacl -R -s -p "$mnt/acl.cp" | grep >/dev/null .; then echo "setfacl -b left ACLs"; exit 1; fi
(cd "$mnt" && getfacl -R acl | sed 's|^# file: acl|# file: acl.cp|' | setfacl --restore=-)
diff "$work/acl.want" <(dump acl.cp)
"$amberfs" umount "$mnt"
"$amberfs" fsck "$pool"
# Offline, under the policy the pool is mounted with.
offline=("$amberfs")
[ -n "${AMBER_OPTIONS:-}" ] && offline+=(-o "$AMBER_OPTIONS")
"${offline[@]}" ls -l "$pool" /acl | grep >/dev/null "^-rw-r-----+ .* f$"
"${offline[@]}" ls -l "$pool" /acl | grep >/dev/null "^drwxr-xr-x+ .* shared$"
cycle_after_kill
diff "$work/acl.want" <(dump acl)
test "$(as_tests cat "$acl/f")" = secret
echo "ACLs ok"
