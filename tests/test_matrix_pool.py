"""bench/matrix_pool.py on two synthetic matrices whose figures are known by hand: every configuration
predicted with a fixed bias (+8%, -8%, 0, 0) against the same measured times, and the runs' CPU/work
following measured/predicted exactly. Run by ctest with Debian's python3; exits non-zero on a failure."""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "matrix_pool.py")
MEASURED = {"a": 1.0, "b": 1.05, "c": 2.0, "d": 3.0}
BIAS = {"a": 1.08, "b": 0.92, "c": 1.0, "d": 1.0}  # predicted = measured x bias: a and b swap order


def write_matrix(folder):
    os.makedirs(os.path.join(folder, "gpt"))
    with open(os.path.join(folder, "gpt", "matrix.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["configuration", "in_sample", "predicted_s", "measured_median_s", "cpu_per_work"])
        w.writerow(["base", 1, 1.0, 1.0, 1.0])
        for name, m in MEASURED.items():
            w.writerow([name, 0, repr(m * BIAS[name]), repr(m), repr(1.0 / BIAS[name])])
    with open(os.path.join(folder, "gpt", "matrix.json"), "w") as f:
        json.dump({"kendall_tau": 4 / 6}, f)  # 5 of 6 pairs in order, 1 swapped


def check(condition, what, output):
    if not condition:
        print(f"FAILED: {what}\n--- output ---\n{output}")
        sys.exit(1)


with tempfile.TemporaryDirectory() as root:
    folders = [os.path.join(root, name) for name in ("m1", "m2")]
    for folder in folders:
        write_matrix(folder)
    out = subprocess.run([sys.executable, SCRIPT, *folders], capture_output=True, text=True, check=True).stdout
    # Errors +8, -8, 0, 0 % twice: median |e| 4%, RMS sqrt(2 x 0.08^2 / 4) = 5.66%, mean 0, all 8 within 10%.
    check("pooled over 2 folders:   8 configurations  median |error| 4.00%  RMS 5.66%  mean +0.00%  "
          "within 10% 8  max 8.0%" in out, "pooled figures", out)
    check(re.search(r"a\s+\+8\.00% ± 0\.00\s+\(n 2\)\s+systematic", out), "configuration a: +8% every time", out)
    check(re.search(r"b\s+-8\.00% ± 0\.00\s+\(n 2\)\s+systematic", out), "configuration b: -8% every time", out)
    check(re.search(r"c\s+\+0\.00% ± 0\.00\s+\(n 2\)\n", out), "configuration c: exact, not systematic", out)
    # Taking each bias off (learnt from the other matrix) leaves the measured order and no error.
    check("tau 0.667 -> 1.000, median |error| 0.00%, max 0.0%" in out, "leave one matrix out", out)
    # log(measured/predicted) = log(CPU/work ratio) exactly: correlation 1, scaled predictions exact.
    check("drift: correlation of log(measured/predicted) with log(runs' CPU/work over the base's) 1.00; "
          "tau 0.667 -> 1.000" in out, "drift", out)
    empty = os.path.join(root, "empty")
    os.makedirs(empty)
    bad = subprocess.run([sys.executable, SCRIPT, empty], capture_output=True, text=True)
    check(bad.returncode == 1 and "no MODEL/matrix.csv under " + empty in bad.stderr, "a folder without matrices", bad.stderr)
print("matrix_pool: all checks passed")
