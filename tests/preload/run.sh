#!/usr/bin/env bash
# Real programs under the LD_PRELOAD interposer (issue 16), each on a pool
# served in-process at a mount directory the kernel has only as an empty
# directory: sqlite3, fio (1 and 2 jobs as threads, crc32c verify), tar and
# diff -r, cp/cat/ls/find, python3, a LevelDB program, SQLite in WAL mode
# and LMDB (both map the files they write: issue 31), kill -9 of sqlite3
# (synchronous=FULL), of LevelDB and in the middle of WAL and LMDB runs,
# a shell's redirects into the pool, a shell holding the pool whose child
# fails under the mount, and the same
# command with a FUSE mount of the pool up (the interposer then passes
# through).
#
#   bash tests/preload/run.sh [TARGET_DIR]     (default target/debug)
#
# Needs amberfs and libamberfs_preload.so built in TARGET_DIR (cargo build -p
# amber-cli -p amber-ffi-preload -p amber-ffi-served). Installs sqlite3, fio, g++,
# libleveldb-dev, libsqlite3-dev and liblmdb-dev from Debian when root
# and missing. Any failure exits
# non-zero; the FUSE step is skipped (said so) without root or /dev/fuse.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bin=$(cd "${1:-$top/target/debug}" && pwd)
amberfs=$bin/amberfs
lib=$bin/libamberfs_preload.so
[ -x "$amberfs" ] && [ -f "$lib" ] || { echo "tests/preload: build first: cargo build -p amber-cli -p amber-ffi-preload -p amber-ffi-served"; exit 1; }

need=()
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v fio >/dev/null || need+=(fio)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/leveldb/db.h ] || need+=(libleveldb-dev)
[ -f /usr/include/sqlite3.h ] || need+=(libsqlite3-dev)
[ -f /usr/include/lmdb.h ] || need+=(liblmdb-dev)
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { echo "tests/preload: needs ${need[*]} (install them, or run as root)"; exit 1; }
    apt-get update -qq -o DPkg::Lock::Timeout=600 && apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${need[@]}" >/dev/null
fi

work=$(mktemp -d /tmp/amberfs-preload.XXXXXX)
pool=/dev/shm/amberfs-preload-$$.pool
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
    "$amberfs" umount "$mnt" >/dev/null 2>&1 || true
    rm -f "$pool"
    rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }
# Runs a command with the interposer serving $mnt from $pool.
served() { AMBERFS_POOL=$pool AMBERFS_MOUNT=$mnt LD_PRELOAD=$lib "$@"; }
# The pool must be clean (and its content checkable) between steps.
check_pool() { "$amberfs" fsck "$pool" >/dev/null || { "$amberfs" fsck "$pool"; exit 1; }; }
# Nothing may have reached the kernel's directory behind the mount.
kernel_untouched() { [ -z "$(ls -A "$mnt")" ] || { echo "files reached the kernel's $mnt:"; ls -la "$mnt"; exit 1; }; }

"$amberfs" mkfs "$pool" --size 1G >/dev/null

step "sqlite3: transactions, integrity_check, read back with amberfs get"
served mkdir "$mnt/db"
{
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
    for tx in $(seq 1 20); do
        echo "BEGIN;"
        for i in $(seq 1 50); do echo "INSERT INTO t(v) VALUES ('row $tx-$i');"; done
        echo "COMMIT;"
    done
    echo "UPDATE t SET v = v || ' updated' WHERE id % 7 = 0;"
    echo "DELETE FROM t WHERE id % 10 = 0;"
} > "$work/tx.sql"
served sqlite3 "$mnt/db/test.db" < "$work/tx.sql"
test "$(served sqlite3 "$mnt/db/test.db" 'PRAGMA integrity_check;')" = ok
test "$(served sqlite3 "$mnt/db/test.db" 'SELECT count(*) FROM t;')" = 900
kernel_untouched
check_pool
"$amberfs" get "$pool" /db/test.db "$work/back.db"
test "$(sqlite3 "$work/back.db" 'PRAGMA integrity_check;')" = ok
test "$(sqlite3 "$work/back.db" "SELECT count(*) FROM t WHERE v LIKE '%updated';")" = 128
echo "sqlite3 ok"

step "fio: psync random writes verified with crc32c, one job, then two jobs as threads"
served mkdir "$mnt/fio"
for jobs in 1 2; do
    served fio --name=verify$jobs --directory="$mnt/fio" --thread --numjobs=$jobs --ioengine=psync \
        --verify_state_save=0 --rw=randwrite --bs=4k --size=16M --verify=crc32c --verify_fatal=1 --do_verify=1 \
        --output-format=json --output="$work/fio$jobs.json"
    python3 - "$work/fio$jobs.json" "$jobs" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["jobs"]) == int(sys.argv[2]), j["jobs"]
for job in j["jobs"]:
    assert job["error"] == 0, job["error"]
    assert job["read"]["io_bytes"] == 16 << 20, job["read"]["io_bytes"]  # every block verified
print("fio", sys.argv[2], "job(s):", [round(job["write"]["iops"]) for job in j["jobs"]], "IOPS, verified")
PY
done
served rm -r "$mnt/fio"
kernel_untouched
check_pool

step "tar: extract a source tree into the pool, diff -r against the source"
tar -C "$top" -cf "$work/src.tar" crates docs
mkdir "$work/src"
tar -C "$work/src" -xf "$work/src.tar"
served mkdir "$mnt/tar"
served tar -C "$mnt/tar" -xf "$work/src.tar"
served tar -C "$mnt/tar" -df "$work/src.tar"
served diff -r "$work/src" "$mnt/tar"
kernel_untouched
check_pool
echo "tar ok ($(tar -tf "$work/src.tar" | wc -l) entries)"

step "cp, cat, ls, find"
served cp -r "$work/src/crates" "$mnt/copy"
# (Each served command runs alone: a second one while it still holds the
# pool would fail under the mount, as README says.)
served cat "$mnt/copy/amber-core/src/lib.rs" > "$work/lib.rs"
cmp "$work/lib.rs" "$work/src/crates/amber-core/src/lib.rs"
test "$(served find "$mnt/copy" -type f | wc -l)" = "$(find "$work/src/crates" -type f | wc -l)"
served ls "$mnt/copy" > "$work/ls.txt"
test "$(sort "$work/ls.txt")" = "$(ls "$work/src/crates" | sort)"
served ls -lR "$mnt/copy" > /dev/null
served cp "$mnt/copy/amber-core/Cargo.toml" "$work/out.toml"
cmp "$work/out.toml" "$work/src/crates/amber-core/Cargo.toml"
kernel_untouched
echo "cp/cat/ls/find ok"

step "python3: file I/O, directories, rename, walk"
served python3 - "$mnt" <<'PY'
import json, os, shutil, sys
m = sys.argv[1]
os.makedirs(f"{m}/py/a/b", exist_ok=True)
data = {"k": list(range(1000))}
with open(f"{m}/py/a/b/d.json", "w") as f:
    json.dump(data, f)
    f.flush()
    os.fsync(f.fileno())
with open(f"{m}/py/a/b/d.json") as f:
    assert json.load(f) == data
with open(f"{m}/py/bin", "wb") as f:
    f.write(os.urandom(1 << 20))
shutil.copytree(f"{m}/py/a", f"{m}/py/a2")
os.replace(f"{m}/py/a2/b/d.json", f"{m}/py/moved.json")
files = sorted(os.path.join(r, n)[len(m):] for r, _, ns in os.walk(f"{m}/py") for n in ns)
assert files == ["/py/a/b/d.json", "/py/bin", "/py/moved.json"], files
assert os.stat(f"{m}/py/bin").st_size == 1 << 20
os.chdir(f"{m}/py")
assert os.getcwd() == f"{m}/py" and os.path.exists("moved.json")
print("python3 ok")
PY
kernel_untouched
check_pool

step "LevelDB: write, close, reopen, read back"
g++ -O1 -o "$work/leveldb" "$here/leveldb.cc" -lleveldb
served "$work/leveldb" "$mnt/ldb" write 20000
served "$work/leveldb" "$mnt/ldb" check 20000
kernel_untouched
check_pool

# Starts CMD... under the interposer with stdin from $work/in, waits for
# it to print "ready", then kills it with SIGKILL.
kill_when_ready() {
    local out=$work/ready.out
    : > "$out"
    AMBERFS_POOL=$pool AMBERFS_MOUNT=$mnt LD_PRELOAD=$lib "$@" < "$work/in" > "$out" 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do grep -q ready "$out" && break; sleep 0.1; done
    grep -q ready "$out" || { echo "never got ready:"; cat "$out"; exit 1; }
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
}

step "SQLite in WAL mode and LMDB: each maps the files it writes"
cc -O1 -Wall -Werror -o "$work/dbs" "$here/dbs.c" -lsqlite3 -llmdb
served "$work/dbs" sqlite-run "$mnt/db/wal.db" 10000
served "$work/dbs" lmdb-run "$mnt/lmdb" 100000
kernel_untouched
check_pool

source "$here/kill_mid_run.sh"

step "kill -9 in the middle of a WAL run and of an LMDB run: every commit there"
kill_mid_run "$work/dbs" sqlite-run "$mnt/db/killed-wal.db" sqlite-check served
check_pool
kill_mid_run "$work/dbs" lmdb-run "$mnt/lmdb-killed" lmdb-check served
check_pool
echo "WAL and LMDB ok"

step "kill -9 after stores through a mapping and msync: the msync'd bytes there"
# The program maps a file, stores a pattern, msyncs, stores more, says
# "ready" and waits; after kill -9 the next open recovers the pool, the
# msync'd stores are all there and the later one is there or not.
AMBERFS_POOL=$pool AMBERFS_MOUNT=$mnt LD_PRELOAD=$lib \
    python3 "$here/mapped_kill.py" store "$mnt/mapped.bin" --wait > "$work/mapped.out" 2>&1 &
writer=$!
for _ in $(seq 1 600); do grep -q ready "$work/mapped.out" && break; sleep 0.1; done
grep -q ready "$work/mapped.out" || { cat "$work/mapped.out"; exit 1; }
kill -9 "$writer"
wait "$writer" 2>/dev/null || true
served python3 "$here/mapped_kill.py" check "$mnt/mapped.bin"
check_pool

step "kill -9: sqlite3 with synchronous=FULL, then LevelDB with sync writes"
{
    echo "PRAGMA synchronous=FULL;"
    echo "CREATE TABLE k(id INTEGER PRIMARY KEY, v TEXT);"
    for i in $(seq 1 200); do echo "INSERT INTO k(v) VALUES ('committed $i');"; done
    echo "SELECT 'ready';"
} > "$work/in.sql"
mkfifo "$work/in"
# The writer keeps the pipe open, so sqlite3 waits for more after "ready".
( cat "$work/in.sql"; sleep 60 ) > "$work/in" &
feeder=$!
kill_when_ready sqlite3 "$mnt/db/killed.db"
kill "$feeder" 2>/dev/null || true
"$amberfs" get "$pool" /db/killed.db "$work/killed.db"   # recovers the pool
test "$(sqlite3 "$work/killed.db" 'PRAGMA integrity_check;')" = ok
test "$(sqlite3 "$work/killed.db" 'SELECT count(*) FROM k;')" = 200
check_pool
( sleep 60 ) > "$work/in" &
feeder=$!
kill_when_ready "$work/leveldb" "$mnt/ldb-killed" sync-and-wait 3000
kill "$feeder" 2>/dev/null || true
served "$work/leveldb" "$mnt/ldb-killed" check 3000
check_pool
echo "kill -9 ok"

step "a shell's redirects into the pool, its builtins writing and reading them"
served bash -c "
    echo one > '$mnt/redir'
    printf '%s\n' two >> '$mnt/redir'
    { echo three; echo four >&2; } > '$mnt/redir.out' 2> '$mnt/redir.err'
    exec 3>> '$mnt/redir'; echo five >&3; exec 3>&-
    n=0; while read -r line; do n=\$((n + 1)); done < '$mnt/redir'
    test \$n = 3
    echo back on the terminal"
test "$(served cat "$mnt/redir")" = "$(printf 'one\ntwo\nfive')"
test "$(served cat "$mnt/redir.out")" = three
test "$(served cat "$mnt/redir.err")" = four
kernel_untouched
echo "redirects ok"

step "a shell holding the pool: the commands it starts fail under the mount, saying why"
# bash's own test (a builtin) opens the pool; touch, its child, cannot
# share it and must fail rather than create the file in the kernel's
# directory behind the mount. (The exit after it keeps bash from exec'ing
# touch in its own place, which would hand it the pool.)
rc=0
served bash -c "test -e '$mnt/db' && touch '$mnt/from-child'; exit \$?" 2> "$work/held.err" || rc=$?
test "$rc" -ne 0
grep -q "another process holds the pool" "$work/held.err" || { cat "$work/held.err"; exit 1; }
kernel_untouched
served test ! -e "$mnt/from-child"
echo "held pool ok: $(grep -c 'is not served' "$work/held.err") message"

step "the same command with the pool mounted through FUSE: passed through"
if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
    "$amberfs" mount "$pool" "$mnt" --log "$work/daemon.log"
    test "$(served sqlite3 "$mnt/db/test.db" 'SELECT count(*) FROM t;')" = 900
    served "$work/leveldb" "$mnt/ldb" check 20000
    "$amberfs" umount "$mnt"
    kernel_untouched
    echo "pass-through ok"
else
    echo "skipped: needs root and /dev/fuse"
fi
check_pool
echo
echo "tests/preload: all passed"
