#!/usr/bin/env python3
"""Write leases (issue 32, design.md §17.4-§17.6, §17.10-§17.11): a
preloaded process writes a file on an `amberfs mount` from its own
mapping of the pool into blocks the daemon granted — an overwrite inside
a block as an own commit, any other write (appends, across blocks, into
holes) with an attribute entry of its own — durable on return; the
daemon adopts them when the lease comes back.

    python3 tests/multiproc/write_leases.py BIN_DIR [SEED]

One pool and one mount serve every case; the last kills the daemon.
Checked, with an oracle kept in this (not preloaded) process:

* leased writes (whole blocks, a few bytes, 128 B, across blocks, past
  the end; pwrite and write), ftruncate up and down and posix_fallocate
  are read back right by this process through
  the kernel, and survive a remount; the daemon counts write leases
  granted; fstat and stat show the writes' time; another process's
  O_APPEND writes follow them;
* appends under a lease: the file read through the kernel, and its size
  by fstat and lseek(SEEK_END) in the writer (recalling nothing) and by
  stat elsewhere, are the writer's;
* a leased descriptor closed and its number reopened without the hooks
  (stdio's fclose and fopen, or raw close and openat system calls)
  takes no leased write: reopened read-only, every write fails with
  EBADF; reopened on another file, the writes are that file's;
* O_APPEND writers, one and two at once, writing and writev-ing records:
  every record whole, none overlapping, each writer's in order;
* a reader through the kernel racing a leased writer never reads a block
  older than the writer had finished writing before the read began, nor
  does a load from a `MAP_SHARED` mapping of the file through the kernel;
* a directory listing with attributes, or a hard link, while a leased
  writer grows a file caches the writer's size, not the one from before
  the lease; SEEK_DATA and SEEK_HOLE see a leased write into a hole;
* a leased writer's shrink followed by another process's fsync
  through the kernel keeps the shrink and every write;
* chattr +i of a file under a write lease takes the lease back: every
  later write and truncate fails with EPERM and the file keeps its bytes;
  chattr -i lets the writer write again;
* kill -9 of a leased writer — overwriting or appending — keeps every
  write it reported done, and its grant comes back (fsck clean at the
  end);
* SQLite in WAL mode (a commit per row, synchronous=FULL) in a
  preloaded process keeps its write lease across its WAL's restarts (a
  frame's 24-byte header, then its page across two blocks: one zone
  extent, not a lease returned per commit); a reader through the kernel
  sees every row committed before its query began; kill -9 of the
  writer keeps every commit, and integrity_check is clean;
* kill -9 of the daemon: every write a lessee reported done is there
  after the next mount, whose fsck is clean; the lessee's later writes
  fail, never land in a pool nobody owns.

Randomized rounds print their seed; pass it as SEED to replay them.
"""
import ctypes
import errno
import fcntl
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leases import ask, run_cases, wait_for, write_file  # noqa: E402

BLOCK = 4096
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x10
WRITES_TO_LEASE = 40  # enough kernel writes to connect (32) and lease


def helper(_mode, path):
    """The preloaded writer: follows commands on stdin, one line each,
    answering on stdout. `w OFF HEX` pwrites (then fsyncs), `s OFF HEX`
    writes at OFF with lseek+write, `t LEN` ftruncates, `f OFF LEN`
    posix_fallocates, `mtime` and
    `size` answer fstat's, `end OFF` lseeks from the end,
    `run N SEED` rewrites block-stamped versions and `append SEED` appends
    versioned records until killed, reporting each one done on stdout."""
    fd = os.open(path, os.O_RDWR)
    for _ in range(WRITES_TO_LEASE):
        os.pwrite(fd, os.pread(fd, 16, 0), 0)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        try:
            if words[0] == "w":
                os.pwrite(fd, bytes.fromhex(words[2]), int(words[1]))
                os.fsync(fd)
                print("ok", flush=True)
            elif words[0] == "s":
                os.lseek(fd, int(words[1]), 0)
                os.write(fd, bytes.fromhex(words[2]))
                print("ok", os.lseek(fd, 0, 1), flush=True)
            elif words[0] == "t":
                os.ftruncate(fd, int(words[1]))
                print("ok", flush=True)
            elif words[0] == "tf":
                os.ftruncate(fd, int(words[1]))
                os.fsync(fd)
                print("ok", flush=True)
            elif words[0] == "f":
                os.posix_fallocate(fd, int(words[1]), int(words[2]))
                print("ok", flush=True)
            elif words[0] == "mtime":
                print(os.fstat(fd).st_mtime_ns, flush=True)
            elif words[0] == "size":
                print(os.fstat(fd).st_size, flush=True)
            elif words[0] == "end":
                print(os.lseek(fd, int(words[1]), os.SEEK_END), flush=True)
            elif words[0] == "run":
                stamp_versions(fd, int(words[1]), int(words[2]))
            elif words[0] == "append":
                append_versions(fd, int(words[1]))
            elif words[0] == "reopen":
                print(*reopen_behind_the_hooks(fd, path, words[1]), flush=True)
            elif words[0] == "exec":
                os.execv("/bin/sh", ["sh", "-c", "sleep 0.5; echo done"])
            elif words[0] == "exit":
                return
        except OSError as e:
            print("error", e.errno, flush=True)


def row_value(k):
    return (b"%08d" % k) * 12


def sqlite_writer(path):
    """The preloaded SQLite writer: `run N` commits N more rows, one
    transaction each, printing each row's number once committed."""
    import sqlite3
    db = sqlite3.connect(path, isolation_level=None)
    assert db.execute("pragma journal_mode=wal").fetchone()[0] == "wal"
    db.execute("pragma synchronous=full")
    db.execute("create table if not exists t(k integer primary key, v blob)")
    k = db.execute("select count(*) from t").fetchone()[0]
    print("ready", flush=True)
    for line in sys.stdin:
        for _ in range(int(line.split()[1])):
            k += 1
            db.execute("begin")
            db.execute("insert into t values (?, ?)", (k, row_value(k)))
            db.execute("commit")
            print(k, flush=True)


def reopen_behind_the_hooks(fd, path, how):
    """Closes `fd` and opens a file on its number without the descriptor
    hooks, then writes a byte to `fd` more times than the lease path
    waits before it asks (`WRITES_TO_LEASE`). `how`: `stdio` opens
    `path` read-only as glibc's stdio does (fclose's and fopen's own
    close and open); `raw-ro` does the same with raw system calls;
    `raw-other` opens `path`.other read-write with raw system calls.
    Answers how the writes ended and whether the number was reused."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fdopen.restype = libc.fopen.restype = ctypes.c_void_p
    libc.fclose.argtypes = libc.fileno.argtypes = [ctypes.c_void_p]
    libc.syscall.restype = ctypes.c_long
    at_fdcwd = -100
    if how == "stdio":
        libc.fclose(libc.fdopen(fd, b"r+"))
        same = libc.fileno(libc.fopen(path.encode(), b"r")) == fd
    else:
        libc.syscall(3, fd)  # SYS_close
        name, flags = (path, os.O_RDONLY) if how == "raw-ro" else (path + ".other", os.O_RDWR)
        same = libc.syscall(257, at_fdcwd, name.encode(), flags, 0) == fd  # SYS_openat
    ended = set()
    for _ in range(WRITES_TO_LEASE):
        try:
            os.write(fd, b"x")
            ended.add("wrote")
        except OSError as e:
            ended.add(f"refused-{e.errno}")
    return ",".join(sorted(ended)), same


def stamp_versions(fd, blocks, seed):
    """Writes version v into block v % blocks (its first 8 bytes, then
    filler) and reports `v` once the write returned, forever."""
    r = random.Random(seed)
    v = 0
    while True:
        v += 1
        b = v % blocks
        small = r.random() < 0.5
        data = struct.pack("<Q", v) + (b"" if small else b"y" * (BLOCK - 8))
        try:
            os.pwrite(fd, data, BLOCK * b)
        except OSError as e:
            print("error", e.errno, flush=True)
            return
        print(v, flush=True)


def append_versions(fd, seed):
    """Appends records — version v, its length, then filler — of random
    lengths, reporting `v` once each write returned, forever."""
    r = random.Random(seed)
    v = 0
    while True:
        v += 1
        n = 16 + r.randrange(3 * BLOCK)
        try:
            os.write(fd, struct.pack("<QQ", v, n) + b"a" * (n - 16))
        except OSError as e:
            print("error", e.errno, flush=True)
            return
        print(v, flush=True)


def appended_versions(data):
    """The versions `append_versions` left in `data`, checked in order."""
    at, v = 0, 0
    while at + 16 <= len(data):
        got, n = struct.unpack_from("<QQ", data, at)
        assert got == v + 1 and at + n <= len(data), f"record {v + 1} torn or missing at {at}"
        at, v = at + n, got
    return v


def spawn(m, name):
    return m.spawn("write", name, __file__)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def leased_writes_are_read_right_everywhere(m, rng):
    model = bytearray(rng.randbytes(64 * BLOCK))
    write_file(m.path("a"), model)
    before = m.leases()["granted_write"]
    p = spawn(m, "a")
    leased_fallocates = 0
    for i in range(300):
        b = rng.randrange(64)
        shape = rng.choice(["block", "bytes", "128", "seek", "across", "past", "trunc", "falloc"])
        if shape == "falloc":
            # posix_fallocate under the lease: holes and the end, no recall.
            off, n = rng.randrange(len(model) + 2 * BLOCK), rng.randrange(1, 3 * BLOCK)
            recalled = m.leases()["recalled"]
            assert ask(p, f"f {off} {n}") == "ok", f"round {i}: posix_fallocate failed"
            leased_fallocates += m.leases()["recalled"] == recalled
            model.extend(b"\0" * max(0, off + n - len(model)))
            continue
        if shape == "trunc":
            # ftruncate under the lease: up (zeros), or down (ends it).
            size = rng.randrange(60 * BLOCK, 70 * BLOCK)
            assert ask(p, f"t {size}") == "ok", f"round {i}: ftruncate failed"
            model = model[:size] + bytearray(max(0, size - len(model)))
            assert read_file(m.path("a")) == bytes(model), f"round {i} (trunc): wrong bytes"
            continue
        off, n = {
            "block": (b * BLOCK, BLOCK),
            "bytes": (b * BLOCK + rng.randrange(BLOCK - 3), 3),
            "128": (b * BLOCK + 100, 128),
            "seek": (b * BLOCK + 8, 500),
            "across": (b * BLOCK + BLOCK - 10, 20),
            "past": (len(model) - 5, 100),
        }[shape]
        data = rng.randbytes(n)
        verb = "s" if shape == "seek" else "w"
        got = ask(p, f"{verb} {off} {data.hex()}")
        assert got.startswith("ok"), f"round {i} ({shape}): {got}"
        if verb == "s":
            assert got == f"ok {off + n}", f"round {i}: write() left the offset at {got}"
        model.extend(b"\0" * max(0, off + n - len(model)))
        model[off:off + n] = data
        if i % 25 == 0 or shape in ("across", "past"):
            assert read_file(m.path("a")) == bytes(model), f"round {i} ({shape}): wrong bytes"
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    assert leased_fallocates > 0, "no posix_fallocate was made under the lease"
    ask(p, "w 0 00")
    model[0] = 0
    mtime = int(ask(p, "mtime"))
    assert mtime >= time.time_ns() - 5_000_000_000, "fstat shows an old mtime"
    # Another process's stat recalls the lease (the grant dropped the
    # kernel's cached attributes): the same time, to the nanosecond.
    assert os.stat(m.path("a")).st_mtime_ns == mtime, "stat's mtime differs from fstat's"
    ask(p, "exit")
    p.wait()
    assert read_file(m.path("a")) == bytes(model), "the file lost a leased write"
    # Another process's O_APPEND descriptor: its appends follow every
    # write the lease made.
    code = ("import os,sys\nfd=os.open(sys.argv[1],os.O_WRONLY|os.O_APPEND)\n"
            "for i in range(50): os.write(fd,b'z'*100)\n")
    subprocess.run([sys.executable, "-c", code, m.path("a")], env=m.env(), check=True)
    model.extend(b"z" * 5000)
    assert read_file(m.path("a")) == bytes(model), "appends went wrong"


def appends_are_leased_and_seen_everywhere(m, rng):
    model = bytearray(rng.randbytes(BLOCK + 100))
    write_file(m.path("ap"), model)
    before = m.leases()["granted_write"]
    p = spawn(m, "ap")
    for i in range(200):
        data = rng.randbytes(rng.choice([1, 100, 4000, 4096, 9000, 70000]))
        end = len(model)
        got = ask(p, f"s {end} {data.hex()}")
        assert got == f"ok {end + len(data)}", f"round {i}: {got}"
        model += data
        if i % 20 == 19:
            # The writer's own fstat and lseek(SEEK_END) answer from its
            # lease, recalling nothing.
            recalled = m.leases()["recalled"]
            assert int(ask(p, "end -1")) == len(model) - 1, f"round {i}: lseek(SEEK_END)"
            assert int(ask(p, "size")) == len(model), f"round {i}: fstat's size"
            assert m.leases()["recalled"] == recalled, f"round {i}: the writer recalled its lease"
            assert os.stat(m.path("ap")).st_size == len(model), f"round {i}: stat's size"
            assert read_file(m.path("ap")) == bytes(model), f"round {i}: wrong bytes"
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    ask(p, "exit")
    p.wait()
    assert read_file(m.path("ap")) == bytes(model), "the file lost an append"


APPENDER = """
import os, struct, sys
w, n, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import random
r = random.Random(seed)
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for i in range(n):
    size = 16 + r.randrange(6000)
    head = struct.pack("<IIQ", w, i, size)
    body = bytes([65 + w]) * (size - 16)
    if i % 2:
        os.writev(fd, [head, body])
    else:
        os.write(fd, head + body)
    if i % 97 == 0:
        assert os.fstat(fd).st_size >= os.lseek(fd, 0, 1), "fstat behind the offset"
"""


def o_append_writers_never_overlap(m, rng):
    """O_APPEND writers, alone and two at once, write and writev records
    of random lengths: every record whole, none overlapping another, each
    writer's in order; a lone one takes a write lease."""
    for writers in (1, 2):
        name = f"log{writers}"
        write_file(m.path(name), b"")
        before = m.leases()["granted_write"]
        n = 2000
        procs = [subprocess.Popen([sys.executable, "-c", APPENDER, m.path(name), str(w), str(n),
                                   str(rng.randrange(1 << 30))], env=m.env())
                 for w in range(writers)]
        for p in procs:
            assert p.wait() == 0, "an appender failed"
        data = read_file(m.path(name))
        at, seen = 0, [0] * writers
        while at < len(data):
            w, i, size = struct.unpack_from("<IIQ", data, at)
            assert w < writers and i == seen[w], f"record at {at}: writer {w} #{i}, expected #{seen[w]}"
            assert data[at + 16:at + size] == bytes([65 + w]) * (size - 16), f"record at {at} torn"
            seen[w] += 1
            at += size
        assert seen == [n] * writers, f"records seen: {seen}"
        assert os.stat(m.path(name)).st_size == len(data)
        if writers == 1:
            assert m.leases()["granted_write"] > before, "a lone O_APPEND writer took no lease"


def a_reader_racing_a_leased_writer_never_reads_old(m, _rng):
    blocks = 8
    write_file(m.path("race"), b"\0" * BLOCK * blocks)
    p = spawn(m, "race")
    p.stdin.write(f"run {blocks} 3\n")
    p.stdin.flush()
    done = 0
    fd = os.open(m.path("race"), os.O_RDONLY)
    reads = 0
    end = time.time() + 2.0
    while time.time() < end:
        line = p.stdout.readline()
        done = int(line)
        b = done % blocks
        got = struct.unpack("<Q", os.pread(fd, 8, BLOCK * b))[0]
        assert got >= done, f"read version {got} of block {b} after {done} was done"
        reads += 1
    os.close(fd)
    p.kill()
    p.wait()
    print(f"      {done} leased writes, {reads} kernel reads, none stale")


def a_mapping_never_shows_old(m, _rng):
    """A `MAP_SHARED` mapping of the file through the kernel, in this
    process, racing a leased writer: a page never shows a block older
    than the writer had finished writing before the load. (A write grant
    first drops the kernel's pages of the file, and a page faulted in
    again recalls the lease.) Then another, preloaded, process's store
    into its own mapping is in this one's at once."""
    import mmap
    blocks = 8
    write_file(m.path("mapped"), b"\0" * BLOCK * blocks)
    fd = os.open(m.path("mapped"), os.O_RDONLY)
    pages = mmap.mmap(fd, BLOCK * blocks, mmap.MAP_SHARED, mmap.PROT_READ)
    assert pages[:8] == b"\0" * 8
    before = m.leases()["granted_write"]
    p = spawn(m, "mapped")
    p.stdin.write(f"run {blocks} 5\n")
    p.stdin.flush()
    done, loads = 0, 0
    end = time.time() + 2.0
    while time.time() < end:
        done = int(p.stdout.readline())
        b = done % blocks
        got = struct.unpack_from("<Q", pages, BLOCK * b)[0]
        assert got >= done, f"the mapping shows version {got} of block {b} after {done} was done"
        loads += 1
    p.kill()
    p.wait()
    # Another process's store into its own shared mapping is in this
    # one's at once: one page cache, every process's.
    code = ("import mmap,os,sys\nfd=os.open(sys.argv[1],os.O_RDWR)\n"
            "m=mmap.mmap(fd,4096,mmap.MAP_SHARED)\nm[8:16]=b'storedit'\n"
            "print('stored',flush=True)\nsys.stdin.readline()\nm.flush()\n")
    other = subprocess.Popen([sys.executable, "-c", code, m.path("mapped")], env=m.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "stored"
    assert pages[8:16] == b"storedit", "another process's store is not in this mapping"
    other.stdin.write("\n")
    other.stdin.flush()
    assert other.wait() == 0
    assert read_file(m.path("mapped"))[8:16] == b"storedit", "msync lost the store"
    pages.close()
    os.close(fd)
    granted = m.leases()["granted_write"] - before
    assert granted > 0, "no write lease was granted beside the mapping"
    print(f"      {done} writes ({granted} write leases), {loads} loads, none stale")


def a_listing_shows_a_leased_writers_size(m, rng):
    """A directory listed with attributes (readdirplus, which the kernel
    caches as a `stat`'s), or a hard link made, while a leased writer
    grows a file: each recalls the lease first, so the `stat` after it,
    answered from the kernel's cache, shows the writer's size (LevelDB
    lists its directory, then stats the table it just wrote)."""
    os.mkdir(m.path("listed"))
    name = os.path.join("listed", "t")
    write_file(m.path(name), b"\0" * BLOCK)
    p = spawn(m, name)
    for round_ in range(5):
        before = m.leases()["granted_write"]
        size = os.stat(m.path(name)).st_size
        # The first few go through the kernel, until the writer asks
        # for its lease again.
        for _ in range(12):
            x = rng.randbytes(1 + rng.randrange(3 * BLOCK))
            assert ask(p, f"w {size} {x.hex()}") == "ok"
            size += len(x)
        assert m.leases()["granted_write"] > before, f"round {round_}: no write lease"
        if round_ % 2:
            linked = m.path(f"{name}.{round_}")
            os.link(m.path(name), linked)
            assert os.stat(linked).st_size == size, f"round {round_}: a stale size after a link"
        else:
            assert "t" in os.listdir(m.path("listed"))
            assert os.stat(m.path(name)).st_size == size, f"round {round_}: a stale size after a listing"
    ask(p, "exit")
    p.wait()


def seek_data_finds_a_leased_write_into_a_hole(m, rng):
    """SEEK_DATA and SEEK_HOLE, by this process through the kernel, over
    a sparse file a leased writer fills a hole of and grows: the daemon
    recalls the lease before it says where data lies."""
    path = m.path("sparse")
    write_file(path, b"\1" * BLOCK)
    os.truncate(path, 64 * BLOCK)
    # Open before the writes: no lookup of the name comes between.
    fd = os.open(path, os.O_RDONLY)
    before = m.leases()["granted_write"]
    p = spawn(m, "sparse")
    for b in (40, 41, 70):
        assert ask(p, f"w {b * BLOCK} {rng.randbytes(BLOCK).hex()}") == "ok"
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    try:
        assert os.lseek(fd, BLOCK, os.SEEK_DATA) == 40 * BLOCK, "SEEK_DATA missed a leased write"
        assert os.lseek(fd, 40 * BLOCK, os.SEEK_HOLE) == 42 * BLOCK, "SEEK_HOLE ran past it"
        assert os.lseek(fd, 60 * BLOCK, os.SEEK_DATA) == 70 * BLOCK, "SEEK_DATA missed the growth"
    finally:
        os.close(fd)
    ask(p, "exit")
    p.wait()


def a_shrink_under_the_lease_survives_an_fsync_elsewhere(m, rng):
    """A leased writer shrinks a file (an attribute entry of the lease's,
    which it then returns) after the kernel reads and writes that won it
    the lease moved the file's times in the daemon, and then it, and
    another process on a descriptor opened before, fsync the file through
    the kernel: the daemon's entry of the old size never overwrites the
    writer's newest (found as a shrink undone by
    tests/multiproc/stress.py, design.md §17.11)."""
    model = bytearray(rng.randbytes(64 * BLOCK))
    write_file(m.path("sh"), model)
    fd = os.open(m.path("sh"), os.O_RDONLY)
    before = m.leases()["granted_write"]
    for i in range(8):
        p = spawn(m, "sh")
        # The helper's kernel writes rewrote the file's first 16 bytes.
        off = rng.randrange(len(model))
        data = rng.randbytes(rng.randrange(1, 2 * BLOCK))
        assert ask(p, f"w {off} {data.hex()}") == "ok", f"round {i}: the write failed"
        model.extend(b"\0" * max(0, off + len(data) - len(model)))
        model[off:off + len(data)] = data
        size = rng.randrange(len(model) // 2, len(model))
        assert ask(p, f"tf {size}") == "ok", f"round {i}: ftruncate failed"
        del model[size:]
        os.fsync(fd)
        ask(p, "exit")
        p.wait()
        got = read_file(m.path("sh"))
        assert len(got) == size, f"round {i}: {len(got)} bytes, not {size}: the shrink undone"
        assert got == bytes(model), f"round {i}: the file lost a leased write"
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    os.close(fd)

def set_flags(path, flags):
    """chattr's FS_IOC_SETFLAGS of `path`, as root."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, struct.pack("i", flags))
    finally:
        os.close(fd)


def chattr_i_stops_a_leased_writer(m, rng):
    """chattr +i of a file a preloaded process writes under a write lease
    takes the lease back and grants no other: every later write, and
    ftruncate, fails with EPERM as the kernel's would, and the file keeps
    its bytes; chattr -i lets the writer write again."""
    model = bytearray(rng.randbytes(8 * BLOCK))
    write_file(m.path("imm"), model)
    before = m.leases()["granted_write"]
    p = spawn(m, "imm")
    assert ask(p, f"w {BLOCK} {'55' * 100}") == "ok"
    model[BLOCK:BLOCK + 100] = b"\x55" * 100
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    set_flags(m.path("imm"), FS_IMMUTABLE_FL)
    for i in range(8):
        assert ask(p, f"w {i * BLOCK} {'66' * 10}") == f"error {errno.EPERM}", "an immutable file took a write"
    assert ask(p, "t 100") == f"error {errno.EPERM}", "an immutable file took a truncate"
    assert read_file(m.path("imm")) == bytes(model), "the immutable file changed"
    set_flags(m.path("imm"), 0)
    assert ask(p, f"w 0 {'77' * 10}") == "ok", "chattr -i left the file unwritable"
    model[:10] = b"\x77" * 10
    ask(p, "exit")
    p.wait()
    assert read_file(m.path("imm")) == bytes(model), "the file lost a write"


def stamping(m, name, blocks, seed, versions):
    """A preloaded writer stamping versions into `blocks` blocks of a new
    file `name` (`stamp_versions`), once it reported `versions` done;
    returns it and the last version done."""
    write_file(m.path(name), b"\0" * BLOCK * blocks)
    p = spawn(m, name)
    p.stdin.write(f"run {blocks} {seed}\n")
    p.stdin.flush()
    done = 0
    for _ in range(versions):
        done = int(p.stdout.readline())
    return p, done


def assert_versions_kept(path, blocks, done):
    """Each block holds at least the last version written to it by `done`."""
    data = read_file(path)
    for v in range(done - blocks + 1, done + 1):
        got = struct.unpack_from("<Q", data, BLOCK * (v % blocks))[0]
        assert got >= v, f"block {v % blocks} lost version {v} (has {got})"


def a_killed_writer_keeps_what_it_wrote(m, _rng):
    p, done = stamping(m, "k", 32, 4, 3000)
    p.kill()
    p.wait()
    assert_versions_kept(m.path("k"), 32, done)
    wait_for(lambda: m.leases()["held"] == 0, "a killed writer's lease stayed")
    write_file(m.path("ka"), b"")
    p = spawn(m, "ka")
    p.stdin.write("append 6\n")
    p.stdin.flush()
    for _ in range(2000):
        done = int(p.stdout.readline())
    p.kill()
    p.wait()
    kept = appended_versions(read_file(m.path("ka")))
    assert kept >= done, f"a killed appender kept {kept} of {done} appends it reported"
    wait_for(lambda: m.leases()["held"] == 0, "a killed appender's lease stayed")


def an_exec_gives_the_write_lease_back_and_lives(m, rng):
    """An exec ends the connection while the process lives on: its write
    lease goes back first (adopted), so the daemon does not take it for
    a writer it cut off, and kill it."""
    data = bytearray(rng.randbytes(8 * BLOCK))
    write_file(m.path("x"), data)
    before = m.leases()["granted_write"]
    p = spawn(m, "x")
    x = rng.randbytes(100)
    assert ask(p, f"w 5000 {x.hex()}") == "ok"
    data[5000:5100] = x
    assert m.leases()["granted_write"] > before, "no write lease was granted"
    p.stdin.write("exec\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "done", "the exec'd program did not run"
    assert p.wait() == 0, f"the exec'd program ended with {p.returncode}"
    assert read_file(m.path("x")) == data, "the exec lost a leased write"


def assert_rows(db, floor):
    """`db` holds rows 1..n, n >= `floor`, each with its value."""
    n, top = db.execute("select count(*), coalesce(max(k), 0) from t").fetchone()
    assert n == top and n >= floor, f"{n} rows up to {top}; {floor} were committed"
    if n:
        k = 1 + (floor * 7919) % n
        v = db.execute("select v from t where k = ?", (k,)).fetchone()[0]
        assert v == row_value(k), f"row {k} holds the wrong value"
    return n


def sqlite_wal_keeps_its_lease_and_every_commit(m, _rng):
    import sqlite3
    import threading
    p = m.spawn("sqlite", "wal.db", __file__)
    before = m.leases()["granted_write"]
    p.stdin.write("run 3000\n")
    p.stdin.flush()
    for _ in range(3000):
        done = int(p.stdout.readline())
    grants = m.leases()["granted_write"] - before
    # A lease returned per frame written over an old one gave ~3,600.
    assert 0 < grants < 300, f"{grants} write leases for 3000 commits"
    seen = {"done": done}

    def follow():
        for line in p.stdout:
            seen["done"] = int(line)

    reporter = threading.Thread(target=follow)
    reporter.start()
    p.stdin.write("run 1000000\n")
    p.stdin.flush()
    reader = sqlite3.connect(m.path("wal.db"), isolation_level=None)
    for _ in range(100):
        assert_rows(reader, seen["done"])
    reader.close()
    p.kill()
    p.wait()
    reporter.join()
    db = sqlite3.connect(m.path("wal.db"), isolation_level=None)
    n = assert_rows(db, seen["done"])
    assert db.execute("pragma integrity_check").fetchone()[0] == "ok"
    db.close()
    wait_for(lambda: m.leases()["held"] == 0, "a killed SQLite's lease stayed")
    print(f"      {grants} write leases for 3000 commits; {n} rows after kill -9")


def a_dead_daemon_keeps_every_done_write(m, _rng):
    blocks = 16
    p, done = stamping(m, "d", blocks, 5, 2000)
    os.kill(m.daemon, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{m.daemon}"), "the daemon did not die")
    # The writer goes on until a write fails; each one reported is done.
    for line in p.stdout:
        if line.startswith("error"):
            break
        done = int(line)
    p.stdin.close()
    p.wait()
    subprocess.run(["umount", "-l", m.dir], check=True)
    m.mount()
    assert_versions_kept(m.path("d"), blocks, done)
    print(f"      {done} leased writes, every one after the remount")


def a_descriptor_reopened_behind_the_hooks_is_checked_again(m, _rng):
    """A write lease's descriptor closed and its number reopened without
    the hooks — by stdio's fclose and fopen, or by raw system calls —
    takes no leased write: reopened read-only, every write fails with
    EBADF, as the kernel's does; reopened on another file, the writes
    are that file's. The leased file keeps its bytes."""
    for how in ("stdio", "raw-ro", "raw-other"):
        name = f"ro-{how}"
        write_file(m.path(name), b"r" * 8 * BLOCK)
        write_file(m.path(name) + ".other", b"o" * BLOCK)
        before = m.leases()["granted_write"]
        p = spawn(m, name)
        for i in range(8):
            assert ask(p, f"w {i * BLOCK} {'77' * BLOCK}") == "ok"
        assert m.leases()["granted_write"] > before, "no write lease was granted"
        got = ask(p, f"reopen {how}")
        assert got.endswith("True"), f"{how}: the number was not reused: {got}"
        if how == "raw-other":
            assert got.split()[0] == "wrote", f"{how}: the writes failed: {got}"
            other = read_file(m.path(name) + ".other")
            expect = b"x" * WRITES_TO_LEASE + b"o" * (BLOCK - WRITES_TO_LEASE)
            assert other == expect, f"{how}: the other file did not take the writes"
        else:
            assert got.split()[0] == "refused-9", f"{how}: a read-only descriptor took a write: {got}"
        ask(p, "exit")
        p.wait()
        assert read_file(m.path(name)) == b"\x77" * 8 * BLOCK, f"{how}: the file changed"


CASES = [
    leased_writes_are_read_right_everywhere,
    a_descriptor_reopened_behind_the_hooks_is_checked_again,
    appends_are_leased_and_seen_everywhere,
    o_append_writers_never_overlap,
    a_reader_racing_a_leased_writer_never_reads_old,
    a_mapping_never_shows_old,
    a_listing_shows_a_leased_writers_size,
    seek_data_finds_a_leased_write_into_a_hole,
    a_shrink_under_the_lease_survives_an_fsync_elsewhere,
    chattr_i_stops_a_leased_writer,
    a_killed_writer_keeps_what_it_wrote,
    an_exec_gives_the_write_lease_back_and_lives,
    sqlite_wal_keeps_its_lease_and_every_commit,
    a_dead_daemon_keeps_every_done_write,
]


def main():
    if sys.argv[1] == "--helper":
        if sys.argv[2] == "sqlite":
            return sqlite_writer(sys.argv[3])
        return helper(sys.argv[2], sys.argv[3])
    run_cases(__file__, CASES, sys.argv)


if __name__ == "__main__":
    main()
