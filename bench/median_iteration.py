"""Median iteration time of a pipetwin trace (JSON lines): each iteration past the header's warm-up
spans from its first event's start to its last event's end. As a script: prints it for the trace given."""
import json
import statistics
import sys


def median_iteration_s(path):
    """(median iteration seconds, the trace's header)"""
    lines = open(path).read().splitlines()
    header = json.loads(lines[0])
    warmup = header.get("warmup_iterations", 0)
    spans = {}
    for line in lines[1:]:
        e = json.loads(line)
        if e["iteration"] < warmup:
            continue
        start, end = spans.get(e["iteration"], (e["start_s"], e["end_s"]))
        spans[e["iteration"]] = (min(start, e["start_s"]), max(end, e["end_s"]))
    return statistics.median(end - start for start, end in spans.values()), header


if __name__ == "__main__":
    print(f"{median_iteration_s(sys.argv[1])[0]:.6f}")
