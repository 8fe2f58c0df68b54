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
//   looped-bfs   torch's ScheduleLoopedBFS: chunks as interleaved; all forwards of a chunk before the
//                next chunk's, then the backwards from the last chunk down (microbatches in reverse)
//   zb-h1        zero-bubble H1: backward split into input and weight gradients; weight gradients
//                fill the bubbles, peak activations as 1F1B (greedy placement with unit times)
//   zb-h2        zero-bubble H2: as zb-h1 with about twice the microbatches in flight (fewer bubbles)
//   interleaved-zb  interleaved 1F1B with split backward (torch's ScheduleInterleavedZeroBubble)
//   zb-v         ZB-V: two chunks per worker in a V (worker r holds stages r and 2p-1-r), split backward
//   dualpipe-v   DeepSeek's DualPipeV: the V placement, forwards overlapped with backwards (OVERLAP_F_B)
// The zero-bubble family and DualPipeV are in zero_bubble_schedules.h.
// Stage replicas take microbatches round robin (b mod replicas). Errors name the offending option.
#pragma once

#include <string>
#include <vector>

#include "planner/plan.h"
#include "planner/schedule.h"

namespace pipetwin {

std::vector<std::string> schedule_names();
std::string schedule_names_text(const std::string& separator = ", ");  // "gpipe, 1f1b, ..., dualpipe-v"
std::string schedule_catalogue();  // one line per schedule, "  name  what it is", for --help
bool schedule_has_flush(const std::string& name);  // all but pipedream and 2bw

// Where a schedule puts a plan's stages on workers.
enum class Placement {
  OneStagePerWorker,  // stage s on the plan's devices for s (replicas allowed)
  Looped,             // p*v stages, stage s on worker s mod p (interleaved, looped-bfs, interleaved-zb)
  V,                  // 2p stages, stage s on worker s for s < p and 2p-1-s after (zb-v, dualpipe-v)
};
Placement schedule_placement(const std::string& name);
// Whether the schedule needs one worker per stage (no replicated stage): every placement but
// OneStagePerWorker, and the zero-bubble schedules.
bool schedule_needs_unreplicated_stages(const std::string& name);
// The chunks a schedule runs with: `requested` (--chunks) checked against its placement; a V
// schedule has exactly 2 (1, the default, is taken as 2). Throws Error naming --chunks.
int schedule_chunks(const std::string& name, int requested);

// Forwards a worker of `stage` runs before its first backward under 1F1B, as PipeDream's runtime
// computes it: (workers - workers in earlier stages - 1) / replicas, rounded down.
int warm_up_microbatches(const PipelineShape& shape, int stage);

// The shape of a plan's pipeline under a placement. With chunks v > 1 the plan must have p*v
// unreplicated stages, placed looped or in a V as above.
PipelineShape pipeline_shape(const Plan& plan, int chunks = 1, Placement placement = Placement::Looped);

// Throws Error for an unknown name or a shape the schedule cannot run.
Schedule generate_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations = 1);

}  // namespace pipetwin
