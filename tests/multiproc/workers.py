"""Python multiprocessing on one directory: W worker processes each
write N files (each fsync'd), then every worker reads every other
worker's files back and checks their bytes; then the parent checks them
all (tests/multiproc/programs.sh)."""

import hashlib
import multiprocessing
import os
import sys


def content(worker: int, i: int) -> bytes:
    seed = f"{worker}:{i}".encode()
    return hashlib.sha256(seed).digest() * (1 + (i * 37 + worker) % 300)


def write(args: tuple[str, int, int]) -> int:
    root, worker, n = args
    for i in range(n):
        path = os.path.join(root, f"w{worker}-{i}")
        with open(path, "wb") as f:
            f.write(content(worker, i))
            f.flush()
            os.fsync(f.fileno())
    return n


def check(args: tuple[str, int, int, int]) -> int:
    root, me, workers, n = args
    seen = 0
    for worker in range(workers):
        if worker == me:
            continue
        for i in range(n):
            with open(os.path.join(root, f"w{worker}-{i}"), "rb") as f:
                if f.read() != content(worker, i):
                    raise SystemExit(f"worker {me}: w{worker}-{i} differs")
            seen += 1
    return seen


def main() -> None:
    root, workers, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(root, exist_ok=True)
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        written = sum(pool.map(write, [(root, w, n) for w in range(workers)]))
        read = sum(pool.map(check, [(root, w, workers, n) for w in range(workers)]))
    check((root, -1, workers, n))
    print(f"{workers} workers wrote {written} files and read {read} of each other's")


if __name__ == "__main__":
    main()
