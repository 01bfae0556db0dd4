# The programs of tests/multiproc/run.sh, each under `pre` (the
# interposer preloaded) in $mnt; sourced by it, with $work, $mnt, $here,
# $top, $pool, $lib, $pgbin, step() and pre() set.

step "a shell script of a few hundred file commands, against a plain directory"
# The same script on the mount, preloaded, and in a directory of /tmp,
# not: outputs and trees must be identical.
python3 "$here/shell_script.py" 300 > "$work/script.sh"
mkdir "$mnt/sh" "$work/sh-plain"
( cd "$mnt/sh" && pre bash "$work/script.sh" ) > "$work/sh-amber.out" 2>&1
( cd "$work/sh-plain" && bash "$work/script.sh" ) > "$work/sh-plain.out" 2>&1
diff "$work/sh-plain.out" "$work/sh-amber.out"
diff -r "$work/sh-plain" "$mnt/sh"
echo "$(wc -l < "$work/script.sh") commands, same output and tree"

step "make -j2 of a small C project"
mkdir "$mnt/proj"
for i in $(seq 1 24); do
    printf 'int f%d(int x) { return x * %d + 1; }\n' "$i" "$i" > "$mnt/proj/f$i.c"
done
{
    for i in $(seq 1 24); do printf 'int f%d(int);\n' "$i"; done
    printf '#include <stdio.h>\nint main(void) {\n    long s = 0;\n'
    for i in $(seq 1 24); do printf '    s += f%d(%d);\n' "$i" "$i"; done
    printf '    printf("%%ld\\n", s);\n    return 0;\n}\n'
} > "$mnt/proj/main.c"
cat > "$mnt/proj/Makefile" <<'EOF'
SRCS := $(wildcard *.c)
OBJS := $(SRCS:.c=.o)
prog: $(OBJS)
	$(CC) -o $@ $(OBJS)
%.o: %.c
	$(CC) -O1 -c -o $@ $<
EOF
pre make -s -j2 -C "$mnt/proj"
want=$(python3 -c 'print(sum(i * i + 1 for i in range(1, 25)))')
[ "$(pre "$mnt/proj/prog")" = "$want" ] || { echo "make: wrong program"; exit 1; }
pre make -q -C "$mnt/proj" prog || { echo "make: not up to date after a build"; exit 1; }

step "git: init, add, commit, status, log, clone, gc, fsck"
(
    cd "$mnt"
    export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t
    pre git init -q repo
    cd repo
    for i in 1 2 3; do
        cp -r "$mnt/proj" "src$i"
        pre git add "src$i"
        pre git commit -q -m "commit $i"
    done
    [ -z "$(pre git status --porcelain)" ] || { echo "git: tree not clean"; exit 1; }
    [ "$(pre git log --oneline | wc -l)" = 3 ] || { echo "git: log"; exit 1; }
    cd ..
    pre git clone -q repo clone
    pre git -C clone gc -q
    pre git -C clone fsck --strict --no-progress
    diff -r -x .git repo clone
)

step "Python multiprocessing: four workers write and read each other's files"
pre python3 "$here/workers.py" "$mnt/mp" 4 200

step "SQLite in WAL mode and LMDB, each mapping the file it writes: full runs, then kill -9 mid-run"
# LMDB maps its file and grows it by writes: a write lease would grow it
# behind the kernel, whose pages past its old end fault with SIGBUS, so a
# file the process maps is never written under one (design.md §17.14).
# Each check runs preloaded and not.
cc -O1 -Wall -Werror -o "$work/dbs" "$top/tests/preload/dbs.c" -lsqlite3 -llmdb
mkdir "$mnt/db"
pre "$work/dbs" sqlite-run "$mnt/db/wal.db" 5000
pre "$work/dbs" lmdb-run "$mnt/db/lmdb" 20000
"$work/dbs" sqlite-check "$mnt/db/wal.db" 5000
"$work/dbs" lmdb-check "$mnt/db/lmdb" 20000
source "$top/tests/preload/kill_mid_run.sh"
both() { pre "$@"; "$@"; }
kill_mid_run "$work/dbs" sqlite-run "$mnt/db/killed-wal.db" sqlite-check both
kill_mid_run "$work/dbs" lmdb-run "$mnt/db/lmdb-killed" lmdb-check both
echo "WAL and LMDB ok"

step "LevelDB: 20,000 puts across compactions, checked preloaded and not"
# LevelDB lists its directory and then stats the table it just wrote: a
# listing's attributes must not be the size from before a write lease.
g++ -O1 -o "$work/leveldb" "$top/tests/preload/leveldb.cc" -lleveldb
pre "$work/leveldb" "$mnt/db/ldb" write 20000
pre "$work/leveldb" "$mnt/db/ldb" check 20000
"$work/leveldb" "$mnt/db/ldb" check 20000

step "fio: two job processes, random writes verified by crc32c"
pre fio --name=mp --directory="$mnt" --numjobs=2 --size=16m --bs=4k --rw=randwrite \
    --ioengine=psync --fsync=16 --verify=crc32c --do_verify=1 --verify_state_save=0 \
    --group_reporting \
    --output="$work/fio.txt" >/dev/null
grep -E "WRITE:|err=" "$work/fio.txt" | head -3
grep -q "err= 0" "$work/fio.txt" || { echo "fio: errors"; exit 1; }

step "PostgreSQL: initdb, pgbench, kill -9 of the postmaster mid-run, recovery, amcheck"
source "$here/postgres.sh"
