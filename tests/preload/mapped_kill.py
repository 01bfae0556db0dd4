"""Stores through a shared mapping, msync, then kill -9: what msync made
durable survives, a store after it may be lost, never anything else
(design.md §16.5). Used under the interposer (tests/preload/run.sh) and
on the FUSE mount (tests/fuse/apps.sh).

    python3 mapped_kill.py store FILE [--wait]   # --wait: say "ready", sleep
    python3 mapped_kill.py check FILE
"""
import mmap
import os
import sys
import time

SIZE = 1 << 20
PAGE = 4096


def store(path, wait):
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    os.ftruncate(fd, SIZE)
    m = mmap.mmap(fd, SIZE)
    for i in range(SIZE // PAGE):
        m[i * PAGE:(i + 1) * PAGE] = bytes([i]) * PAGE
    m.flush()  # msync(MS_SYNC)
    m[0:4] = b"late"
    if wait:
        print("ready", flush=True)
        time.sleep(60)


def check(path):
    data = open(path, "rb").read()
    assert len(data) == SIZE, len(data)
    assert data[:4] in (b"late", bytes(4)), data[:4]
    rest = bytes(PAGE - 4) + b"".join(bytes([i]) * PAGE for i in range(1, SIZE // PAGE))
    assert data[4:] == rest, "msync'd data lost"
    print("msync'd stores survived kill -9")


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "store":
        store(path, "--wait" in sys.argv[3:])
    else:
        check(path)
