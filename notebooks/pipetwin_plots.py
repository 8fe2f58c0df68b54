"""Plots of pipetwin files: traces (pipetwin.trace/1 JSON lines) and sweep CSVs.

Used by the notebooks in this folder and by `pipetwin plot` (python3 pipetwin_plots.py timeline
TRACE -o PNG). Needs matplotlib and pandas (Debian's python3-matplotlib and python3-pandas).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

KIND_COLOURS = {
    "FORWARD": "#4c72b0",
    "BACKWARD": "#dd8452",
    "BACKWARD_INPUT": "#c44e52",
    "BACKWARD_WEIGHT": "#937860",
    "SEND_ACT": "#8da0cb",
    "RECV_ACT": "#a6d854",
    "SEND_GRAD": "#e78ac3",
    "RECV_GRAD": "#ffd92f",
    "ALLREDUCE": "#55a868",
    "OPTIMIZER_STEP": "#8172b3",
    "RECOMPUTE": "#64b5cd",
    "TENSOR_ALLREDUCE": "#2ca02c",
}
# pipetwin's one definition of compute (planner/schedule.h is_compute): the device computes in these;
# a worker's bubble is the share of the measured window it spends in none of them.
COMPUTE = ("FORWARD", "BACKWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "RECOMPUTE", "OPTIMIZER_STEP")


def load_trace(path):
    """Returns (header dict, events DataFrame) of a pipetwin trace."""
    with open(path) as handle:
        lines = [line for line in handle if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty trace")
    header = json.loads(lines[0])
    if header.get("format") != "pipetwin.trace/1":
        raise ValueError(f"{path}: not a pipetwin.trace/1 file")
    events = pd.DataFrame([json.loads(line) for line in lines[1:]])
    events["duration_s"] = events["end_s"] - events["start_s"]
    return header, events


def plot_timeline(header, events, ax=None, title=None, kinds=COMPUTE, row_offset=0.0, height=0.8, label_boxes=True):
    """A Gantt chart: one row per worker, one box per action, coloured by kind, microbatch on the box."""
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 0.6 * header["workers"] + 1.5))
    shown = events[events["kind"].isin(kinds)]
    span = max(events["end_s"].max(), 1e-12)
    for kind, group in shown.groupby("kind"):
        ax.broken_barh(
            list(zip(group["start_s"], group["duration_s"])),
            (0, 0),
            facecolors=KIND_COLOURS.get(kind, "grey"),
        )  # legend anchor (zero height)
        for row in group.itertuples():
            ax.broken_barh(
                [(row.start_s, max(row.duration_s, span * 1e-4))],
                (row.worker + row_offset - height / 2, height),
                facecolors=KIND_COLOURS.get(kind, "grey"),
                edgecolor="white",
                linewidth=0.3,
            )
            if label_boxes and row.microbatch >= 0 and row.duration_s > span / 150:
                ax.text(row.start_s + row.duration_s / 2, row.worker + row_offset, str(row.microbatch),
                        ha="center", va="center", fontsize=6, color="white")
    ax.set_yticks(range(header["workers"]))
    ax.set_yticklabels([f"worker {w}" for w in range(header["workers"])])
    if not ax.yaxis_inverted():
        ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title or f"{header['source']} {header['schedule']}: {header['profile']} on {header['cluster']}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=KIND_COLOURS[k]) for k in kinds if k in set(shown["kind"])]
    ax.legend(handles, [k for k in kinds if k in set(shown["kind"])], loc="upper right", fontsize=7)
    return ax


def bubble_fraction(header, events):
    """Per worker, the share of the measured window (after the warm-up iterations) not spent computing,
    as pipetwin's trace metrics compute it (traces/trace_metrics.cpp)."""
    iterations = max(1, header["iterations"])
    ends = [events[events["iteration"] == i]["end_s"].max() for i in range(iterations)]
    ends = [0.0 if pd.isna(end) else end for end in ends]
    warmup = min(max(header.get("warmup_iterations", 0), 0), iterations - 1)
    start, end = (ends[warmup - 1] if warmup > 0 else 0.0), ends[-1]
    busy = [0.0] * header["workers"]
    for row in events[events["kind"].isin(COMPUTE)].itertuples():
        if 0 <= row.worker < header["workers"]:
            busy[row.worker] += max(0.0, min(row.end_s, end) - max(row.start_s, start))
    return [1.0 - b / (end - start) if end > start else 0.0 for b in busy]


def save(figure, path):
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def aligned_durations(predicted, measured):
    """Events of both traces joined on (worker, stage, kind, microbatch, iteration), with the relative error."""
    keys = ["worker", "stage", "kind", "microbatch", "iteration"]
    joined = predicted[keys + ["duration_s", "start_s"]].merge(
        measured[keys + ["duration_s", "start_s"]], on=keys, suffixes=("_predicted", "_measured"))
    joined = joined[joined["duration_s_measured"] > 0]
    joined["relative_error"] = (joined["duration_s_predicted"] - joined["duration_s_measured"]) / joined["duration_s_measured"]
    return joined


def load_sweep(path):
    sweep = pd.read_csv(path)
    sweep["feasible"] = sweep["feasible"].astype(str).str.lower() == "true"
    return sweep


def load_search(path):
    """A CSV written by `pipetwin search --csv`: one row per configuration, fastest first."""
    search = pd.read_csv(path)
    search["fits"] = search["fits"].astype(str).str.lower() == "true"
    return search


def main(argv):
    parser = argparse.ArgumentParser(description="Plot a pipetwin trace as a timeline PNG.")
    parser.add_argument("command", choices=["timeline", "bubbles"])
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", help="PNG to write (timeline)")
    parser.add_argument("--all-actions", action="store_true", help="show sends and receives too")
    arguments = parser.parse_args(argv)
    try:
        header, events = load_trace(arguments.trace)
        if arguments.command == "timeline" and not arguments.output:
            raise ValueError("timeline needs -o PNG")
    except (OSError, ValueError, json.JSONDecodeError) as error:
        print(f"pipetwin plot: error: {error}", file=sys.stderr)
        return 1
    if arguments.command == "bubbles":  # one line per worker: its bubble fraction (checks against pipetwin's)
        for worker, fraction in enumerate(bubble_fraction(header, events)):
            print(f"{worker} {fraction:.12f}")
        return 0
    kinds = tuple(KIND_COLOURS) if arguments.all_actions else COMPUTE
    figure, ax = plt.subplots(figsize=(12, 0.6 * header["workers"] + 1.5))
    plot_timeline(header, events, ax=ax, kinds=kinds)
    save(figure, arguments.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
