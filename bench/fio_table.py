"""Medians of fio JSON results as a Markdown table (bench/fio-*.sh).

    python3 bench/fio_table.py OUT REPS JOB,JOB,... TARGET,TARGET,...

Reads OUT/JOB.TARGET.REP.json for REP in 1..REPS; the first target is the
one measured, the second its baseline (the last column is their ratio).
"""
import json
import os
import statistics
import sys


def metric(path):
    j = json.load(open(path))["jobs"][0]
    side = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
    return side["iops"], side["bw_bytes"] / 2**20


def main():
    out, reps = sys.argv[1], int(sys.argv[2])
    jobs, targets = sys.argv[3].split(","), sys.argv[4].split(",")
    first, base = targets[0], targets[1]
    print(f"| job | target | IOPS (median) | MiB/s (median) | {first} / {base} |")
    print("|---|---|---|---|---|")
    for job in jobs:
        med = {}
        for t in targets:
            vals = [metric(os.path.join(out, f"{job}.{t}.{r}.json")) for r in range(1, reps + 1)]
            med[t] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
        for t in targets:
            ratio = f"{med[first][0] / med[base][0]:.2f}x" if t == first else ""
            print(f"| {job} | {t} | {med[t][0]:,.0f} | {med[t][1]:,.1f} | {ratio} |")


main()
