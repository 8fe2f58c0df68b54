// Schedule IR — for every worker, the ordered list of actions it runs (DESIGN.md "Schedule IR").
//
// A schedule is data, made once by build_schedule (schedule_builder.h): generators return compute-only
// lists, lowering adds sends, receives and all-reduces and gives every message an id, unrolling lays
// out every iteration, the validator proves it sound; sim/ and exec/ interpret it unchanged
// (schedule_interpreter.h). Sends are asynchronous (a SEND never waits for its RECV); a RECV waits for
// the SEND with its message id; an ALLREDUCE waits for every member of its group (same id).
// Every pass carries (iteration, microbatch): microbatch 0..microbatches-1 within its iteration.
//
// Text form, as in torch.distributed.pipelining: "<stage><KIND><microbatch>", e.g. "2F0" (stage 2
// forward of microbatch 0), "1SEND_F3" (stage 1 sends its output of microbatch 3), "0RECV_B5",
// "1I4"/"1W4" (backward for the input / for the weights), "1R4" (stage 1 recomputes microbatch 4's
// forward before its backward), "1TP4" (the tensor-parallel sums of the pass before it), "1ALLREDUCE7", "1OPT7".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/action_kind.h"
#include "planner/stage_times.h"
#include "planner/tensor_sums.h"

namespace pipetwin {

// 32 bytes (schedules hold millions): initialise with designated initializers, {.stage = 2, .kind = ...}.
struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::FORWARD;
  bool overlap = false; // a forward that runs as one with its worker's next compute action, a full backward
                        // (DualPipe's OVERLAP_F_B): the pair's receives come before it, its sends after
  int microbatch = -1;  // -1 where none applies
  int peer = -1;        // worker at the other end of a send/receive; -1 otherwise
  int iteration = 0;    // the training iteration the action belongs to
  int message = -1;     // a send and its receive share one id, so do the members of one all-reduce; -1 otherwise
  double bytes = 0.0;   // payload of a send/receive/all-reduce

  bool operator==(const Action& other) const = default;
};
static_assert(sizeof(Action) == 32, "keep Action small: schedules hold millions of them");

// The one definition of "compute": the device is busy computing (F, B, I, W, R and the optimizer step).
// A worker's bubble is the share of the time it spends on none of these (waiting, sending, receiving,
// all-reducing); `schedule`, `simulate`, the trace metrics and the plots all use it.
bool is_compute(ActionKind kind);
bool is_pass(ActionKind kind);      // F, B, I, W, R: a microbatch's pass through a stage
bool is_backward(ActionKind kind);  // B or I: the one that produces the input gradient
bool is_send(ActionKind kind);      // SEND_F, SEND_B
bool is_receive(ActionKind kind);   // RECV_F, RECV_B
std::string kind_code(ActionKind kind);  // "F", "B", "I", "W", "SEND_F", ..., "ALLREDUCE", "OPT"
std::string kind_name(ActionKind kind);  // "FORWARD", ... as in DESIGN.md
std::optional<ActionKind> kind_from_code(const std::string& code);  // "F" -> FORWARD; nothing for an unknown code
// Parses a kind name; throws Error naming `where` and `field` for an unknown one.
ActionKind kind_from_name(const std::string& name, const std::string& where, const std::string& field);

// The pass a TENSOR_ALLREDUCE at `index` of a worker's list sums for: the k-th of the passes just before
// the k TENSOR_ALLREDUCEs that precede it (one pass, or an overlapped pair); nothing when there is none.
std::optional<ActionKind> summed_pass(const std::vector<Action>& actions, std::size_t index);

// A compute action (F, B, I, W or OPT) of `stage` for `microbatch` (-1 for OPT), as generators make them.
Action compute_action(int stage, ActionKind kind, int microbatch);

std::string to_text(const Action& action);  // "2F0"
// Parses the text form; throws Error naming `where` (e.g. "schedule.csv:12") on a malformed token.
Action action_from_text(const std::string& text, const std::string& where);

// Where each stage runs: stage s has replicas on workers stage_workers[s]; microbatch b of stage s
// runs on replica b mod replicas (PipeDream's round robin).
struct PipelineShape {
  std::vector<std::vector<int>> stage_workers;
  std::vector<double> output_bytes;  // activation sent from stage s to s+1, per microbatch
  std::vector<double> param_bytes;   // all-reduced after a replicated stage's backward
  std::vector<double> optimizer_bytes;  // gradients and optimizer state per replica (memory; empty: param_bytes)
  std::vector<bool> recomputed;      // per stage: forwards keep only their input and run again (RECOMPUTE) before
                                     // their backward; empty: none
  std::vector<TensorSums> tensor_sums;  // per stage: its passes' tensor-parallel sums (TENSOR_ALLREDUCE); empty: none
  // Per stage: F, I, W and (a recomputing stage's) RECOMPUTE, for generators that order by time (zb-v,
  // interleaved-zb); empty: unit times.
  std::vector<StageTimes> pass_times;
  int workers = 0;
  int chunks = 1;                    // stages held per worker (interleaved schedules)

  int stages() const { return static_cast<int>(stage_workers.size()); }
  int replicas(int stage) const { return static_cast<int>(stage_workers[stage].size()); }
  bool recomputes(int stage) const { return stage < static_cast<int>(recomputed.size()) && recomputed[stage]; }
  const TensorSums& sums(int stage) const {
    static const TensorSums none;
    return stage < static_cast<int>(tensor_sums.size()) ? tensor_sums[stage] : none;
  }
  int tensor_parallel() const;  // the largest of the stages' ranks (1: no tensor parallelism)
  int worker_of(int stage, int microbatch) const {
    return stage_workers[stage][microbatch % replicas(stage)];
  }
};

struct Schedule {
  std::string name;         // one of schedule_names() (schedule_generators.h)
  int microbatches = 0;     // per iteration
  int iterations = 1;       // iterations laid out in the lists (every iteration unrolled)
  PipelineShape shape;
  std::vector<std::vector<Action>> workers;  // per worker id 0..shape.workers-1
};

// What a schedule CSV says about itself on its first line:
// "# pipetwin.schedule/3,name=1f1b,microbatches=8,iterations=3,chunks=1,workers=4".
struct ScheduleFile {
  std::string name;
  int microbatches = 0, iterations = 0, chunks = 1, workers = 0;
  std::vector<std::vector<Action>> actions;  // per worker
};

// CSV: the line above, a header "worker,index,action,stage,kind,microbatch,iteration,peer,bytes,message,overlap",
// then one row per action. Numbers are written exactly (%.17g), so a schedule round-trips unchanged.
// Files of pipetwin.schedule/2 (the same without the overlap column) are read too.
std::string schedule_to_csv(const Schedule& schedule);
// Parses the CSV; throws Error naming the file, line and column for a malformed line.
ScheduleFile schedule_file_from_csv(const std::string& text, const std::string& path);
// The cells of one CSV line (schedule files quote nothing); a trailing comma gives an empty last cell.
std::vector<std::string> split_csv_line(const std::string& line);

// Reads the file at `path` and parses it (Error when it cannot be read).
ScheduleFile load_schedule_file(const std::string& path);

}  // namespace pipetwin
