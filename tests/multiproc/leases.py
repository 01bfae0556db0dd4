#!/usr/bin/env python3
"""Read leases (issue 32, design.md §17.3): a preloaded process reads a
file on an `amberfs mount` from its own mapping of the pool, and the
daemon recalls the lease before anything changes the file.

    python3 tests/multiproc/leases.py BIN_DIR [SEED]

Each case mounts nothing of its own: one pool and one mount serve them
all, and the last case kills the daemon. Checked, with an oracle kept in
this (not preloaded) process:

* leased reads return the file's bytes, and the daemon counts the grants;
* a change through the kernel (write, append, truncate, punched hole,
  rename over, unlink and a new file under the name) that returned is
  seen by the next read of a process reading under a lease;
* a forked child reads right (it never speaks on its parent's connection);
* a descriptor open for writing only is not read;
* a descriptor closed and its number reopened on another file by raw
  system calls reads the new file;
* the shim loads the interposer only for a descriptor on the mount read
  a few times, never without a mount named;
* kill -9 of a lessee gives its leases back; a lessee that does not answer
  a recall (SIGSTOP) is killed and the change goes ahead;
* kill -9 of the daemon: a lessee's next read fails, never shows old bytes;
  the next mount recovers and fsck is clean; a process that had not
  loaded the interposer notices the new mount and loads it.

Randomized rounds print their seed; pass it as SEED to replay them.
"""
import ctypes
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

READS_TO_LEASE = 40  # enough kernel reads for the interposer to connect (32) and lease


def helper(mode, path):
    """The preloaded side: reads `path` until leased, then follows the
    parent's commands on stdin, one line each, answering on stdout."""
    fd = os.open(path, os.O_RDONLY)
    # Loaded before the lease: loading it opens files through the hooks.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for _ in range(READS_TO_LEASE):
        os.pread(fd, 4096, 0)
    print("ready", flush=True)
    if mode == "hold":
        time.sleep(3600)
    if mode == "race":
        return race_reader(fd)
    for line in sys.stdin:
        words = line.split()
        if words[0] == "sha":
            data = os.pread(fd, int(words[1]) + 8192, 0)
            print(hashlib.sha256(data).hexdigest(), flush=True)
        elif words[0] == "read":
            try:
                os.lseek(fd, 0, 0)
                data = os.read(fd, 4096)
                print("read", hashlib.sha256(data).hexdigest(), flush=True)
            except OSError as e:
                print("error", e.errno, flush=True)
        elif words[0] == "fork":
            pid = os.fork()
            if pid == 0:
                ok = all(
                    hashlib.sha256(os.pread(fd, 1 << 20, 0)).hexdigest() == words[1]
                    for _ in range(10)
                )
                os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            print("child", os.waitstatus_to_exitcode(status), flush=True)
        elif words[0] == "reopen":
            fd = reopen_raw(libc, fd, words[1])
            print("same" if fd >= 0 else "moved", flush=True)
        elif words[0] == "exit":
            return


def reopen_raw(libc, fd, path):
    """Closes `fd` and opens `path` read-only with raw system calls
    (`libc.syscall`), which no hook sees; the new descriptor (the same
    number, if the kernel reused it), or -1 if it got another."""
    libc.syscall(3, fd)  # SYS_close
    new = libc.syscall(257, -100, path.encode(), os.O_RDONLY, 0)  # SYS_openat, AT_FDCWD
    return fd if new == fd else -1


RACE_BLOCKS = 8
RACE_SECONDS = 2.0


def race_reader(fd):
    """Reads random blocks while the parent rewrites them: a block's
    version must never be older than the one the parent had finished
    writing before the read began (its counter, in shared memory)."""
    import mmap
    import struct
    counters = mmap.mmap(os.open(sys.stdin.readline().strip(), os.O_RDONLY), 8 * RACE_BLOCKS,
                         prot=mmap.PROT_READ)
    r = random.Random(5)
    reads = stale = 0
    end = time.time() + RACE_SECONDS
    while time.time() < end:
        b = r.randrange(RACE_BLOCKS)
        done = struct.unpack_from("<Q", counters, 8 * b)[0]
        got = struct.unpack_from("<Q", os.pread(fd, 4096, 4096 * b), 0)[0]
        reads += 1
        stale += got < done
    print(reads, stale, flush=True)


class Mount:
    def __init__(self, bin_dir, work):
        self.amberfs = os.path.join(bin_dir, "amberfs")
        self.lib = os.path.join(bin_dir, "libamberfs_preload.so")
        self.pool = f"/dev/shm/amberfs-leases-{os.getpid()}.pool"
        self.dir = os.path.join(work, "mnt")
        os.makedirs(self.dir)
        subprocess.run([self.amberfs, "mkfs", self.pool, "--size", "1G"], check=True,
                       stdout=subprocess.DEVNULL)
        self.mount()

    def mount(self):
        out = subprocess.run([self.amberfs, "mount", self.pool, self.dir], check=True,
                             capture_output=True, text=True).stdout
        self.daemon = int(out.split("(pid ")[1].split(",")[0])

    def env(self):
        """A client's environment: with the mount up, the daemon names its
        pool, so AMBERFS_POOL is left out (run.sh's programs set it)."""
        env = dict(os.environ, LD_PRELOAD=self.lib, AMBERFS_MOUNT=self.dir)
        env.pop("AMBERFS_POOL", None)
        return env

    def path(self, name):
        return os.path.join(self.dir, name)

    def leases(self):
        out = subprocess.run([self.amberfs, "stats", "--json", self.dir], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)["leases"]

    def spawn(self, mode, name, script=__file__):
        """`script`'s preloaded helper in `mode` on file `name`, once it
        says it is ready."""
        p = subprocess.Popen([sys.executable, script, "--helper", mode, self.path(name)],
                             env=self.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        assert p.stdout.readline().strip() == "ready", "the helper did not start"
        return p


def ask(p, line):
    p.stdin.write(line + "\n")
    p.stdin.flush()
    return p.stdout.readline().strip()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def leased_reads_return_the_files_bytes(m, rng):
    """A 40 MiB file written 8 KiB at a time (so its blocks are scattered
    over the daemon's per-CPU logs), read at random and across the 16 MiB
    windows leases cover, then whole with read()."""
    size = 40 << 20
    data = rng.randbytes(size)
    with open(m.path("big"), "wb") as f:
        for i in range(0, size, 8192):
            f.write(data[i:i + 8192])
    before = m.leases()["granted"]
    code = ("import os,sys,random,hashlib\n"
            "fd=os.open(sys.argv[1],os.O_RDONLY); r=random.Random(int(sys.argv[2]))\n"
            "h=[]\n"
            "for o,n in eval(sys.argv[3]):\n"
            "  h.append(os.pread(fd,n,o))\n"
            "w=[]\n"
            "while True:\n"
            "  b=os.read(fd,65536)\n"
            "  if not b: break\n"
            "  w.append(b)\n"
            "print(hashlib.sha256(b''.join(h)).hexdigest(), hashlib.sha256(b''.join(w)).hexdigest())\n")
    window = 16 << 20
    reads = [(rng.randrange(0, size), rng.randrange(1, 70000)) for _ in range(300)]
    reads += [(window - 100, 4096), (2 * window - 5, 10), (size - 10, 4096)] * 3
    out = subprocess.run([sys.executable, "-c", code, m.path("big"), "0", repr(reads)],
                         env=m.env(), check=True, capture_output=True, text=True).stdout.split()
    want = b"".join(data[o:o + n] for o, n in reads)
    assert out == [sha(want), sha(data)], "leased reads differ from the file"
    assert m.leases()["granted"] >= before + 3, "not every window was leased"


def changes_are_seen_by_the_next_read(m, rng):
    model = bytearray(rng.randbytes(200_000))
    write_file(m.path("c"), model)
    p = m.spawn("follow", "c")
    recalled = m.leases()["recalled"]
    fd = os.open(m.path("c"), os.O_RDWR)
    for i in range(150):
        op = rng.choice(["write", "write", "append", "truncate", "punch"])
        if op == "write":
            off, n = rng.randrange(0, len(model) + 5000), rng.randrange(1, 20000)
            buf = rng.randbytes(n)
            os.pwrite(fd, buf, off)
            model.extend(b"\0" * max(0, off + n - len(model)))
            model[off:off + n] = buf
        elif op == "append":
            buf = rng.randbytes(rng.randrange(1, 9000))
            os.pwrite(fd, buf, len(model))
            model.extend(buf)
        elif op == "truncate":
            size = rng.randrange(0, len(model) + 10000)
            os.ftruncate(fd, size)
            model = (model + bytearray(max(0, size - len(model))))[:size]
        else:
            off, n = rng.randrange(0, len(model) + 1), rng.randrange(1, 30000)
            punch(fd, off, n)
            end = min(off + n, len(model))
            model[off:end] = b"\0" * max(0, end - off)
        got = ask(p, f"sha {len(model)}")
        assert got == sha(bytes(model)), f"round {i} ({op}): a leased read missed a change"
        # Slower than the contention rule's 8 recalls in 100 ms, so the
        # reader keeps reading under leases between the changes.
        time.sleep(0.02)
    os.close(fd)
    assert m.leases()["recalled"] > recalled, "no lease was recalled"
    # A rename over the file, then an unlink and a new file under the
    # name: the open descriptor keeps reading the file it opened.
    write_file(m.path("c2"), b"other")
    os.rename(m.path("c2"), m.path("c"))
    assert ask(p, f"sha {len(model)}") == sha(bytes(model)), "the renamed-over file changed"
    os.unlink(m.path("c"))
    write_file(m.path("c"), b"new")
    assert ask(p, f"sha {len(model)}") == sha(bytes(model)), "the unlinked file changed"
    ask(p, "exit")
    p.wait()


def punch(fd, off, n):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    mode = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(n)) != 0:
        raise OSError(ctypes.get_errno(), "fallocate")


def a_write_racing_a_leased_read_is_never_missed(m, _rng):
    """This process rewrites 8 blocks in turn through the kernel while a
    preloaded one reads them: each recall races the reader's next lease."""
    import mmap
    import struct
    write_file(m.path("race"), b"\0" * 4096 * RACE_BLOCKS)
    shm = f"/dev/shm/amberfs-leases-race-{os.getpid()}"
    with open(shm, "wb") as f:
        f.write(b"\0" * 8 * RACE_BLOCKS)
    counters = mmap.mmap(os.open(shm, os.O_RDWR), 8 * RACE_BLOCKS)
    before = m.leases()
    recalled, contended = before["recalled"], before["refused_contended"]
    p = m.spawn("race", "race")
    p.stdin.write(shm + "\n")
    p.stdin.flush()
    fd = os.open(m.path("race"), os.O_WRONLY)
    v = 0
    while p.poll() is None:
        v += 1
        b = v % RACE_BLOCKS
        os.pwrite(fd, struct.pack("<Q", v) + b"x" * 4088, 4096 * b)
        struct.pack_into("<Q", counters, 8 * b, v)
    os.close(fd)
    os.unlink(shm)
    reads, stale = map(int, p.stdout.readline().split())
    assert p.wait() == 0
    assert stale == 0, f"{stale} of {reads} leased reads missed a write that had returned"
    after = m.leases()
    assert after["recalled"] > recalled, "the reader was never recalled"
    assert after["refused_contended"] > contended, "the file never counted as contended"
    print(f"      {v} writes, {reads} reads, none stale")


def a_forked_child_reads_right(m, rng):
    data = rng.randbytes(100_000)
    write_file(m.path("f"), data)
    p = m.spawn("follow", "f")
    assert ask(p, f"fork {sha(data)}") == "child 0", "the forked child read wrong bytes"
    data2 = rng.randbytes(50_000)
    write_file(m.path("f"), data2)
    assert ask(p, f"fork {sha(data2)}") == "child 0", "the child missed a change"
    assert ask(p, f"sha {len(data2)}") == sha(data2), "the parent missed a change"
    ask(p, "exit")
    p.wait()


def a_write_only_descriptor_is_not_read(m, _rng):
    write_file(m.path("w"), b"secret" * 1000)
    code = ("import os,sys\n"
            "fd=os.open(sys.argv[1],os.O_WRONLY)\n"
            "for _ in range(8):\n"
            "  try:\n"
            "    os.pread(fd,10,0); print('read'); break\n"
            "  except OSError as e:\n"
            "    assert e.errno==9, e\n"
            "else:\n"
            "  print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code, m.path("w")], env=m.env(), check=True,
                         capture_output=True, text=True).stdout.strip()
    assert out == "refused", "a write-only descriptor was read"


def a_descriptor_reopened_behind_the_hooks_reads_its_new_file(m, rng):
    """A leased descriptor closed and its number reopened on another file
    by raw system calls (no hook sees them) reads the new file."""
    old, new = rng.randbytes(64 << 10), rng.randbytes(64 << 10)
    write_file(m.path("r-old"), old)
    write_file(m.path("r-new"), new)
    before = m.leases()["granted"]
    p = m.spawn("follow", "r-old")
    assert ask(p, "read") == f"read {sha(old[:4096])}"
    assert m.leases()["granted"] > before, "no read lease was granted"
    assert ask(p, f"reopen {m.path('r-new')}") == "same", "the number was not reused"
    for _ in range(READS_TO_LEASE):
        assert ask(p, "read") == f"read {sha(new[:4096])}", "the old file was read"
    ask(p, "exit")
    p.wait()


def the_interposer_is_loaded_only_for_a_reason(m, rng):
    """The shim a program preloads loads the interposer (design.md
    §17.12) only once a descriptor on the mount has been read a few
    times: not for a few reads, not for many reads of a pipe or of a file
    elsewhere, and never where the environment names no mount."""
    write_file(m.path("shim"), rng.randbytes(64 << 10))
    code = ("import os,sys\n"
            "def loaded():\n"
            "  return any('libamberfs_served' in l for l in open('/proc/self/maps'))\n"
            "r,w=os.pipe(); os.write(w,b'x'*100); other=os.open('/proc/self/exe',os.O_RDONLY)\n"
            "for i in range(100): os.read(r,1); os.pread(other,1,i)\n"
            "fd=os.open(sys.argv[1],os.O_RDONLY)\n"
            "for i in range(5): os.pread(fd,100,i)\n"
            "a=loaded()\n"
            "for i in range(60): os.pread(fd,100,i)\n"
            "print(a, loaded())\n")
    run = lambda env: subprocess.run([sys.executable, "-c", code, m.path("shim")], env=env,
                                     check=True, capture_output=True, text=True).stdout.split()
    assert run(m.env()) == ["False", "True"], "loaded too soon, or never"
    plain = dict(os.environ, LD_PRELOAD=m.lib)
    assert run(plain) == ["False", "False"], "loaded with no mount named"


def wait_for(cond, what, seconds=20):
    deadline = time.time() + seconds
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.05)


def a_killed_lessee_gives_its_leases_back(m, rng):
    write_file(m.path("k"), rng.randbytes(10_000))
    p = m.spawn("hold", "k")
    assert m.leases()["held"] >= 1, "the helper holds no lease"
    p.kill()
    p.wait()
    wait_for(lambda: m.leases()["held"] == 0, "a killed lessee's leases stayed")
    write_file(m.path("k"), b"after")


def an_unanswered_recall_cuts_the_lessee_off(m, rng):
    write_file(m.path("s"), rng.randbytes(10_000))
    p = m.spawn("hold", "s")
    cut = m.leases()["cut_off"]
    os.kill(p.pid, signal.SIGSTOP)
    write_file(m.path("s"), b"changed under a stopped lessee")
    assert p.wait() == -signal.SIGKILL, "the stopped lessee was not killed"
    assert m.leases()["cut_off"] == cut + 1
    with open(m.path("s"), "rb") as f:
        assert f.read() == b"changed under a stopped lessee"


IDLE = ("import hashlib,os,sys,time\n"
        "def loaded():\n"
        "  return any('libamberfs_served' in l for l in open('/proc/self/maps'))\n"
        "print(loaded(), flush=True)\n"
        "sys.stdin.readline(); time.sleep(1.2)\n"
        "for _ in range(100): os.stat(sys.argv[1])\n"
        "print(loaded(), hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest(), flush=True)\n")


def a_dead_daemon_fails_reads(m, rng):
    """...and a process that had not loaded the interposer when its mount
    was replaced loads it at its next look (design.md §17.12) and goes on
    through the new mount."""
    data = rng.randbytes(10_000)
    write_file(m.path("d"), data)
    p = m.spawn("follow", "d")
    idle = subprocess.Popen([sys.executable, "-c", IDLE, m.path("d")], env=m.env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert idle.stdout.readline().strip() == "False", "an idle process loaded the interposer"
    assert ask(p, "read") == f"read {sha(data[:4096])}"
    os.kill(m.daemon, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{m.daemon}"), "the daemon did not die")
    got = ask(p, "read")
    assert got.startswith("error"), f"a read after the daemon died answered {got!r}"
    ask(p, "exit")
    p.wait()
    subprocess.run(["umount", "-l", m.dir], check=True)
    m.mount()
    with open(m.path("d"), "rb") as f:
        assert f.read() == data, "the remount lost the file"
    assert ask(idle, "go") == f"True {sha(data)}", "the replaced mount went unnoticed"
    idle.wait()


CASES = [
    leased_reads_return_the_files_bytes,
    changes_are_seen_by_the_next_read,
    a_write_racing_a_leased_read_is_never_missed,
    a_forked_child_reads_right,
    a_write_only_descriptor_is_not_read,
    a_descriptor_reopened_behind_the_hooks_reads_its_new_file,
    the_interposer_is_loaded_only_for_a_reason,
    a_killed_lessee_gives_its_leases_back,
    an_unanswered_recall_cuts_the_lessee_off,
    a_dead_daemon_fails_reads,
]


def run_cases(script, cases, argv):
    """Runs `cases` on one fresh pool and mount (BIN_DIR and an optional
    SEED in `argv`), then unmounts and checks the pool with fsck. With
    ONLY=WORDS in the environment, only the cases whose name holds them."""
    only = os.environ.get("ONLY", "").replace(" ", "_")
    cases = [c for c in cases if only in c.__name__]
    bin_dir = argv[1]
    seed = int(argv[2]) if len(argv) > 2 else random.randrange(1 << 32)
    name = os.path.basename(script)
    print(f"tests/multiproc/{name}: seed {seed} (replay: {name} {bin_dir} {seed})")
    work = tempfile.mkdtemp(prefix="amberfs-leases.")
    os.chmod(work, 0o755)
    m = Mount(bin_dir, work)
    try:
        for case in cases:
            case(m, random.Random(f"{seed}-{case.__name__}"))
            print(f"  ok  {case.__name__.replace('_', ' ')}")
        subprocess.run([m.amberfs, "umount", m.dir], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([m.amberfs, "fsck", m.pool], check=True, stdout=subprocess.DEVNULL)
    finally:
        subprocess.run(["umount", "-l", m.dir], stderr=subprocess.DEVNULL)
        os.unlink(m.pool) if os.path.exists(m.pool) else None
    print(f"tests/multiproc/{name}: all passed")


def main():
    if sys.argv[1] == "--helper":
        return helper(sys.argv[2], sys.argv[3])
    run_cases(__file__, CASES, sys.argv)


if __name__ == "__main__":
    main()
