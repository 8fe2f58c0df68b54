// torch.distributed.pipelining's schedule CSV, both ways (what its _dump_csv writes and _load_csv reads).
//
// No header; row r is rank r; each cell one action in that rank's order: "<stage><TYPE><microbatch>"
// with TYPE in F, I, B, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD (no microbatch), UNSHARD and
// RESHARD (refused: FSDP is not modelled), or "(<a>;<b>)OVERLAP_F_B" for an overlapped forward and
// backward. An empty cell is an idle step (the compute-only form). Which rank holds which stage comes
// from the file. Stricter than torch: trailing characters, the old "BW" spelling, a stage on two
// ranks are errors naming the file, row, column and cell.
// pipetwin maps REDUCE_GRAD to ALLREDUCE and adds one OPTIMIZER_STEP per held stage at the end of each
// rank (torch's step is outside its schedule); a file without sends and receives is lowered as usual.
#pragma once

#include <string>
#include <vector>

#include "planner/schedule.h"
#include "planner/schedule_evaluator.h"

namespace pipetwin {

struct TorchScheduleFile {
  std::vector<std::vector<Action>> ranks;  // per rank: the actions (no peers, bytes or ids yet)
  std::vector<int> stage_rank;             // per stage: the rank that holds it
  int microbatches = 0;                    // highest microbatch + 1
  bool with_communication = false;         // any SEND/RECV in the file
};

// One action in torch's text form ("0F3", "1SEND_B2", "(0F1;3B0)OVERLAP_F_B": two actions, the forward
// marked overlap), as strictly as a cell; errors name `path`, `line` and `field`.
std::vector<Action> torch_actions_from_text(const std::string& text, const std::string& path, int line, const std::string& field);

// True when `text` is not a pipetwin.schedule CSV (whose first line starts with "# pipetwin.schedule").
bool looks_like_torch_schedule(const std::string& text);

TorchScheduleFile torch_schedule_from_csv(const std::string& text, const std::string& path);

// The schedule's first iteration in torch's form. Compute-only: F, I, B, W and overlapped pairs, each
// in the time slot of `unit_run` (the validator's unit-time run), empty cells where the rank idles.
// With communication: every action but OPTIMIZER_STEP, in order, ALLREDUCE written REDUCE_GRAD.
// Throws Error for what torch's form cannot say (replicated stages, schedules without a flush).
std::string schedule_to_torch_csv(const Schedule& schedule, bool with_communication, const Evaluation& unit_run);

// Builds the pipetwin schedule a torch file describes, on `shape` (the plan's bytes) with the file's
// stage placement; lowered (compute-only files) or numbered (files with communication), one iteration.
Schedule schedule_from_torch(const TorchScheduleFile& file, PipelineShape shape, const std::string& path);

}  // namespace pipetwin
