"""Medians of bench/mapped.sh's runs of one preset, as a Markdown table.

    python3 report.py OUT PRESET COMMAND TXS PUTS MIB
"""
import os, statistics, sys

out, preset, command, txs, puts, mib = sys.argv[1:7]
runs = {}
for line in open(os.path.join(out, f"{preset}.dbs.txt")):
    target, db, value, _unit = line.split()
    runs.setdefault((db, target), []).append(float(value))
med = {k: statistics.median(v) for k, v in runs.items()}
mapped, pool = [], []
for line in open(os.path.join(out, f"{preset}.read.txt")):
    _, m, _, p = line.split()
    mapped.append(float(m))
    pool.append(float(p))
ratios = [m / p for m, p in zip(mapped, pool)]
fsyncs, msyncs = [], []
for line in open(os.path.join(out, f"{preset}.sync.txt")):
    _, f, _, m = line.split()
    fsyncs.append(float(f))
    msyncs.append(float(m))

print(f"`{command}`, preset `{preset}`, medians of {len(runs[('sqlite', 'interposer')])} runs:\n")
print("| workload | interposer (amber) | interposer (direct) | FUSE mount (amber) | ext4 (RAM loop) "
      "| amber / ext4 | amber / mount | direct / ext4 | direct / mount |")
print("|---|---|---|---|---|---|---|---|---|")
rows = [("sqlite", f"SQLite WAL, {int(txs):,} one-row transactions (synchronous=FULL), tx/s"),
        ("lmdb", f"LMDB, {int(puts):,} puts, each a synced commit, puts/s")]
for db, name in rows:
    ip, di, fu, e4 = med[db, "interposer"], med[db, "direct"], med[db, "fuse"], med[db, "ext4"]
    print(f"| {name} | {ip:,.0f} | {di:,.0f} | {fu:,.0f} | {e4:,.0f} | {ip / e4:.1f}x | {ip / fu:.1f}x "
          f"| {di / e4:.1f}x | {di / fu:.1f}x |")
print()
print(f"Sequential reads of a mapped {int(mib)} MiB file under the interposer, 1 MiB memcpy at a time: "
      f"{statistics.median(mapped):.2f} GiB/s, against {statistics.median(pool):.2f} GiB/s copying the "
      f"pool's own mapping: **{statistics.median(ratios):.2f}x** (median of the per-pass ratios; "
      f"passes {', '.join(f'{r:.2f}' for r in ratios)}).")
print()
print(f"fsync of a file with a written {int(mib)} MiB shared mapping (every line of the mapping written "
      f"back): {statistics.median(fsyncs):.1f} ms; msync of 4 KiB of it: {statistics.median(msyncs) * 1000:.1f} µs "
      f"(medians of {len(fsyncs)}).")
