"""Pools several out-of-sample matrices (folders written by `pipetwin validate --matrix` through
bench/validation_matrix.sh, one subfolder per model with matrix.csv and matrix.json) and asks of them what
one matrix cannot answer:
  1. pooled figures: median, RMS and mean signed error, how many within 10%, Kendall tau per matrix;
  2. each configuration's mean signed error over the matrices and its standard error: systematic where
     |mean| > 2 standard errors (what the twin gets wrong every time, not one matrix's noise);
  3. leave one matrix out: Kendall tau and |error| once each configuration's mean log error over the OTHER
     matrices is taken off its prediction, the most any fixed per-configuration correction could gain;
  4. drift: how far the errors follow the runs' compute CPU per unit of work against the base's (column
     cpu_per_work: the machine computing slower or faster than while the base ran), and tau with each
     prediction scaled by that ratio (an attribution, not a prediction: it uses the runs being predicted).
To weigh a change to the twin on matrices already run: copy each folder (cp -a), re-predict it with
`VALIDATE_FLAGS=--reuse-runs bench/validation_matrix.sh BUILD COPY MODELS...` and pool the copies.
Usage: /usr/bin/python3 bench/matrix_pool.py MATRIX_DIR... (figures: bench/README.md "Out of sample")."""
import csv
import itertools
import json
import math
import os
import statistics
import sys

MODELS = ("vgg16", "resnet", "gpt", "mlp")


def kendall_tau(predicted, measured):
    """Kendall tau-a between two equally long lists (ties count for neither side)."""
    pairs = list(itertools.combinations(range(len(predicted)), 2))
    if not pairs:
        return float("nan")
    signs = [(predicted[i] - predicted[j]) * (measured[i] - measured[j]) for i, j in pairs]
    return (sum(s > 0 for s in signs) - sum(s < 0 for s in signs)) / len(pairs)


def load(folders):
    """{model: {matrix folder: {"rows": {configuration: (predicted_s, measured_s, cpu_ratio)}, "tau": x}}}"""
    matrices = {}
    for folder in folders:
        for model in MODELS:
            path = os.path.join(folder, model, "matrix.csv")
            if not os.path.exists(path):
                continue
            rows = list(csv.DictReader(open(path)))
            base = [r for r in rows if r["in_sample"] == "1"]
            base_cpu = float(base[0].get("cpu_per_work") or 0) if base else 0.0
            out = {}
            for r in rows:
                if r["in_sample"] != "0":
                    continue
                cpu = float(r.get("cpu_per_work") or 0)
                ratio = cpu / base_cpu if cpu > 0 and base_cpu > 0 else float("nan")
                out[r["configuration"]] = (float(r["predicted_s"]), float(r["measured_median_s"]), ratio)
            summary = json.load(open(os.path.join(folder, model, "matrix.json")))
            matrices.setdefault(model, {})[folder] = {"rows": out, "tau": summary["kendall_tau"]}
    if not matrices:
        sys.exit(f"matrix_pool.py: no MODEL/matrix.csv under {' '.join(folders)}: give the folders "
                 "bench/validation_matrix.sh wrote")
    return matrices


def error(row):
    """Signed error of one (predicted_s, measured_s, cpu_ratio) row."""
    return row[0] / row[1] - 1


def errors(rows):
    return [error(r) for r in rows.values()]


def figures(signed):
    absolute = [abs(e) for e in signed]
    return (f"{len(signed):3} configurations  median |error| {100 * statistics.median(absolute):.2f}%  "
            f"RMS {100 * math.sqrt(statistics.mean(e * e for e in signed)):.2f}%  "
            f"mean {100 * statistics.mean(signed):+.2f}%  within 10% {sum(a <= 0.10 for a in absolute)}  "
            f"max {100 * max(absolute):.1f}%")


def leave_one_out(by_folder):
    """Per matrix: (tau as is, tau corrected, corrected signed errors), each configuration's prediction
    divided by exp(its mean log error over the other matrices)."""
    result = []
    for folder, matrix in by_folder.items():
        names = list(matrix["rows"])
        others = [m["rows"] for f, m in by_folder.items() if f != folder]
        corrected = []
        for name in names:
            logs = [math.log(o[name][0] / o[name][1]) for o in others if name in o]
            corrected.append(matrix["rows"][name][0] * math.exp(-statistics.mean(logs)) if logs else matrix["rows"][name][0])
        measured = [matrix["rows"][n][1] for n in names]
        predicted = [matrix["rows"][n][0] for n in names]
        result.append((kendall_tau(predicted, measured), kendall_tau(corrected, measured),
                       [c / m - 1 for c, m in zip(corrected, measured)]))
    return result


def drift(by_folder):
    """(correlation of log(measured/predicted) with log(CPU/work ratio), mean tau as is, mean tau with
    each prediction scaled by its ratio), over the matrices that record CPU/work."""
    xs, ys, before, after = [], [], [], []
    for matrix in by_folder.values():
        rows = [r for r in matrix["rows"].values() if r[2] > 0]
        if len(rows) != len(matrix["rows"]):
            continue
        xs += [math.log(r[2]) for r in rows]
        ys += [math.log(r[1] / r[0]) for r in rows]
        before.append(kendall_tau([r[0] for r in rows], [r[1] for r in rows]))
        after.append(kendall_tau([r[0] * r[2] for r in rows], [r[1] for r in rows]))
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    return statistics.correlation(xs, ys), statistics.mean(before), statistics.mean(after)


def main(folders):
    matrices = load(folders)
    pooled = [e for by_folder in matrices.values() for m in by_folder.values() for e in errors(m["rows"])]
    print(f"pooled over {len(folders)} folders: {figures(pooled)}")
    for model, by_folder in matrices.items():
        taus = [m["tau"] for m in by_folder.values()]
        print(f"\n== {model}: {len(by_folder)} matrices, "
              f"{figures([e for m in by_folder.values() for e in errors(m['rows'])])}")
        print(f"   Kendall tau mean {statistics.mean(taus):.3f}, per matrix " + " ".join(f"{t:.2f}" for t in taus))
        names = list(dict.fromkeys(n for m in by_folder.values() for n in m["rows"]))
        print("   per configuration: mean signed error ± standard error over the matrices")
        for name in names:
            e = [error(m["rows"][name]) for m in by_folder.values() if name in m["rows"]]
            se = statistics.stdev(e) / math.sqrt(len(e)) if len(e) > 1 else float("nan")
            flag = "  systematic" if len(e) > 1 and abs(statistics.mean(e)) > 2 * se else ""
            spread = f"± {100 * se:4.2f}" if len(e) > 1 else "(one matrix)"
            print(f"     {name:32} {100 * statistics.mean(e):+6.2f}% {spread}  (n {len(e)}){flag}")
        if len(by_folder) > 1:
            loo = leave_one_out(by_folder)
            corrected = [abs(e) for _, _, c in loo for e in c]
            print(f"   leave one matrix out, each configuration's mean error over the others taken off: tau "
                  f"{statistics.mean(t for t, _, _ in loo):.3f} -> {statistics.mean(t for _, t, _ in loo):.3f}, "
                  f"median |error| {100 * statistics.median(corrected):.2f}%, max {100 * max(corrected):.1f}%")
        d = drift(by_folder)
        if d:
            print(f"   drift: correlation of log(measured/predicted) with log(runs' CPU/work over the base's) "
                  f"{d[0]:.2f}; tau {d[1]:.3f} -> {d[2]:.3f} with each prediction scaled by that ratio")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 1)
    main(sys.argv[1:])
