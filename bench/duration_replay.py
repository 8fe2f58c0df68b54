#!/usr/bin/python3
"""Where a measured run's iteration time comes from: replays the run's own action lists (max-plus, each
worker in its recorded order) with
  a) each action's measured duration, messages arriving a fixed hop after their send ends and a receive
     of an arrived message taking a fixed take (medians over the run);
  b) the same with every compute and send at the mean duration of its worker and kind (what a
     deterministic twin does);
  c) each compute and send at a duration drawn at random (seeded) from its worker and kind's own
     durations in the run: the same spread, but independent from action to action (median over 21 draws);
and prints the median iteration time (end to end, iterations after the first) of the run, a), b) and c).
a) close to the run says hop and take describe the messages; b) below a) is what the variability of
the durations (slow stretches on the critical path) costs, which a model of mean durations cannot show;
c) close to a) says independent draws of that spread explain it, c) close to b) that the slow actions
come together (stretches) and a model of independent draws would not show it either.
Usage: bench/duration_replay.py measured.jsonl [...]   (traces written by `pipetwin run`)
"""
import collections
import json
import random
import statistics
import sys


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[0], lines[1:]


def replay(events, hop_s, take_s, duration):
    by_worker = collections.defaultdict(list)
    for e in events:
        by_worker[e["worker"]].append(e)
    for actions in by_worker.values():
        actions.sort(key=lambda e: e["start_s"])
    clock = {w: 0.0 for w in by_worker}
    position = {w: 0 for w in by_worker}
    arrival, end = {}, {}
    progressed = True
    while progressed:
        progressed = False
        for w, actions in by_worker.items():
            while position[w] < len(actions):
                e = actions[position[w]]
                if e["kind"].startswith("RECV"):
                    if e["message"] not in arrival:
                        break
                    a = arrival[e["message"]]
                    clock[w] = clock[w] + take_s if a <= clock[w] else a
                else:
                    clock[w] += duration(e)
                    if e["kind"].startswith("SEND"):
                        arrival[e["message"]] = clock[w] + hop_s
                end[id(e)] = clock[w]
                position[w] += 1
                progressed = True
    if any(position[w] < len(a) for w, a in by_worker.items()):
        raise SystemExit("replay stalled: a receive whose send is not in the trace")
    return end


def median_iteration_s(events, end_of):
    last = collections.defaultdict(float)
    for e in events:
        if e["iteration"] >= 1:
            last[e["iteration"]] = max(last[e["iteration"]], end_of(e))
    ends = [last[i] for i in sorted(last)]
    return statistics.median(b - a for a, b in zip(ends, ends[1:]))


def main(paths):
    print(f"{'trace':48} {'run':>8} {'a) own':>8} {'b) means':>9} {'c) draws':>9} {'b / run':>8} {'c / run':>8}")
    for path in paths:
        _, events = load(path)
        sends = {e["message"]: e for e in events if e["kind"].startswith("SEND")}
        hops, takes = [], []
        for e in events:
            s = sends.get(e["message"]) if e["kind"].startswith("RECV") else None
            if s is not None:
                (hops if e["start_s"] <= s["end_s"] else takes).append(e["end_s"] - max(s["end_s"], e["start_s"]))
        hop_s = statistics.median(hops) if hops else 0.0
        take_s = statistics.median(takes) if takes else 0.0
        durations = collections.defaultdict(list)
        for e in events:
            if e["iteration"] >= 1 and not e["kind"].startswith("RECV"):
                durations[(e["worker"], e["kind"])].append(e["end_s"] - e["start_s"])
        mean = {k: statistics.mean(v) for k, v in durations.items()}
        run = median_iteration_s(events, lambda e: e["end_s"])
        own_end = replay(events, hop_s, take_s, lambda e: e["end_s"] - e["start_s"])
        own = median_iteration_s(events, lambda e: own_end[id(e)])
        mean_end = replay(events, hop_s, take_s, lambda e: mean.get((e["worker"], e["kind"]), e["end_s"] - e["start_s"]))
        means = median_iteration_s(events, lambda e: mean_end[id(e)])
        draws = []
        generator = random.Random(1)
        for _ in range(21):
            drawn_end = replay(events, hop_s, take_s,
                               lambda e: generator.choice(durations[(e["worker"], e["kind"])])
                               if (e["worker"], e["kind"]) in durations else e["end_s"] - e["start_s"])
            draws.append(median_iteration_s(events, lambda e: drawn_end[id(e)]))
        drawn = statistics.median(draws)
        print(f"{path[-48:]:48} {run * 1e3:7.1f}ms {own * 1e3:7.1f}ms {means * 1e3:8.1f}ms {drawn * 1e3:8.1f}ms "
              f"{means / run:8.3f} {drawn / run:8.3f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
