// Schedule IR — for every worker, the ordered list of actions it runs (DESIGN.md "Schedule IR").
//
// A schedule is data: generators (schedule_generators.h) return compute-only lists, lowering
// (schedule_lowering.h) adds sends, receives and all-reduces, the validator proves it sound, and
// sim/ and exec/ interpret it unchanged. Sends are asynchronous (a SEND never waits for its RECV);
// a RECV waits for its SEND; an ALLREDUCE waits for every member of its group.
//
// Text form, as in torch.distributed.pipelining: "<stage><KIND><microbatch>", e.g. "2F0" (stage 2
// forward of microbatch 0), "1SEND_F3" (stage 1 sends its output of microbatch 3), "0RECV_B5",
// "1I4"/"1W4" (backward for the input / for the weights), "1ALLREDUCE7", "1OPT7".
#pragma once

#include <string>
#include <vector>

namespace pipetwin {

enum class ActionKind {
  FORWARD,
  BACKWARD,         // full backward
  BACKWARD_INPUT,   // gradient w.r.t. the stage's input only (zero-bubble schedules)
  BACKWARD_WEIGHT,  // gradient w.r.t. the stage's weights only
  SEND_ACT,
  RECV_ACT,
  SEND_GRAD,
  RECV_GRAD,
  ALLREDUCE,        // gradients of a replicated stage, over its replicas
  OPTIMIZER_STEP,
};

struct Action {
  int stage = 0;
  ActionKind kind = ActionKind::FORWARD;
  int microbatch = -1;  // -1 where none applies
  int peer = -1;        // worker at the other end of a send/receive; -1 otherwise
  double bytes = 0.0;   // payload of a send/receive/all-reduce

  bool operator==(const Action& other) const = default;
};

bool is_compute(ActionKind kind);   // F, B, I, W
bool is_backward(ActionKind kind);  // B or I: the one that produces the input gradient
std::string kind_code(ActionKind kind);  // "F", "B", "I", "W", "SEND_F", ..., "ALLREDUCE", "OPT"
std::string kind_name(ActionKind kind);  // "FORWARD", ... as in DESIGN.md

std::string to_text(const Action& action);  // "2F0"
// Parses the text form; throws Error naming `where` (e.g. "schedule.csv:12") on a malformed token.
Action action_from_text(const std::string& text, const std::string& where);

// Where each stage runs: stage s has replicas on workers stage_workers[s]; microbatch b of stage s
// runs on replica b mod replicas (PipeDream's round robin).
struct PipelineShape {
  std::vector<std::vector<int>> stage_workers;
  std::vector<double> output_bytes;  // activation sent from stage s to s+1, per microbatch
  std::vector<double> param_bytes;   // all-reduced after a replicated stage's backward
  int workers = 0;
  int chunks = 1;                    // stages held per worker (interleaved schedules)

  int stages() const { return static_cast<int>(stage_workers.size()); }
  int replicas(int stage) const { return static_cast<int>(stage_workers[stage].size()); }
  int worker_of(int stage, int microbatch) const {
    return stage_workers[stage][microbatch % replicas(stage)];
  }
};

struct Schedule {
  std::string name;         // gpipe, 1f1b, pipedream, 2bw, interleaved, zb-h1
  int microbatches = 0;     // per iteration
  int iterations = 1;       // iterations in the lists (several for schedules without a flush)
  PipelineShape shape;
  std::vector<std::vector<Action>> workers;  // per worker id 0..shape.workers-1
};

// CSV: a header "worker,index,action,stage,kind,microbatch,peer,bytes" then one row per action.
std::string schedule_to_csv(const Schedule& schedule);
// Reads the actions back into `schedule.workers` (shape, name, counts come from the caller).
// Throws Error naming the file, line and column for a malformed row.
std::vector<std::vector<Action>> actions_from_csv(const std::string& text, const std::string& path, int workers);
// Reads the file at `path` and parses it with actions_from_csv (Error when it cannot be read).
std::vector<std::vector<Action>> load_schedule_actions(const std::string& path, int workers);

}  // namespace pipetwin
