"""Records real PyTorch profiler (Kineto) traces of a two-rank pipeline schedule, labelled as
torch.distributed.pipelining labels its actions (record_function("PP:<action>")), one file per rank,
and writes what it did (rank, action, its own measured duration inside the labelled span and the
duration of the whole `with record_function` around it) for test_kineto_import to check: the
profiler's span lies between the two.

usage: /usr/bin/python3 tests/kineto_trace.py OUTPUT_DIR
"""
import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

# A 1F1B-like order over two ranks, two iterations, with split backward on rank 1.
ORDERS = {
    0: ["0F0", "0F1", "0B0", "0B1"] * 2,
    1: ["1F0", "1I0", "1W0", "1F1", "1I1", "1W1"] * 2,
}
KINDS = {"F": "FORWARD", "B": "BACKWARD", "I": "BACKWARD_INPUT", "W": "BACKWARD_WEIGHT"}


def main(out_dir):
    done = []
    weights = torch.randn(64, 64)
    for rank, order in ORDERS.items():
        seen = {}
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for step, label in enumerate(order):
                outer_begin = time.perf_counter()
                with record_function("PP:" + label):
                    begin = time.perf_counter()
                    x = torch.randn(64, 64)
                    for _ in range(4):
                        x = torch.tanh(x @ weights)
                    time.sleep(0.002 + 0.001 * (step % 3))
                    duration = time.perf_counter() - begin
                outer_duration = time.perf_counter() - outer_begin
                key = label
                iteration = seen.get(key, 0)
                seen[key] = iteration + 1
                done.append({"rank": rank, "label": label, "stage": int(label[0]), "kind": KINDS[label[1]],
                             "microbatch": int(label[2:]), "iteration": iteration, "duration_s": duration,
                             "outer_duration_s": outer_duration})
                with record_function("not_a_pipeline_action"):
                    torch.tanh(x)
        prof.export_chrome_trace(f"{out_dir}/rank{rank}.json")
    with open(f"{out_dir}/expected.json", "w") as f:
        json.dump(done, f)


if __name__ == "__main__":
    main(sys.argv[1])
