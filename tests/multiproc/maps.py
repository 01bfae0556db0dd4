#!/usr/bin/env python3
"""Map leases (issue 32 point 3, design.md §17.14): a preloaded process's
`MAP_SHARED` mapping of a file on an `amberfs mount` shows the pool's own
blocks, pinned by the daemon, so two processes mapping one file share
its pages as on a DAX file system; a kernel read of the file, a
truncate, a fork and the daemon's death each give the pages back to the
kernel's mapping first.

    python3 tests/multiproc/maps.py BIN_DIR [SEED]

Checked, with an oracle kept in this (not preloaded) process:

* two processes mapping one file both show the pool file at the same
  offset in /proc/PID/maps, and each sees the other's stores at once,
  with no msync; the daemon counts the map leases;
* a read through the kernel by a process that is not preloaded sees
  every store, and recalls the mappings (they show the file again, and
  still share their bytes, through the page cache);
* kill -9 of a mapper after msync keeps what it stored; its pins go
  back (fsck clean at the end);
* a fork gives the parent's mapping back first, and the child's stores
  through the inherited mapping are the parent's to see;
* a truncate through the kernel recalls the mapping; an exec gives it
  back, and the exec'd program lives;
* a process that is not preloaded, mapping through the page cache, and
  a preloaded one mapping the pool never see different bytes;
* a process that maps a file and then grows it by writes (LMDB's way)
  loads every new page through its mapping: its writes are the
  kernel's, which learns each new end of file (a write lease would grow
  the file behind it, and the loads fault with SIGBUS); a write lease
  it held when it mapped goes back;
* kill -9 of the daemon: the mapping shows the (dead) mount's file, no
  longer the pool, and the next mount has every byte stored before.

Randomized data prints its seed; pass it as SEED to replay.
"""
import ctypes
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leases import ask, run_cases, wait_for, write_file  # noqa: E402
from write_leases import WRITES_TO_LEASE  # noqa: E402

import mmap  # noqa: E402

SIZE = 64 * 4096


def shown(m, writable):
    """What backs the first page of mapping `m` in /proc/self/maps:
    (path, offset). A read-only mapping has no address Python gives: the
    lowest of the helper's pool mappings no longer than SIZE (the window
    shows the pool's pages in one mapping per run; the client's own
    mapping of the whole pool is longer), if any, else the file's."""
    with open("/proc/self/maps") as f:
        lines = [line.split() for line in f]
    spans = [(tuple(int(x, 16) for x in l[0].split("-")), l[5] if len(l) > 5 else "", int(l[2], 16))
             for l in lines]
    if writable:
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        return next(((p, o) for (lo, hi), p, o in spans if lo <= addr < hi), ("", 0))
    pools = [(p, o) for (lo, hi), p, o in spans if p.endswith(".pool") and hi - lo <= SIZE]
    files = [(p, o) for (lo, hi), p, o in spans if hi - lo == SIZE]
    return (pools or files or [("", 0)])[0]


def helper(mode, path):
    """The preloaded mapper: maps `path` whole (read-write unless `mode`
    is `ro`) and follows commands on stdin: `shown` says what backs the
    mapping, `put OFF HEX` stores, `get OFF N` loads, `sync` msyncs,
    `fork OFF HEX` forks a child that stores through the inherited
    mapping, `exec` becomes a shell that sleeps and says `done`, `exit`."""
    fd = os.open(path, os.O_RDONLY if mode == "ro" else os.O_RDWR)
    prot = mmap.PROT_READ | (0 if mode == "ro" else mmap.PROT_WRITE)
    m = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, prot)
    print("ready", flush=True)
    for line in sys.stdin:
        w = line.split()
        if w[0] == "shown":
            where, off = shown(m, mode != "ro")
            print(where, off, flush=True)
        elif w[0] == "put":
            data = bytes.fromhex(w[2])
            m[int(w[1]):int(w[1]) + len(data)] = data
            print("ok", flush=True)
        elif w[0] == "get":
            print(m[int(w[1]):int(w[1]) + int(w[2])].hex(), flush=True)
        elif w[0] == "sync":
            m.flush()
            print("ok", flush=True)
        elif w[0] == "fork":
            pid = os.fork()
            if pid == 0:
                data = bytes.fromhex(w[2])
                m[int(w[1]):int(w[1]) + len(data)] = data
                os._exit(0)
            os.waitpid(pid, 0)
            print("ok", flush=True)
        elif w[0] == "exec":
            os.execv("/bin/sh", ["sh", "-c", "sleep 0.5; echo done"])
        elif w[0] == "exit":
            return


def map_past_the_end(fd):
    """Maps SIZE bytes of `fd` read-only and shared, past its end if it
    is shorter (Python's mmap refuses that): the address."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, SIZE, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value), "mmap failed"
    return addr


def watcher(path):
    """A preloaded reader that maps SIZE bytes of `path` past its end and
    answers `get OFF N` with the bytes loaded there."""
    addr = map_past_the_end(os.open(path, os.O_RDONLY))
    print("ready", flush=True)
    for line in sys.stdin:
        _, off, n = line.split()
        print(ctypes.string_at(addr + int(off), int(n)).hex(), flush=True)


def grower(path):
    """The preloaded LMDB-like writer: earns a write lease on `path` (one
    block long), maps SIZE bytes of it read-only, then `grow N` writes
    blocks 1..N one by one, loading each through the mapping at once;
    says `ok N`, or where the load differed."""
    fd = os.open(path, os.O_RDWR)
    for _ in range(WRITES_TO_LEASE):
        os.pwrite(fd, os.pread(fd, 16, 0), 0)
    addr = map_past_the_end(fd)
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line.split()[1])
        for i in range(1, n + 1):
            page = bytes([i]) * 4096
            os.pwrite(fd, page, i * 4096)
            if ctypes.string_at(addr + i * 4096, 4096) != page:
                print(f"block {i} differs", flush=True)
                break
        else:
            print(f"ok {n}", flush=True)


def appender(path):
    """A preloaded writer of `path` that never maps it: earns a write
    lease (where the daemon grants one), then `grow A B` writes blocks
    A..B one by one and says `ok`."""
    fd = os.open(path, os.O_RDWR)
    for _ in range(WRITES_TO_LEASE):
        os.pwrite(fd, os.pread(fd, 16, 0), 0)
    print("ready", flush=True)
    for line in sys.stdin:
        _, a, b = line.split()
        for i in range(int(a), int(b) + 1):
            os.pwrite(fd, bytes([i]) * 4096, i * 4096)
        print("ok", flush=True)


def spawn(m, name, mode="rw"):
    return m.spawn(mode, name, __file__)


def spawn_plain(m, name):
    """The mapper without the preload: its mapping is the kernel's."""
    p = subprocess.Popen([sys.executable, __file__, "--helper", "rw", m.path(name)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", "the helper did not start"
    return p


def fresh(m, rng, name):
    data = bytearray(rng.randbytes(SIZE))
    write_file(m.path(name), data)
    return data


def kernel_read(m, name):
    with open(m.path(name), "rb") as f:
        return f.read()


def finish(m, name, data, *procs):
    """Ends the helpers `procs`; the file `name` holds `data`."""
    for p in procs:
        ask(p, "exit")
        p.wait()
    assert kernel_read(m, name) == data


def seen(p, q, off, x, data, why):
    """Stores `x` at `off` through `p`'s mapping; `q`'s loads it at once
    (else `why`); `data` follows."""
    assert ask(p, f"put {off} {x.hex()}") == "ok"
    assert ask(q, f"get {off} {len(x)}") == x.hex(), why
    data[off:off + len(x)] = x


def pool_shown(p, m):
    where, off = ask(p, "shown").rsplit(" ", 1)
    return where == m.pool, int(off)


def two_processes_share_the_pools_pages(m, rng):
    data = fresh(m, rng, "s")
    before = m.leases()["granted_map"]
    a, b = spawn(m, "s"), spawn(m, "s")
    (a_pool, a_off), (b_pool, b_off) = pool_shown(a, m), pool_shown(b, m)
    assert a_pool and b_pool, "a mapping does not show the pool"
    assert a_off == b_off, "two mappings of one file show different pool pages"
    assert m.leases()["granted_map"] >= before + 2, "no map lease was counted"
    for _ in range(50):
        p, q = rng.sample([a, b], 2)
        off, x = rng.randrange(SIZE - 64), rng.randbytes(1 + rng.randrange(64))
        seen(p, q, off, x, data, "a store was not seen at once")
    # A kernel read: the mappings are recalled, and it sees every store.
    assert kernel_read(m, "s") == data, "a kernel read missed a mapped store"
    assert not pool_shown(a, m)[0] and not pool_shown(b, m)[0], "a recalled mapping shows the pool"
    seen(a, b, 100, rng.randbytes(32), data, "the page cache is not shared after the recall")
    finish(m, "s", data, a, b)


def a_killed_mapper_keeps_what_it_synced(m, rng):
    data = fresh(m, rng, "k")
    a = spawn(m, "k")
    assert pool_shown(a, m)[0], "the mapping does not show the pool"
    for _ in range(20):
        off, x = rng.randrange(SIZE - 64), rng.randbytes(64)
        assert ask(a, f"put {off} {x.hex()}") == "ok"
        data[off:off + 64] = x
    assert ask(a, "sync") == "ok"
    a.kill()
    a.wait()
    wait_for(lambda: m.leases()["held"] == 0, "the killed mapper's lease stayed")
    assert kernel_read(m, "k") == data, "a killed mapper's stores were lost"


def a_fork_gives_the_mapping_back_first(m, rng):
    data = fresh(m, rng, "f")
    a = spawn(m, "f")
    assert pool_shown(a, m)[0], "the mapping does not show the pool"
    x = rng.randbytes(48)
    assert ask(a, f"fork 4000 {x.hex()}") == "ok"
    data[4000:4048] = x
    assert not pool_shown(a, m)[0], "the parent kept the pool's pages across a fork"
    assert ask(a, "get 4000 48") == x.hex(), "the child's store is not the parent's"
    finish(m, "f", data, a)


def a_truncate_recalls_the_mapping(m, rng):
    fresh(m, rng, "t")
    a = spawn(m, "t")
    assert pool_shown(a, m)[0], "the mapping does not show the pool"
    os.truncate(m.path("t"), SIZE // 2)
    assert not pool_shown(a, m)[0], "a truncated file's mapping still shows the pool"
    ask(a, "exit")
    a.wait()


def a_read_only_mapping_shares_the_pages_too(m, rng):
    data = fresh(m, rng, "r")
    w, r = spawn(m, "r"), spawn(m, "r", "ro")
    assert pool_shown(w, m) == pool_shown(r, m) and pool_shown(r, m)[0]
    seen(w, r, 9000, rng.randbytes(16), data, "a read-only mapping missed a store")
    finish(m, "r", data, w, r)


def a_mapping_through_the_kernel_never_diverges(m, rng):
    """A process that is not preloaded maps through the page cache: a
    map lease granted beside it has the kernel drop its pages first, and
    its next fault recalls the lease, so neither side reads a copy the
    other stopped writing."""
    data = fresh(m, rng, "c")
    k = spawn_plain(m, "c")
    x = rng.randbytes(32)
    assert ask(k, f"put 300 {x.hex()}") == "ok"
    data[300:332] = x
    r = spawn(m, "c", "ro")
    assert pool_shown(r, m)[0], "the read-only mapping does not show the pool"
    assert ask(r, "get 300 32") == x.hex(), "a map lease missed a store in the page cache"
    seen(k, r, 5000, rng.randbytes(32), data, "a map lease missed a later kernel-path store")
    finish(m, "c", data, k, r)


def an_exec_gives_the_mapping_back_and_lives(m, rng):
    """An exec ends the process's connection while it lives on: its map
    leases go back first, so the daemon does not take it for a client
    it cut off (and kill it)."""
    fresh(m, rng, "e")
    a = spawn(m, "e")
    assert pool_shown(a, m)[0], "the mapping does not show the pool"
    a.stdin.write("exec\n")
    a.stdin.flush()
    assert a.stdout.readline().strip() == "done", "the exec'd program did not run"
    assert a.wait() == 0, f"the exec'd program ended with {a.returncode}"
    wait_for(lambda: m.leases()["held"] == 0, "the exec'd process's map lease stayed")


def a_dead_daemon_takes_the_pools_pages_away(m, rng):
    data = fresh(m, rng, "d")
    a = spawn(m, "d")
    assert pool_shown(a, m)[0], "the mapping does not show the pool"
    x = rng.randbytes(64)
    assert ask(a, f"put 0 {x.hex()}") == "ok"
    assert ask(a, "sync") == "ok"
    data[0:64] = x
    os.kill(m.daemon, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{m.daemon}"), "the daemon did not die")
    wait_for(lambda: not pool_shown(a, m)[0], "the mapping still shows a pool nobody owns")
    a.kill()
    a.wait()
    subprocess.run(["umount", "-l", m.dir], check=True)
    m.mount()
    assert kernel_read(m, "d") == data, "the remount lost a mapped store"


def a_mapped_file_grown_by_writes_loads_every_new_page(m, rng):
    write_file(m.path("g"), rng.randbytes(4096))
    before = m.leases()["granted_write"]
    p = m.spawn("grow", "g", __file__)
    assert m.leases()["granted_write"] > before, "no write lease was granted first"
    # Killed by SIGBUS, the helper answers nothing.
    assert ask(p, "grow 60") == "ok 60", "a load of a page the process wrote failed"
    leased = m.leases()["granted_write"]
    assert ask(p, "grow 63") == "ok 63"
    assert m.leases()["granted_write"] == leased, "a mapped file's write was leased"
    p.stdin.close()
    p.wait()
    data = kernel_read(m, "g")
    assert data[4096:] == b"".join(bytes([i]) * 4096 for i in range(1, 64)), "a write was lost"


def a_file_another_process_maps_grows_under_its_mapping(m, rng):
    """A preloaded process maps a file past its end; another grows it
    by writes. Each new page loads in the mapper as soon as the write
    returned (Linux's promise; a write lease would grow the file behind
    the kernel, whose fault past the end it last heard is a SIGBUS): a
    file a preloaded process maps is never written under a write lease
    (design.md §17.14)."""
    write_file(m.path("o"), rng.randbytes(4096))
    r = m.spawn("watch", "o", __file__)
    before = m.leases()["granted_write"]
    w = m.spawn("append", "o", __file__)
    for a in range(1, 61, 6):
        assert ask(w, f"grow {a} {a + 5}") == "ok"
        # Killed by SIGBUS, the mapper answers nothing.
        got = ask(r, f"get {a * 4096} {6 * 4096}")
        want = b"".join(bytes([i]) * 4096 for i in range(a, a + 6))
        assert got == want.hex(), f"blocks {a}..{a + 5} did not load in the other process"
    assert m.leases()["granted_write"] == before, "a write to a file mapped elsewhere was leased"
    assert m.leases()["refused_mapped"] > 0, "no write lease was refused for the mapping"
    for p in (r, w):
        p.stdin.close()
        p.wait()


CASES = [
    two_processes_share_the_pools_pages,
    a_mapped_file_grown_by_writes_loads_every_new_page,
    a_file_another_process_maps_grows_under_its_mapping,
    a_killed_mapper_keeps_what_it_synced,
    a_fork_gives_the_mapping_back_first,
    a_truncate_recalls_the_mapping,
    a_read_only_mapping_shares_the_pages_too,
    a_mapping_through_the_kernel_never_diverges,
    an_exec_gives_the_mapping_back_and_lives,
    a_dead_daemon_takes_the_pools_pages_away,
]


def main():
    if sys.argv[1] == "--helper":
        if sys.argv[2] == "grow":
            return grower(sys.argv[3])
        if sys.argv[2] == "watch":
            return watcher(sys.argv[3])
        if sys.argv[2] == "append":
            return appender(sys.argv[3])
        return helper(sys.argv[2], sys.argv[3])
    run_cases(__file__, CASES, sys.argv)


if __name__ == "__main__":
    main()
