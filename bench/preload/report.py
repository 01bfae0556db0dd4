"""Medians of bench/preload.sh's runs of one preset: a Markdown table on
stdout and results-PRESET.json in the format `amberfs bench plot` reads.

    python3 report.py OUT PRESET REPS COMMAND TXS ROWS
"""
import json, os, platform, statistics, sys, time

out, preset, reps, command, txs, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
jobs = ["seq-write-4k", "rand-write-4k-fsync", "rand-overwrite-128b-fsync", "rand-read-4k"]
targets = ["interposer", "fuse", "ext4", "tmpfs"]
records = []


def summary(xs):
    m = statistics.mean(xs)
    rsd = statistics.pstdev(xs) / m * 100 if m else 0.0
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rsd_percent": rsd, "samples": len(xs)}


def record(bench, target, xs, unit="ops/s", metric="throughput", notes=()):
    s = summary(xs)
    records.append({"benchmark": bench, "target": target, "policy": "amber", "preset": preset, "threads": 1,
                    "metric": metric, "value": s["median"], "unit": unit, "summary": s, "notes": list(notes)})
    return s["median"]


def fio_iops(path):
    j = json.load(open(path))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"]


med = {}
for job in jobs:
    for t in targets:
        xs = [fio_iops(os.path.join(out, f"{preset}.{job}.{t}.{r}.json")) for r in range(1, reps + 1)]
        med[job, t] = record(job, t, xs)
# The library's figure for the same fsync'd random writes: bench compare's
# amberfs:amber throughput.
for size, job in [(128, "rand-overwrite-128b-fsync"), (4096, "rand-write-4k-fsync")]:
    res = json.load(open(os.path.join(out, f"{preset}.library-{size}.json")))
    lib = [r for r in res["records"] if r["target"] == "amberfs:amber" and r["metric"] == "throughput"][0]
    med[job, "library"] = lib["value"]
    records.append(dict(lib, benchmark=job, target="library", notes=["bench compare randwrite, fsync every"]))

marks = {}
for line in open(os.path.join(out, f"{preset}.sqlite.txt")):
    t, rep, rest = line.split(" ", 2)
    mark, secs = rest.strip().split("|")
    marks[t, rep, mark] = float(secs)
for t in ["interposer", "fuse", "ext4"]:
    span = lambda a, b: [marks[t, str(r), b] - marks[t, str(r), a] for r in range(1, reps + 1)]
    med["sqlite-tx", t] = record("sqlite-10k-fsync-tx", t, [txs / s for s in span("tx0", "tx1")], "tx/s")
    med["sqlite-bulk", t] = record("sqlite-1m-rows-1-tx", t, [rows / s for s in span("bulk0", "bulk1")], "rows/s")

ov = {}
for line in open(os.path.join(out, f"{preset}.overhead.txt")):
    name, ns = line.split()
    ov.setdefault(name, []).append(float(ns))
ovm = {k: statistics.median(v) for k, v in ov.items()}
for k, v in ovm.items():
    record("call-cost", k, ov[k], "ns", metric="ns_per_call")

# The same C loop of fsync'd random writes on every path (ns per write
# and fsync): ops/s, without fio's own cost per I/O.
loop = {}
for line in open(os.path.join(out, f"{preset}.loop.txt")):
    name, ns = line.split()
    target, size = name.rsplit("_write", 1)
    loop.setdefault((int(size), target), []).append(1e9 / float(ns))
loop_targets = ["interposer", "library", "fuse", "ext4", "tmpfs"]
for (size, t), xs in sorted(loop.items()):
    med[f"loop-{size}", t] = record(f"c-loop-randwrite-{size}-fsync", t, xs)

info = {"command": command, "cpu_model": platform.processor() or "unknown", "cores": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "flush": "see amberfs info",
        "date_unix": int(time.time()), "version": "bench/preload.sh"}
json.dump({"run": info, "records": records}, open(os.path.join(out, f"results-{preset}.json"), "w"), indent=1)


def r(a, b):
    x, y = med.get(a), med.get(b)
    return f"{x / y:.2f}x" if x and y else "-"


print(f"### `{preset}`: fio psync, 1 job (a thread), medians of {reps}\n")
print("| job | interposer | FUSE mount | library | ext4 (RAM loop) | tmpfs | interposer / FUSE | / ext4 | / library |")
print("|---|---|---|---|---|---|---|---|---|")
for job in jobs:
    lib = f"{med[job, 'library']:,.0f}" if (job, "library") in med else "-"
    print(f"| {job} | {med[job, 'interposer']:,.0f} | {med[job, 'fuse']:,.0f} | {lib} | {med[job, 'ext4']:,.0f} | "
          f"{med[job, 'tmpfs']:,.0f} | {r((job, 'interposer'), (job, 'fuse'))} | {r((job, 'interposer'), (job, 'ext4'))} | "
          f"{r((job, 'interposer'), (job, 'library'))} |")
print(f"\n### `{preset}`: SQLite (sqlite3 CLI), medians of {reps}\n")
print("| workload | interposer | FUSE mount | ext4 (RAM loop) | interposer / ext4 | interposer / FUSE |")
print("|---|---|---|---|---|---|")
for key, name, unit in [("sqlite-tx", f"{txs:,} one-row transactions, synchronous=FULL", "tx/s"),
                        ("sqlite-bulk", f"{rows:,} rows in one transaction", "rows/s")]:
    print(f"| {name} | {med[key, 'interposer']:,.0f} {unit} | {med[key, 'fuse']:,.0f} | {med[key, 'ext4']:,.0f} | "
          f"{r((key, 'interposer'), (key, 'ext4'))} | {r((key, 'interposer'), (key, 'fuse'))} |")
print(f"\n### `{preset}`: the interposer's own cost (ns per call, best of 5 x 200,000, medians of {reps})\n")
print("| call | with the interposer | without | cost |")
print("|---|---|---|---|")
print(f"| pread 128 B, served (vs libamberfs's amberfs_pread) | {ovm['served_pread']:.0f} | {ovm['library_pread']:.0f} | "
      f"{ovm['served_pread'] - ovm['library_pread']:+.0f} ns |")
print(f"\nCalls passed through to a tmpfs file: plainly (one thread), plainly with one idle thread, preloaded with "
      f"the pool not open, preloaded with the pool open (its background threads running).\n")
print("| call | plain | plain, 2 threads | preloaded, pool closed | preloaded, pool open | over plain | over plain, 2 threads |")
print("|---|---|---|---|---|---|---|")
for call in ["pread", "stat"]:
    p, t, i, o = (ovm[f"{k}_kernel_{call}"] for k in ["plain", "threaded", "idle", "preloaded"])
    print(f"| {call} | {p:.0f} | {t:.0f} | {i:.0f} | {o:.0f} | {(o / p - 1) * 100:+.1f}% | {(o / t - 1) * 100:+.1f}% |")
print(f"\n### `{preset}`: fsync'd random writes, the same C loop on every path (ops/s, best of 5 x N, medians of {reps})\n")
print("| write | interposer | library | FUSE mount | ext4 (RAM loop) | tmpfs | interposer / library | / FUSE | / ext4 |")
print("|---|---|---|---|---|---|---|---|---|")
for size in [128, 4096]:
    k = f"loop-{size}"
    cells = " | ".join(f"{med[k, t]:,.0f}" for t in loop_targets)
    print(f"| {size} B | {cells} | {r((k, 'interposer'), (k, 'library'))} | {r((k, 'interposer'), (k, 'fuse'))} | "
          f"{r((k, 'interposer'), (k, 'ext4'))} |")
