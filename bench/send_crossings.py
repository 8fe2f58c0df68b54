#!/usr/bin/python3
"""Sends that cross, measured: how long a send's posting takes by its gap to the nearest send the other
way on its pair, how often each configuration's sends cross, and how much CPU beside compute a run
spends per second its crossing sends took (bench/README.md, "Sends that cross").

Usage: bench/send_crossings.py MODEL MATRIX_DIR...   (folders `validate --matrix` wrote for several
models, e.g. /tmp/m17 holding vgg16/, resnet/, gpt/; their measured-*.jsonl traces are read).
Run with Debian's /usr/bin/python3 (numpy).
"""
import bisect
import collections
import glob
import os
import statistics
import sys

import numpy

from duration_replay import load  # a trace's header and events

GAP_EDGES_MS = [-2, -1, -0.5, -0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3, 0.5, 1, 2]


def is_send(event):
    return event["kind"].startswith("SEND")


def crossed(send, by_pair):
    """Its posting overlaps the posting of a send from its peer to its worker."""
    return any(o["start_s"] < send["end_s"] and send["start_s"] < o["end_s"] for o in by_pair[(send["peer"], send["worker"])])


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model, matrices = sys.argv[1], sys.argv[2:]
    by_gap = collections.defaultdict(list)       # gap bin -> posting ms (2-worker runs but GPipe's)
    by_config = collections.defaultdict(lambda: {"crossing": [], "other": [], "iterations": 0})
    per_run = []                                 # (crossing ms, other posting ms, CPU beside compute ms) per iteration
    for matrix in matrices:
        for path in sorted(glob.glob(os.path.join(matrix, model, "*", "measured-*.jsonl"))):
            config = os.path.basename(os.path.dirname(path))
            header, events = load(path)
            warmup = header["warmup_iterations"]
            iterations = header["iterations"] - warmup
            sends = [e for e in events if is_send(e)]
            by_pair = collections.defaultdict(list)
            starts = collections.defaultdict(list)
            for e in sends:
                by_pair[(e["worker"], e["peer"])].append(e)
                starts[(e["worker"], e["peer"])].append(e["start_s"])
            for pair in starts:
                starts[pair].sort()
            crossing_ms = other_ms = 0.0
            row = by_config[config]
            row["iterations"] += iterations
            for e in sends:
                if e["iteration"] < warmup:
                    continue
                posting_ms = 1e3 * (e["end_s"] - e["start_s"])
                if crossed(e, by_pair):
                    row["crossing"].append(posting_ms)
                    crossing_ms += posting_ms
                else:
                    row["other"].append(posting_ms)
                    other_ms += posting_ms
                other_way = starts[(e["peer"], e["worker"])]
                if header["workers"] == 2 and not config.startswith("gpipe") and other_way:
                    i = bisect.bisect_left(other_way, e["start_s"])
                    gap_ms = min((1e3 * (e["start_s"] - other_way[j]) for j in (i - 1, i) if 0 <= j < len(other_way)), key=abs)
                    by_gap[bisect.bisect_right(GAP_EDGES_MS, gap_ms)].append(posting_ms)
            extra = header.get("extra", {})
            if "process_cpu_s" in extra and "compute_cpu_s" in extra and len(extra["process_cpu_s"]) == header["workers"]:
                beside_ms = 1e3 * sum(p - c for p, c in zip(extra["process_cpu_s"], extra["compute_cpu_s"]))
                per_run.append((config, crossing_ms / iterations, other_ms / iterations, beside_ms / iterations))

    print(f"{model}: a send's posting (ms) by its gap to the nearest send the other way (2-worker runs but GPipe's)")
    for b in sorted(by_gap):
        low = GAP_EDGES_MS[b - 1] if b > 0 else "-inf"
        high = GAP_EDGES_MS[b] if b < len(GAP_EDGES_MS) else "inf"
        v = by_gap[b]
        print(f"  [{low}, {high}) ms  n {len(v):6}  mean {statistics.mean(v):.2f}  median {statistics.median(v):.2f}")
    print(f"\n{model}: per configuration, sends an iteration that crossed one the other way and their posting (ms)")
    for config, row in sorted(by_config.items()):
        c, o = row["crossing"], row["other"]
        if not row["iterations"] or not o:
            continue
        print(f"  {config:34} crossing {len(c) / row['iterations']:5.2f} mean {statistics.mean(c) if c else 0:.2f}"
              f" | others {len(o) / row['iterations']:5.2f} mean {statistics.mean(o):.2f} median {statistics.median(o):.2f}")
    print(f"\n{model}: CPU beside compute per iteration = a + b x crossing time + c x other posting (ms, least squares over runs)")
    for config in sorted({r[0] for r in per_run}):
        runs = numpy.array([r[1:] for r in per_run if r[0] == config])
        if len(runs) < 10 or runs[:, 0].max() == 0:
            continue
        x = numpy.c_[numpy.ones(len(runs)), runs[:, 0], runs[:, 1]]
        a, b, c = numpy.linalg.lstsq(x, runs[:, 2], rcond=None)[0]
        print(f"  {config:34} runs {len(runs):3}  a {a:6.2f}  b {b:5.2f}  c {c:5.2f}")


if __name__ == "__main__":
    main()
