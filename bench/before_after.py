"""Reads the JSON records of bench/before_after.sh's runs (OUT/before-N,
OUT/after-N) and prints, per experiment, job, target and metric, the
median over each build's runs of its per-run medians and their ratio."""
import collections
import glob
import json
import os
import statistics
import sys

METRICS = ("throughput", "bandwidth", "pm_bytes_per_write")


def gather(out):
    vals = collections.defaultdict(lambda: collections.defaultdict(list))
    for run in sorted(glob.glob(os.path.join(out, "*-[0-9]*"))):
        who = os.path.basename(run).split("-")[0]
        for f in glob.glob(os.path.join(run, "results", "seeds", "*.json")):
            exp = os.path.basename(f)[:-5]
            for r in json.load(open(f))["records"]:
                if r["metric"] in METRICS or r["unit"] == "ms":
                    key = (exp, r.get("benchmark", ""), r["target"], r["metric"], r["unit"])
                    vals[key][who].append(r["value"])
    return vals


def main():
    vals = gather(sys.argv[1])
    print("| experiment | job | target | metric | before | after | after / before |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for (exp, job, target, metric, unit), d in sorted(vals.items()):
        if not d["before"] or not d["after"]:
            continue
        b, a = statistics.median(d["before"]), statistics.median(d["after"])
        r = a / b if b else float("nan")
        if r == r:
            ratios.append(r)
        print(f"| {exp} | {job} | {target} | {metric} ({unit}) | {b:,.0f} | {a:,.0f} | {r:.2f}x |")
    if ratios:
        print(f"\n{len(ratios)} figures: after / before median {statistics.median(ratios):.3f}, "
              f"min {min(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
