#!/usr/bin/env python3
"""Whole-process start-up and planning time of the `pipetwin` command and of the two executables it
hands commands to: median and spread (min-max) of wall time over --runs runs, and peak resident memory
(the largest over the runs, as /usr/bin/time reports it: a process forked from Python would count
Python's own pages). Usage: bench/startup.py [--build build] [--profiles DIR] [--runs 21]"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def measure(command, runs):
    times, peaks = [], []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed")
        timed = subprocess.run(["/usr/bin/time", "-f", "%M"] + command, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        peaks.append(int(timed.stderr.strip().splitlines()[-1]) / 1024)
    return statistics.median(times), min(times), max(times), max(peaks)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default="build")
    parser.add_argument("--profiles", default="../shared/profiles/pipedream")
    parser.add_argument("--runs", type=int, default=21)
    arguments = parser.parse_args()
    p = os.path.join(arguments.build, "pipetwin")
    with tempfile.TemporaryDirectory() as out:
        plan = os.path.join(out, "p.json")
        cases = [
            ("pipetwin --version", [p, "--version"]),
            ("pipetwin plan vgg16, Cluster-A (16 workers)",
             [p, "plan", "-q", "-p", f"{arguments.profiles}/vgg16.txt", "-c", "platforms/pipedream-cluster-a.json", "-o", plan]),
            ("pipetwin plan resnet50, Cluster-A (16 workers)",
             [p, "plan", "-q", "-p", f"{arguments.profiles}/resnet50.txt", "-c", "platforms/pipedream-cluster-a.json", "-o", plan]),
            ("pipetwin plan gnmt, one server of Cluster-B (8 workers)",
             [p, "plan", "-q", "-n", "8", "-p", f"{arguments.profiles}/gnmt.txt", "-c", "platforms/pipedream-cluster-b.json",
              "-o", plan]),
            ("pipetwin simulate --help (pipetwin-sim, SimGrid)", [p, "simulate", "--help"]),
        ]
        if os.access(os.path.join(arguments.build, "pipetwin-exec"), os.X_OK):
            cases.append(("pipetwin run --help (pipetwin-exec, libtorch)", [p, "run", "--help"]))
        print(f"{arguments.runs} runs each\n")
        print("| command | median | min–max | peak RSS |")
        print("|---|---|---|---|")
        for label, command in cases:
            median, low, high, rss = measure(command, arguments.runs)
            print(f"| {label} | {median * 1000:.1f} ms | {low * 1000:.1f}–{high * 1000:.1f} ms | {rss:.1f} MiB |")


if __name__ == "__main__":
    main()
