#!/usr/bin/env python3
"""Draws a bench script's raw lines as grouped bars normalized to one
target, with `amberfs bench plot` (SVG and PNG, and the records as CSV):
each line is `TARGET JOB VALUE` (or `JOB TARGET VALUE` with --job-first);
a job in --seconds is a time, drawn as its speed (1 / seconds) so every
bar reads higher-is-faster.

    python3 bench/lib/plot_runs.py RUNS AMBERFS PREFIX --title TITLE
        --baseline TARGET --command CMD [--job-first] [--seconds JOB,...]
        [--label JOB=LABEL ...]

Writes PREFIX.json (the records, as a suite's --json does), then
PREFIX.svg, PREFIX.png and PREFIX.csv.
"""
import argparse
import json
import os
import statistics
import subprocess
import time


def parse():
    a = argparse.ArgumentParser()
    a.add_argument("runs")
    a.add_argument("amberfs")
    a.add_argument("prefix")
    a.add_argument("--title", required=True)
    a.add_argument("--baseline", required=True)
    a.add_argument("--command", required=True)
    a.add_argument("--job-first", action="store_true")
    a.add_argument("--seconds", default="")
    a.add_argument("--label", action="append", default=[])
    return a.parse_args()


def samples(path, job_first):
    """(job, target) -> values, and the jobs and targets in first-seen order."""
    runs, jobs, targets = {}, [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) != 3:
                continue
            job, target = (w[0], w[1]) if job_first else (w[1], w[0])
            runs.setdefault((job, target), []).append(float(w[2]))
            jobs += [job] if job not in jobs else []
            targets += [target] if target not in targets else []
    return runs, jobs, targets


def record(job, target, xs, seconds, label):
    if seconds:
        xs = [1.0 / x for x in xs if x > 0]
    mean = statistics.mean(xs)
    rsd = 100 * statistics.pstdev(xs) / mean if mean else 0.0
    return {
        "benchmark": label, "target": target, "policy": "amber", "preset": "dram",
        "threads": 1, "metric": "speed" if seconds else "throughput",
        "value": statistics.median(xs), "unit": "1/s" if seconds else "ops/s",
        "summary": {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
                    "rsd_percent": rsd, "samples": len(xs)},
        "notes": [f"{job}: {'1 / seconds' if seconds else 'as measured'}"],
    }


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")),
                    "unknown")


def main():
    a = parse()
    runs, jobs, targets = samples(a.runs, a.job_first)
    seconds = set(filter(None, a.seconds.split(",")))
    labels = dict(x.split("=", 1) for x in a.label)
    records = [record(j, t, runs[(j, t)], j in seconds, labels.get(j, j))
               for j in jobs for t in targets if (j, t) in runs]
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    run = {"command": a.command, "cpu_model": cpu_model(), "cores": os.cpu_count() or 1,
           "memory_bytes": mem, "flush": "as the pool's `amberfs info` says",
           "date_unix": int(time.time()), "version": "0.1.0"}
    with open(a.prefix + ".json", "w") as f:
        json.dump({"run": run, "records": records}, f, indent=1)
    subprocess.run([a.amberfs, "bench", "plot", "--input", a.prefix + ".json", "--kind", "bars",
                    "--baseline", a.baseline, "--title", a.title, "--out", a.prefix], check=True)


if __name__ == "__main__":
    main()
