#include "planner/schedule_generators.h"

#include <algorithm>

#include "planner/error.h"
#include "planner/zero_bubble_schedules.h"

namespace pipetwin {
namespace {

// The only stage a worker holds (every schedule but interleaved), and its replica index.
struct WorkerStage {
  int stage = -1;
  int replica = 0;
};

std::vector<WorkerStage> stage_of_workers(const PipelineShape& shape) {
  std::vector<WorkerStage> result(shape.workers);
  for (int s = 0; s < shape.stages(); ++s) {
    for (int r = 0; r < shape.replicas(s); ++r) result[shape.stage_workers[s][r]] = {s, r};
  }
  return result;
}

// Microbatches 0..total-1 that replica `replica` of a stage with `replicas` replicas handles.
std::vector<int> local_microbatches(int total, int replicas, int replica) {
  std::vector<int> result;
  for (int b = replica; b < total; b += replicas) result.push_back(b);
  return result;
}

void require_unreplicated(const PipelineShape& shape, const std::string& name) {
  for (int s = 0; s < shape.stages(); ++s) {
    if (shape.replicas(s) != 1) {
      throw Error({"", 0, "--schedule"},
                  name + " needs one worker per stage; stage " + std::to_string(s) + " has " +
                      std::to_string(shape.replicas(s)) + " replicas",
                  "plan with --straight, or use gpipe, 1f1b, pipedream or 2bw");
    }
  }
}

// Which kind of update follows a backward in a 1F1B-shaped schedule.
enum class Updates { AtEnd, EveryBackward, EveryIteration };

std::vector<Action> one_forward_one_backward(int stage, const std::vector<int>& local, int warm_up, Updates updates,
                                             int microbatches) {
  std::vector<Action> actions;
  const int count = static_cast<int>(local.size());
  warm_up = std::min(warm_up, count);
  auto backward = [&](int t) {
    actions.push_back(compute_action(stage, ActionKind::BACKWARD, local[t]));
    const bool last_of_iteration = t + 1 == count || local[t + 1] / microbatches != local[t] / microbatches;
    if (updates == Updates::EveryBackward || (updates == Updates::EveryIteration && last_of_iteration)) {
      actions.push_back(compute_action(stage, ActionKind::OPTIMIZER_STEP, local[t]));
    }
  };
  for (int t = 0; t < warm_up; ++t) actions.push_back(compute_action(stage, ActionKind::FORWARD, local[t]));
  for (int t = 0; t + warm_up < count; ++t) {
    actions.push_back(compute_action(stage, ActionKind::FORWARD, local[t + warm_up]));
    backward(t);
  }
  for (int t = count - warm_up; t < count; ++t) backward(t);
  if (updates == Updates::AtEnd) actions.push_back(compute_action(stage, ActionKind::OPTIMIZER_STEP, -1));
  return actions;
}

Schedule per_stage_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations) {
  Schedule schedule{name, microbatches, iterations, shape, std::vector<std::vector<Action>>(shape.workers)};
  const auto holders = stage_of_workers(shape);
  for (int w = 0; w < shape.workers; ++w) {
    const auto [stage, replica] = holders[w];
    if (stage < 0) continue;  // an idle worker
    const std::vector<int> local = local_microbatches(microbatches * iterations, shape.replicas(stage), replica);
    auto& actions = schedule.workers[w];
    if (name == "gpipe") {
      for (int b : local) actions.push_back(compute_action(stage, ActionKind::FORWARD, b));
      for (int b : local) actions.push_back(compute_action(stage, ActionKind::BACKWARD, b));
      actions.push_back(compute_action(stage, ActionKind::OPTIMIZER_STEP, -1));
    } else {
      const Updates updates = name == "1f1b"        ? Updates::AtEnd
                              : name == "pipedream" ? Updates::EveryBackward
                                                    : Updates::EveryIteration;
      actions = one_forward_one_backward(stage, local, warm_up_microbatches(shape, stage), updates, microbatches);
    }
  }
  return schedule;
}

// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving): microbatches go
// through the worker's chunks in groups of p; warm-up is (p - rank - 1) * 2 + (v - 1) * p steps.
Schedule interleaved_schedule(const PipelineShape& shape, int microbatches) {
  const int p = shape.workers, v = shape.chunks;
  if (microbatches % p != 0) {
    throw Error({"", 0, "--microbatches"},
                "interleaved needs a multiple of the " + std::to_string(p) + " workers, got " +
                    std::to_string(microbatches),
                "use --microbatches " + std::to_string((microbatches / p + 1) * p));
  }
  Schedule schedule{"interleaved", microbatches, 1, shape, std::vector<std::vector<Action>>(p)};
  const int total = microbatches * v;
  auto chunk_of = [&](int step, bool forward) {
    const int chunk = (step / p) % v;
    return forward ? chunk : v - 1 - chunk;
  };
  auto microbatch_of = [&](int step) { return (step / (p * v)) * p + step % p; };
  for (int rank = 0; rank < p; ++rank) {
    auto& actions = schedule.workers[rank];
    const int warm_up = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
    auto forward = [&](int step) {
      actions.push_back(compute_action(chunk_of(step, true) * p + rank, ActionKind::FORWARD, microbatch_of(step)));
    };
    auto backward = [&](int step) {
      actions.push_back(compute_action(chunk_of(step, false) * p + rank, ActionKind::BACKWARD, microbatch_of(step)));
    };
    for (int step = 0; step < warm_up; ++step) forward(step);
    for (int step = 0; step + warm_up < total; ++step) {
      forward(step + warm_up);
      backward(step);
    }
    for (int step = total - warm_up; step < total; ++step) backward(step);
    for (int chunk = 0; chunk < v; ++chunk) actions.push_back(compute_action(chunk * p + rank, ActionKind::OPTIMIZER_STEP, -1));
  }
  return schedule;
}

// torch's ScheduleLoopedBFS: every forward of the worker's first chunk, then of the next; then the
// backwards from the last chunk down, microbatches in reverse order.
Schedule looped_bfs_schedule(const PipelineShape& shape, int microbatches) {
  const int p = shape.workers, v = shape.chunks;
  Schedule schedule{"looped-bfs", microbatches, 1, shape, std::vector<std::vector<Action>>(p)};
  for (int rank = 0; rank < p; ++rank) {
    auto& actions = schedule.workers[rank];
    for (int chunk = 0; chunk < v; ++chunk) {
      for (int b = 0; b < microbatches; ++b) actions.push_back(compute_action(chunk * p + rank, ActionKind::FORWARD, b));
    }
    for (int chunk = v - 1; chunk >= 0; --chunk) {
      for (int b = microbatches - 1; b >= 0; --b) actions.push_back(compute_action(chunk * p + rank, ActionKind::BACKWARD, b));
    }
    for (int chunk = 0; chunk < v; ++chunk) actions.push_back(compute_action(chunk * p + rank, ActionKind::OPTIMIZER_STEP, -1));
  }
  return schedule;
}

}  // namespace

namespace {

struct ScheduleSummary {
  const char* name;
  const char* summary;
};

constexpr ScheduleSummary kSchedules[] = {
    {"gpipe", "all forwards, then all backwards (fill-drain)"},
    {"1f1b", "PipeDream-Flush: one forward, one backward, a flush per iteration"},
    {"pipedream", "asynchronous 1F1B, weight stashing, an update after every backward"},
    {"2bw", "PipeDream-2BW: 1F1B without flush, two weight versions"},
    {"interleaved", "Megatron's interleaved 1F1B (--chunks v >= 2)"},
    {"looped-bfs", "torch's LoopedBFS: all forwards of a chunk before the next (--chunks v >= 2)"},
    {"zb-h1", "zero bubble H1: split backward, 1F1B's peak memory (p microbatches) on every worker"},
    {"zb-h2", "zero bubble H2: split backward, 2p - 1 microbatches on every worker"},
    {"interleaved-zb", "interleaved 1F1B with split backward, torch's ZB1P (--chunks v >= 2)"},
    {"zb-v", "ZB-V: two stages per worker in a V, split backward, 1F1B's memory"},
    {"dualpipe-v", "DeepSeek's DualPipeV: V placement, forward/backward pairs overlapped (m >= 2 workers)"},
};

}  // namespace

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const ScheduleSummary& entry : kSchedules) names.emplace_back(entry.name);
  return names;
}

std::string schedule_names_text(const std::string& separator) {
  std::string text;
  for (const ScheduleSummary& entry : kSchedules) {
    if (!text.empty()) text += separator;
    text += entry.name;
  }
  return text;
}

std::string schedule_catalogue() {
  std::string text;
  for (const ScheduleSummary& entry : kSchedules) {
    std::string name = entry.name;
    name.resize(16, ' ');
    text += "  " + name + entry.summary + "\n";
  }
  return text;
}

bool schedule_has_flush(const std::string& name) { return name != "pipedream" && name != "2bw"; }

Placement schedule_placement(const std::string& name) {
  if (name == "interleaved" || name == "looped-bfs" || name == "interleaved-zb") return Placement::Looped;
  if (name == "zb-v" || name == "dualpipe-v") return Placement::V;
  return Placement::OneStagePerWorker;
}

bool schedule_needs_unreplicated_stages(const std::string& name) {
  return schedule_placement(name) != Placement::OneStagePerWorker || name.rfind("zb-", 0) == 0;
}

int schedule_chunks(const std::string& name, int requested) {
  switch (schedule_placement(name)) {
    case Placement::V:
      if (requested != 1 && requested != 2) {
        throw Error({"", 0, "--chunks"}, name + " places two stages per worker in a V, not " + std::to_string(requested),
                    "drop --chunks (or pass --chunks 2)");
      }
      return 2;
    case Placement::Looped:
      if (requested < 2) {
        throw Error({"", 0, "--chunks"}, name + " needs at least 2 chunks per worker",
                    "pass --chunks 2 (or more), or use " + std::string(name == "interleaved-zb" ? "zb-h1" : "1f1b"));
      }
      return requested;
    case Placement::OneStagePerWorker:
      if (requested != 1) {
        throw Error({"", 0, "--chunks"}, name + " runs one stage per worker",
                    "use --chunks only with interleaved, looped-bfs or interleaved-zb");
      }
      return 1;
  }
  return requested;
}

int warm_up_microbatches(const PipelineShape& shape, int stage) {
  int before = 0;
  for (int s = 0; s < stage; ++s) before += shape.replicas(s);
  return pipedream_warm_up(shape.workers, before, shape.replicas(stage));
}

PipelineShape pipeline_shape(const Plan& plan, int chunks, Placement placement) {
  if (chunks < 1) throw Error({"", 0, "--chunks"}, "chunks must be >= 1", "e.g. --chunks 2");
  PipelineShape shape;
  const int stages = static_cast<int>(plan.stages.size());
  for (const PlanStage& stage : plan.stages) {
    shape.output_bytes.push_back(stage.output_activation_bytes);
    shape.param_bytes.push_back(stage.param_bytes);
    shape.optimizer_bytes.push_back(stage.optimizer_state_bytes());
    shape.recomputed.push_back(stage.recomputed);
    shape.tensor_sums.push_back(stage.tensor_sums);
    shape.pass_times.push_back({.forward_s = stage.forward_s,
                                .backward_input_s = stage.backward_input_s,
                                .backward_weight_s = stage.backward_weight_s,
                                .recompute_s = stage.recomputed ? stage.recompute_s : 0.0});
  }
  // A plan whose backward is not split (or a hand-written one without times) orders by unit times.
  const bool timed = std::all_of(shape.pass_times.begin(), shape.pass_times.end(), [](const StageTimes& t) {
    return t.forward_s > 0.0 && t.backward_input_s > 0.0 && t.backward_weight_s > 0.0;
  });
  if (!timed) shape.pass_times.clear();
  shape.chunks = chunks;
  if (chunks == 1) {
    for (const PlanStage& stage : plan.stages) shape.stage_workers.push_back(stage.devices);
    shape.workers = plan.workers;
    return shape;
  }
  if (stages % chunks != 0) {
    throw Error({"", 0, "--chunks"},
                "the plan has " + std::to_string(stages) + " stages, not a multiple of " + std::to_string(chunks) +
                    " chunks",
                "plan with --straight on (workers x chunks) workers, or change --chunks");
  }
  const int p = stages / chunks;
  for (int s = 0; s < stages; ++s) {
    if (plan.stages[s].replicas != 1) {
      throw Error({"", 0, "--chunks"}, "several stages per worker need unreplicated stages; stage " + std::to_string(s) + " has " +
                                           std::to_string(plan.stages[s].replicas) + " replicas",
                  "plan with --straight");
    }
    shape.stage_workers.push_back({placement == Placement::V && s >= p ? (2 * p - 1 - s) % p : s % p});
  }
  shape.workers = p;
  return shape;
}

Schedule generate_schedule(const std::string& name, const PipelineShape& shape, int microbatches, int iterations) {
  const auto names = schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw Error({"", 0, "--schedule"}, "unknown schedule '" + name + "'", "use one of " + schedule_names_text());
  }
  if (microbatches < 1) throw Error({"", 0, "--microbatches"}, "microbatches must be >= 1", "e.g. --microbatches 8");
  if (iterations < 1) throw Error({"", 0, "--iterations"}, "iterations must be >= 1", "e.g. --iterations 4");
  if (shape.stages() < 1) throw Error({"", 0, "plan"}, "the pipeline has no stages", "plan the model first");
  if (schedule_chunks(name, shape.chunks) != shape.chunks) {
    throw Error({"", 0, "--chunks"}, name + " runs with 2 chunks per worker", "drop --chunks");
  }
  if (schedule_needs_unreplicated_stages(name)) require_unreplicated(shape, name);
  if (name == "interleaved") return interleaved_schedule(shape, microbatches);
  if (name == "looped-bfs") return looped_bfs_schedule(shape, microbatches);
  if (name == "dualpipe-v") {
    if (microbatches < 2 * shape.workers) {
      throw Error({"", 0, "--microbatches"},
                  "dualpipe-v needs at least twice the " + std::to_string(shape.workers) + " workers in microbatches, got " +
                      std::to_string(microbatches),
                  "use --microbatches " + std::to_string(2 * shape.workers) + " or more");
    }
    return dualpipe_v_schedule(shape, microbatches);
  }
  if (name.find("zb") != std::string::npos) return zero_bubble_schedule(name, shape, microbatches);
  if (!schedule_has_flush(name)) {
    for (int s = 0; s < shape.stages(); ++s) {
      if (microbatches % shape.replicas(s) != 0) {
        throw Error({"", 0, "--microbatches"},
                    name + " all-reduces a replicated stage at every update, so each replica needs as many "
                           "microbatches per iteration; stage " + std::to_string(s) + " has " +
                        std::to_string(shape.replicas(s)) + " replicas and " + std::to_string(microbatches) +
                        " does not divide",
                    "use a multiple of " + std::to_string(shape.replicas(s)) + " microbatches");
      }
    }
  }
  return per_stage_schedule(name, shape, microbatches, schedule_has_flush(name) ? 1 : iterations);
}

}  // namespace pipetwin
