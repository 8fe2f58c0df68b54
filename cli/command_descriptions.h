// What each command that runs in another executable does, in one place: the command itself
// (pipetwin-sim, pipetwin-exec) and `pipetwin --help`, which lists it, show the same text.
#pragma once

namespace pipetwin::cli {

inline constexpr const char* kSimulateDescription =
    "Predict a training run: run the schedule of a plan (from --plan, or planned on the fly from\n"
    "--profile) on a SimGrid model of the cluster; print time per iteration, samples/s, bubble per\n"
    "worker, the busiest link and peak memory; write the trace (-o) and a Chrome trace (--chrome).\n"
    "Refuses, before simulating, a schedule that deadlocks and a plan that needs more than the device's\n"
    "memory (naming the worker, its stage and the numbers; --ignore-memory simulates it anyway).";
inline constexpr const char* kPlatformDescription =
    "Write a cluster spec as a SimGrid XML platform (the one `pipetwin simulate` builds): the levels' tree\n"
    "and rail-optimized fabrics as their graph, a fat tree, torus or dragonfly by its routes (at most 256\n"
    "workers).";
inline constexpr const char* kSweepDescription =
    "Simulate many configurations and rank them: the optimizer's plan and balanced plans of each stage\n"
    "count (equal replicas per stage), each with every schedule, microbatch count and bandwidth scale.\n"
    "Runs --jobs simulations at a time, shows progress on stderr, writes one CSV row per configuration\n"
    "(predicted iteration time, samples/s, peak memory, feasible) and names the best. A configuration\n"
    "that needs more than the device's memory is marked infeasible (worker, stage, numbers) and not\n"
    "simulated unless --ignore-memory. For a transformer (--preset NAME, --global-batch B), the\n"
    "configurations are pipetwin search's: tensor x pipeline x data parallel, recomputation, microbatch\n"
    "size and schedule, each simulated on the links (its row's plan reads \"t4 b2 selective\"). Example:\n"
    "  pipetwin sweep --preset llama2-7b -c platforms/dgx-h100.json -n 16 -B 32 --tp 2,4 -o sweep.csv";
inline constexpr const char* kProfileDescription =
    "Measure a zoo model layer by layer on this machine (forward and backward timed layer after layer over\n"
    "whole microbatches, as a stage runs them: median of repeats after warm-up; activation and parameter\n"
    "bytes) and write the profile JSON `pipetwin plan` reads. The first layer's forward includes making the\n"
    "microbatch's inputs, the last layer's the loss (and its backward).";
inline constexpr const char* kRunDescription =
    "Train for real: start one worker process per plan worker on this machine (c10d Gloo over loopback),\n"
    "run the built schedule (or a --schedule-file, as it is) for --iterations, write the measured trace and\n"
    "print time per iteration and bubbles.";
inline constexpr const char* kWorkerDescription =
    "Run one worker of a plan (for several machines): set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE\n"
    "as torchrun does, start one per plan worker (x --tp); each writes its part of the trace to --trace-part.";
inline constexpr const char* kProbeDescription =
    "Measure how this machine's compute is shared: 1, 2, ... processes train a zoo model at once\n"
    "through the runtime `run` uses, each count twice (the faster take kept: another job only slows one);\n"
    "on CPU a count no idle machine gives (over its cores' worth, or under 85% of the count below) is\n"
    "taken up to twice more, then kept with a warning;\n"
    "prints each process's rate and the machine's throughput against one process alone and writes them\n"
    "as JSON (validate --matrix uses them for other process counts).";

inline constexpr const char* kValidateDescription =
    "Profile -> plan -> simulate -> run -> compare in one command on this machine, then calibrate the\n"
    "cluster spec on the measured trace, simulate again and compare again. Prints\n"
    "`iteration time error: N%` (after calibration) and writes everything to -o DIR.\n"
    "With --matrix, out of sample: calibrate on each run of one configuration (--schedule,\n"
    "--microbatches), then predict with each calibration, keeping the median, and run 14 others it\n"
    "never saw (--runs each), print each error\n"
    "and CPU/work (the runs' compute CPU over the work predicted: above the base's, the machine\n"
    "computed slower than while calibrating, and the prediction leans fast), the median/max |error|\n"
    "and Kendall tau beside the noise floor (what a twin exact to the machine's mean would score against\n"
    "the same runs: errors within it are the machine's noise), and write DIR/matrix.csv and DIR/matrix.json.";

}  // namespace pipetwin::cli
