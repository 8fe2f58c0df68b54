// Schedule generators — compute-only action lists for every worker, one function per schedule.
//
// Every generator takes the pipeline's shape (which workers hold which stage) and a microbatch count
// and returns FORWARD / BACKWARD (or BACKWARD_INPUT + BACKWARD_WEIGHT) / OPTIMIZER_STEP actions;
// lowering (schedule_lowering.h) adds the communication. No schedule logic lives anywhere else.
//   gpipe        all forwards, then all backwards, one update (fill-drain)
//   1f1b         PipeDream-Flush: warm-up forwards, one-forward-one-backward, drain, one update
//   pipedream    PipeDream's asynchronous 1F1B: no flush, an update after every backward (weight
//                stashing keeps the version each microbatch's forward used); several iterations
//   2bw          PipeDream-2BW: 1F1B without flush, gradients accumulated over an iteration, then one
//                update (two weight versions suffice); several iterations
//   interleaved  Megatron's interleaved 1F1B: each worker holds `chunks` stages s, s+p, s+2p, ...
//   zb-h1        zero-bubble H1: backward split into input and weight gradients; weight gradients
//                fill the bubbles, peak activations as 1F1B (greedy placement with unit times)
// Stage replicas take microbatches round robin (b mod replicas). Errors name the offending option.
#pragma once

#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/schedule.h"

namespace pipetwin {

std::vector<std::string> schedule_names();
bool schedule_has_flush(const std::string& name);  // gpipe, 1f1b, interleaved, zb-h1

// Forwards a worker of `stage` runs before its first backward under 1F1B, as PipeDream's runtime
// computes it: (workers - workers in earlier stages - 1) / replicas, rounded down.
int warm_up_microbatches(const PipelineShape& shape, int stage);

// The shape of a plan's pipeline. With chunks v > 1 (interleaved) the plan must have p*v unreplicated
// stages, and stage s runs on the worker of stage s mod p.
PipelineShape pipeline_shape(const Plan& plan, int chunks = 1);

// Throws Error for an unknown name or a shape the schedule cannot run.
Schedule generate_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations = 1);

}  // namespace pipetwin
