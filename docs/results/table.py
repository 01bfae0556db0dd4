#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from `amberfs bench ... --json` files.

    python3 docs/results/table.py METRIC FILE.json [FILE.json ...]

One row per (file, threads), one column per target: the median, and its
ratio to the run's first target in parentheses. Every target of a row was
measured in the same run as that first target.
"""
import json
import os
import sys


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    metric, files = sys.argv[1], sys.argv[2:]
    rows, targets, unit = [], [], ""
    for path in files:
        with open(path) as f:
            records = [r for r in json.load(f)["records"] if r["metric"] == metric]
        by_threads = {}
        for r in records:
            by_threads.setdefault(r["threads"], {})[r["target"]] = r
            if r["target"] not in targets:
                targets.append(r["target"])
            unit = r["unit"]
        name = os.path.splitext(os.path.basename(path))[0]
        for threads, cells in sorted(by_threads.items()):
            rows.append((f"{name}, {threads} thr", cells))
    if not rows:
        sys.exit(f"no {metric} records in {files}")
    print(f"| run ({metric}, {unit}) | " + " | ".join(targets) + " |")
    print("|---" * (len(targets) + 1) + "|")
    for label, cells in rows:
        out = []
        for t in targets:
            r = cells.get(t)
            out.append("" if r is None else f"{r['value']:,.1f} ({r['ratio_to_first']:.2f}x)")
        print(f"| {label} | " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
