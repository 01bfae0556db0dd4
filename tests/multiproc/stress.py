#!/usr/bin/env python3
"""Many preloaded processes at once on one mount (issue 32, points 1 and
3): each the only writer of its own file — random pwrites of 1 B to
12 KiB, truncates, fsyncs, reads, stat and fstat, and in the second round
shared-mapping reads — and all appending checksummed records to one
O_APPEND log. Each worker checks every read and size against an oracle
of its file; at the end the files are checked through the kernel (their
hashes), and the log holds every worker's records, whole, none lost or
torn, each worker's in order.

    python3 tests/multiproc/stress.py DIR WORKERS SECONDS [SEED]

Run preloaded over a mount; tests/multiproc/run.sh runs four workers
for eight seconds a round. Eight workers in two runs at once found two
bugs: a deadlock (a client's lease thread, starting, closed its copies
of descriptors on the mount while a grant to it was out: fixed in
`Client::connect`), and a leased shrink undone (the daemon's `fsync`,
not settling first, wrote the file's dirty times under a seq of the
lease on its way back: design.md §17.11). The first round maps nothing,
so the workers write under write leases; in the second each maps its
file, after which its writes are the kernel's (design.md §17.14). The
seed fixes each worker's operations (not their interleaving) and is
printed."""
import collections
import hashlib
import json
import mmap
import os
import random
import struct
import subprocess
import sys
import time
import zlib

MAX = 1 << 20


def record(k, seq, rng):
    payload = rng.randbytes(rng.randrange(8, 200))
    body = struct.pack("<IIH", k, seq, len(payload)) + payload
    return b"R" + body + struct.pack("<I", zlib.crc32(body))


def worker(d, k, secs, seed, maps):
    rng = random.Random(seed)
    path = f"{d}/f{k}"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    log = os.open(f"{d}/log", os.O_WRONLY | os.O_APPEND)
    w = {"k": k, "fd": fd, "path": path, "log": log, "oracle": bytearray(), "appended": 0,
         "maps": maps}
    # The last operations, said when a check fails.
    done = collections.deque(maxlen=32)
    ops = 0
    end = time.time() + secs
    while time.time() < end:
        ops += 1
        try:
            done.append(step(w, rng))
        except AssertionError:
            # What the daemon holds now (a stat recalls every lease).
            size = os.stat(path).st_size
            print(f"worker {k}, operation {ops}: the file is {size} bytes after a stat, "
                  f"{len(w['oracle'])} by the oracle; the last operations: {list(done)}",
                  file=sys.stderr)
            raise
    os.fsync(fd)
    oracle = w["oracle"]
    print(json.dumps({"k": k, "ops": ops, "appended": w["appended"],
                      "sha": hashlib.sha256(oracle).hexdigest(), "size": len(oracle)}),
          flush=True)


def resize(oracle, size):
    if size < len(oracle):
        del oracle[size:]
    else:
        oracle.extend(bytes(size - len(oracle)))


def step(w, rng):
    """One random operation of worker `w`, checked against its oracle:
    what it was."""
    k, fd, oracle = w["k"], w["fd"], w["oracle"]
    op = rng.random()
    if op < 0.35:
        n = rng.choice([1, 100, 4096, 5000, 12288])
        off = rng.randrange(0, MAX - n)
        data = rng.randbytes(n)
        assert os.pwrite(fd, data, off) == n
        resize(oracle, max(len(oracle), off))
        oracle[off:off + n] = data
        return ("pwrite", off, n)
    if op < 0.55:
        r = record(k, w["appended"], rng)
        assert os.write(w["log"], r) == len(r)
        w["appended"] += 1
        return ("append", len(r))
    if op < 0.6:
        size = rng.randrange(0, MAX)
        os.ftruncate(fd, size)
        resize(oracle, size)
        return ("ftruncate", size)
    if op < 0.65:
        os.fsync(fd)
        return ("fsync",)
    if op < 0.7 and oracle and w["maps"]:
        m = mmap.mmap(fd, len(oracle), mmap.MAP_SHARED, mmap.PROT_READ)
        off = rng.randrange(len(oracle))
        n = min(4096, len(oracle) - off)
        got = m[off:off + n]
        m.close()
        assert got == bytes(oracle[off:off + n]), f"worker {k}: mapped read at {off} differs"
        return ("mapped read", off, n)
    if op < 0.75:
        got = os.fstat(fd).st_size
        assert got == len(oracle), f"worker {k}: fstat {got} != {len(oracle)}"
        got = os.stat(w["path"]).st_size
        assert got == len(oracle), f"worker {k}: stat {got} != {len(oracle)}"
        return ("fstat and stat", got)
    if not oracle:
        return ("nothing to read",)
    off = rng.randrange(len(oracle))
    n = rng.choice([1, 512, 4096, 9000])
    got = os.pread(fd, n, off)
    assert got == bytes(oracle[off:off + n]), f"worker {k}: read at {off}+{n} differs"
    return ("pread", off, n)


def check_log(d, counts):
    data = open(f"{d}/log", "rb").read()
    seen = {}
    i = 0
    while i < len(data):
        assert data[i:i + 1] == b"R", f"log: no record at {i}"
        k, seq, n = struct.unpack_from("<IIH", data, i + 1)
        body = data[i + 1:i + 11 + n]
        (crc,) = struct.unpack_from("<I", data, i + 11 + n)
        assert zlib.crc32(body) == crc, f"log: torn record at {i}"
        assert seq == seen.get(k, 0), f"log: worker {k} record {seq} out of order"
        seen[k] = seq + 1
        i += 15 + n
    assert seen == counts, f"log: {seen} != {counts}"


def round_of(d, n, secs, seed, maps):
    os.makedirs(d, exist_ok=True)
    open(f"{d}/log", "wb").close()
    ps = [subprocess.Popen([sys.executable, __file__, "--worker", d, str(k), str(secs),
                            str(seed * 100 + k), str(int(maps))], stdout=subprocess.PIPE,
                           text=True)
          for k in range(n)]
    results = []
    for p in ps:
        out, _ = p.communicate()
        assert p.returncode == 0, f"a worker failed ({p.returncode})"
        results.append(json.loads(out))
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    for r in results:
        got = subprocess.run(["sha256sum", f"{d}/f{r['k']}"], env=env, capture_output=True,
                             text=True, check=True).stdout.split()[0]
        assert got == r["sha"], f"file f{r['k']} differs through the kernel"
    check_log(d, {r["k"]: r["appended"] for r in results if r["appended"]})
    print(f"  ok  {'mapping' if maps else 'no mapping'}: {sum(r['ops'] for r in results)} "
          f"operations, {sum(r['appended'] for r in results)} log records")


def main():
    if sys.argv[1] == "--worker":
        a = sys.argv
        return worker(a[2], int(a[3]), float(a[4]), int(a[5]), a[6] == "1")
    d, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 32)
    print(f"tests/multiproc/stress.py: seed {seed} (replay: stress.py {d} {n} {secs:g} {seed})")
    for maps in (False, True):
        round_of(f"{d}/{'maps' if maps else 'writes'}", n, secs, seed, maps)
    print("tests/multiproc/stress.py: all passed")


if __name__ == "__main__":
    main()
