#include "planner/schedule_validator.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "planner/error.h"

namespace pipetwin {
namespace {

// What a worker received: activation or gradient, stage, iteration, microbatch in one word (each
// count is below 2^21: check_ranges and the CSV reader bound them).
std::uint64_t received_key(bool activation, int stage, int iteration, int microbatch) {
  return (std::uint64_t{activation} << 63) | (std::uint64_t(stage & 0x1fffff) << 42) |
         (std::uint64_t(iteration & 0x1fffff) << 21) | std::uint64_t(microbatch & 0x1fffff);
}

class Checker {
 public:
  Checker(const Schedule& schedule, const ValidationOptions& options) : schedule_(schedule), options_(options) {}

  [[noreturn]] void fail(int worker, int index, const std::string& problem, const std::string& fix) const {
    std::string field = "worker " + std::to_string(worker);
    if (index >= 0) {
      field += " action #" + std::to_string(index) + " (" + to_text(schedule_.workers[worker][index]) + ")";
    }
    throw Error({options_.source, 0, field}, problem, fix);
  }

  void check_ranges() const {
    const PipelineShape& shape = schedule_.shape;
    if (static_cast<int>(schedule_.workers.size()) != shape.workers) {
      throw Error({options_.source, 0, "workers"},
                  "the schedule has " + std::to_string(schedule_.workers.size()) + " worker lists for " +
                      std::to_string(shape.workers) + " workers",
                  "give one list per worker");
    }
    const int total = schedule_.microbatches;
    for (int w = 0; w < shape.workers; ++w) {
      const auto& actions = schedule_.workers[w];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (a.stage < 0 || a.stage >= shape.stages()) {
          fail(w, i, "stage " + std::to_string(a.stage) + " does not exist", "stages are 0.." + std::to_string(shape.stages() - 1));
        }
        const auto& holders = shape.stage_workers[a.stage];
        if (std::find(holders.begin(), holders.end(), w) == holders.end()) {
          fail(w, i, "this worker does not hold stage " + std::to_string(a.stage), "move the action to a worker of that stage");
        }
        const bool needs_microbatch = a.kind != ActionKind::ALLREDUCE && a.kind != ActionKind::OPTIMIZER_STEP;
        if ((needs_microbatch || a.microbatch >= 0) && (a.microbatch < 0 || a.microbatch >= total)) {
          fail(w, i, "microbatch " + std::to_string(a.microbatch) + " is out of range", "microbatches are 0.." + std::to_string(total - 1));
        }
        if (a.iteration < 0 || a.iteration >= schedule_.iterations) {
          fail(w, i, "iteration " + std::to_string(a.iteration) + " is out of range",
               "iterations are 0.." + std::to_string(schedule_.iterations - 1));
        }
        if (is_pass(a.kind) && shape.worker_of(a.stage, a.microbatch) != w) {
          fail(w, i, "microbatch " + std::to_string(a.microbatch) + " of stage " + std::to_string(a.stage) +
                         " belongs to worker " + std::to_string(shape.worker_of(a.stage, a.microbatch)),
               "replicas take microbatches round robin (microbatch mod replicas)");
        }
        const bool message = is_send(a.kind) || is_receive(a.kind);
        if (message && (a.peer < 0 || a.peer >= shape.workers || a.peer == w)) {
          fail(w, i, "peer " + std::to_string(a.peer) + " is not another worker", "name the worker at the other end");
        }
        if ((message || a.kind == ActionKind::ALLREDUCE) && a.message < 0) {
          fail(w, i, "has no message id", "give a send and its receive one id, unique in the schedule");
        }
        if (a.overlap && (a.kind != ActionKind::FORWARD || i + 1 >= static_cast<int>(actions.size()) ||
                          actions[i + 1].kind != ActionKind::BACKWARD)) {
          fail(w, i, "is marked overlapped but is not a forward followed directly by a full backward",
               "put the overlapped forward right before its backward (receives before the pair, sends after it), or "
               "set overlap to 0");
        }
        if (a.kind == ActionKind::TENSOR_ALLREDUCE) {
          if (!summed_pass(actions, i)) {
            fail(w, i, "does not follow a pass of its stage and microbatch",
                 "put it directly after the F, B, I or R whose sums it runs (after an overlapped pair, one per pass in order)");
          }
          if (shape.sums(a.stage).ranks < 2) {
            fail(w, i, "sums over the tensor-parallel group of stage " + std::to_string(a.stage) + ", which has none",
                 "remove it, or plan with a tensor-parallel profile (pipetwin model --tp)");
          }
        }
      }
    }
  }

  void check_compute() const {
    // (stage, microbatch) -> where its F, B, I, W, R are (worker, index), -1 when absent.
    struct Seen {
      int count[5] = {0, 0, 0, 0, 0};
      int where[5] = {-1, -1, -1, -1, -1};
      int worker = -1;
    };
    // By (stage, iteration, microbatch), dense: check_ranges has proved every index in range.
    const std::size_t per_stage = static_cast<std::size_t>(schedule_.iterations) * schedule_.microbatches;
    std::vector<Seen> seen(per_stage * static_cast<std::size_t>(schedule_.shape.stages()));
    auto slot_of = [&](int stage, int iteration, int microbatch) {
      return static_cast<std::size_t>(stage) * per_stage + static_cast<std::size_t>(iteration) * schedule_.microbatches +
             static_cast<std::size_t>(microbatch);
    };
    auto slot = [](ActionKind kind) {
      switch (kind) {
        case ActionKind::FORWARD: return 0;
        case ActionKind::BACKWARD: return 1;
        case ActionKind::BACKWARD_INPUT: return 2;
        case ActionKind::RECOMPUTE: return 4;
        default: return 3;
      }
    };
    for (int w = 0; w < schedule_.shape.workers; ++w) {
      const auto& actions = schedule_.workers[w];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (!is_pass(a.kind)) continue;
        Seen& entry = seen[slot_of(a.stage, a.iteration, a.microbatch)];
        const int k = slot(a.kind);
        if (++entry.count[k] > 1) fail(w, i, "runs a second time", "each microbatch runs each pass once per stage");
        entry.where[k] = i;
        entry.worker = w;
        if (k != 0 && entry.count[0] == 0) {
          fail(w, i, "comes before the forward of microbatch " + std::to_string(a.microbatch),
               "run " + std::to_string(a.stage) + "F" + std::to_string(a.microbatch) + " first");
        }
        const bool recomputes = schedule_.shape.recomputes(a.stage);
        if (k == 4 && !recomputes) {
          fail(w, i, "recomputes a stage that keeps its activations",
               "drop the R actions of stage " + std::to_string(a.stage) + ", or plan it with recomputation");
        }
        if ((k == 1 || k == 2) && recomputes && entry.count[4] == 0) {
          fail(w, i, "comes before its recomputation (stage " + std::to_string(a.stage) + " recomputes)",
               "run " + std::to_string(a.stage) + "R" + std::to_string(a.microbatch) + " first");
        }
        if (k == 3 && entry.count[2] == 0) {
          fail(w, i, "the weight gradient comes before the input gradient",
               "run " + std::to_string(a.stage) + "I" + std::to_string(a.microbatch) + " first");
        }
      }
    }
    for (int s = 0; s < schedule_.shape.stages(); ++s) {
      for (int iteration = 0; iteration < schedule_.iterations; ++iteration) {
        for (int b = 0; b < schedule_.microbatches; ++b) {
          const int owner = schedule_.shape.worker_of(s, b);
          const Seen& entry = seen[slot_of(s, iteration, b)];
          const bool full = entry.count[1] == 1 && entry.count[2] == 0 && entry.count[3] == 0;
          const bool split = entry.count[1] == 0 && entry.count[2] == 1 && entry.count[3] == 1;
          const bool recomputed = entry.count[4] == (schedule_.shape.recomputes(s) ? 1 : 0);
          if (entry.count[0] == 1 && (full || split) && recomputed) continue;  // no second forward: the loop above refused it
          const std::string name = "stage " + std::to_string(s) + " microbatch " + std::to_string(b) + " of iteration " +
                                   std::to_string(iteration);
          if (entry.count[0] == 0) {
            fail(owner, -1, name + " has no forward", "add " + std::to_string(s) + "F" + std::to_string(b) + " to worker " + std::to_string(owner));
          }
          fail(owner, -1, name + " needs one backward: B, or I and W",
               "add the missing backward to worker " + std::to_string(owner));
        }
      }
    }
  }

  void check_messages() const {
    const PipelineShape& shape = schedule_.shape;
    const int last = shape.stages() - 1;
    struct End {
      int worker = -1, index = -1;
    };
    std::unordered_map<int, End> sends, receives;  // message id -> where
    std::map<int, std::map<int, End>> collectives;  // all-reduce id -> worker -> where
    std::size_t actions = 0;
    for (const auto& list : schedule_.workers) actions += list.size();
    sends.reserve(actions / 4 + 1);
    receives.reserve(actions / 4 + 1);
    for (int w = 0; w < shape.workers; ++w) {
      const auto& actions = schedule_.workers[w];
      std::unordered_set<std::uint64_t> received;  // received_key of what this worker has received so far
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (is_send(a.kind)) {
          if (!sends.emplace(a.message, End{w, i}).second) {
            fail(w, i, "sends message " + std::to_string(a.message) + " a second time", "give every send its own id");
          }
        } else if (is_receive(a.kind)) {
          if (!receives.emplace(a.message, End{w, i}).second) {
            fail(w, i, "receives message " + std::to_string(a.message) + " a second time", "give every receive its own id");
          }
          received.insert(received_key(a.kind == ActionKind::RECV_ACT, a.stage, a.iteration, a.microbatch));
        } else if (a.kind == ActionKind::ALLREDUCE) {
          if (!collectives[a.message].emplace(w, End{w, i}).second) {
            fail(w, i, "runs all-reduce " + std::to_string(a.message) + " a second time", "give every all-reduce its own id");
          }
        } else if (a.kind == ActionKind::FORWARD) {
          if (a.stage > 0 && shape.worker_of(a.stage - 1, a.microbatch) != w &&
              !received.count(received_key(true, a.stage, a.iteration, a.microbatch))) {
            fail(w, i, "needs stage " + std::to_string(a.stage - 1) + "'s output from worker " +
                           std::to_string(shape.worker_of(a.stage - 1, a.microbatch)) + " but no RECV_F comes before it",
                 "insert " + std::to_string(a.stage) + "RECV_F" + std::to_string(a.microbatch) + " before it");
          }
        } else if (is_backward(a.kind)) {
          if (a.stage < last && shape.worker_of(a.stage + 1, a.microbatch) != w &&
              !received.count(received_key(false, a.stage, a.iteration, a.microbatch))) {
            fail(w, i, "needs stage " + std::to_string(a.stage + 1) + "'s gradient from worker " +
                           std::to_string(shape.worker_of(a.stage + 1, a.microbatch)) + " but no RECV_B comes before it",
                 "insert " + std::to_string(a.stage) + "RECV_B" + std::to_string(a.microbatch) + " before it");
          }
        }
      }
    }
    // In the order of the lists, so that the first fault reported does not depend on hashing.
    for (int w = 0; w < shape.workers; ++w) {
      for (int i = 0; i < static_cast<int>(schedule_.workers[w].size()); ++i) {
        const Action& a = schedule_.workers[w][i];
        if (!is_receive(a.kind)) continue;
        auto it = sends.find(a.message);
        if (it == sends.end()) {
          fail(w, i, "has no SEND with message id " + std::to_string(a.message),
               "add the send on worker " + std::to_string(a.peer) + ", or remove this receive");
        }
        check_pair(it->second, End{w, i});
      }
    }
    for (int w = 0; w < shape.workers; ++w) {
      for (int i = 0; i < static_cast<int>(schedule_.workers[w].size()); ++i) {
        const Action& a = schedule_.workers[w][i];
        if (is_send(a.kind) && !receives.count(a.message)) {
          fail(w, i, "message " + std::to_string(a.message) + " is never received by worker " + std::to_string(a.peer),
               "add the receive on that worker, or remove this send");
        }
      }
    }
    // Every replica of a stage meets at each of its all-reduces.
    for (const auto& [id, members] : collectives) {
      const End& first = members.begin()->second;
      const Action& a = schedule_.workers[first.worker][first.index];
      for (const auto& [w, where] : members) {
        const Action& other = schedule_.workers[w][where.index];
        if (other.stage != a.stage || other.bytes != a.bytes) {
          fail(w, where.index, "all-reduce " + std::to_string(id) + " is of stage " + std::to_string(a.stage) + " and " +
                                   std::to_string(a.bytes) + " bytes on worker " + std::to_string(first.worker),
               "give each all-reduce of a stage its own id, the same on every replica");
        }
      }
      for (int w : shape.stage_workers[a.stage]) {
        if (!members.count(w)) {
          fail(first.worker, first.index, "worker " + std::to_string(w) + ", a replica of stage " + std::to_string(a.stage) +
                                              ", never joins all-reduce " + std::to_string(id),
               "every replica of a stage all-reduces at the same updates");
        }
      }
    }
  }

  // A send and the receive that names its id must describe the same message.
  void check_pair(const auto& send, const auto& receive) const {
    const Action& s = schedule_.workers[send.worker][send.index];
    const Action& r = schedule_.workers[receive.worker][receive.index];
    const bool activation = s.kind == ActionKind::SEND_ACT;
    const ActionKind expected = activation ? ActionKind::RECV_ACT : ActionKind::RECV_GRAD;
    std::string problem;
    if (r.kind != expected) problem = "a " + kind_code(s.kind) + " is received by a " + kind_code(r.kind);
    else if (s.peer != receive.worker || r.peer != send.worker) problem = "the two ends name other workers";
    else if (r.stage != s.stage + (activation ? 1 : -1)) problem = "the stages do not follow one another";
    else if (r.iteration != s.iteration || r.microbatch != s.microbatch) problem = "iteration or microbatch differ";
    else if (r.bytes != s.bytes) problem = "the byte counts differ";
    if (!problem.empty()) {
      fail(receive.worker, receive.index,
           "does not match the send of message " + std::to_string(s.message) + " (worker " + std::to_string(send.worker) +
               " action #" + std::to_string(send.index) + " " + to_text(s) + "): " + problem,
           "give the receive the id of its own send");
    }
  }

 private:
  const Schedule& schedule_;
  const ValidationOptions& options_;
};

// A per-stage figure, 0 for a stage the list does not reach (not given).
double at_stage(const std::vector<double>& per_stage, int stage) {
  return stage < static_cast<int>(per_stage.size()) ? per_stage[stage] : 0.0;
}

}  // namespace

std::vector<WorkerMemory> schedule_memory(const Schedule& schedule, const std::vector<double>& activation_bytes,
                                          const std::vector<double>& recompute_bytes,
                                          const std::vector<double>& output_gradient_bytes) {
  const PipelineShape& shape = schedule.shape;
  std::vector<WorkerMemory> result(shape.workers);
  for (int s = 0; s < shape.stages(); ++s) {
    for (int holder : shape.stage_workers[s]) {
      if (holder < 0 || holder >= shape.workers) continue;
      result[holder].stages.push_back(s);
      if (s < static_cast<int>(shape.optimizer_bytes.size())) {
        result[holder].optimizer_bytes += shape.optimizer_bytes[s];
      } else if (s < static_cast<int>(shape.param_bytes.size())) {
        result[holder].optimizer_bytes += shape.param_bytes[s];
      }
    }
  }
  auto parameter_bytes = [&](int stage) { return at_stage(shape.param_bytes, stage); };
  auto rebuilt_bytes = [&](int stage) { return at_stage(recompute_bytes, stage); };  // a RECOMPUTE to its backward
  auto pending_gradient_bytes = [&](int stage) { return at_stage(output_gradient_bytes, stage); };  // an I to its W
  for (int w = 0; w < shape.workers; ++w) {
    // Kept up to date action by action (a schedule may hold thousands of microbatches in flight):
    std::map<int, int> version;                          // per stage: current weight version
    std::map<std::tuple<int, int, int>, int> in_flight;  // (stage, iteration, microbatch) -> version its forward used
    std::map<std::pair<int, int>, int> uses;             // (stage, version) -> its current use + in-flight forwards
    std::map<int, int> distinct;                         // per stage: versions still needed
    std::set<std::tuple<int, int, int>> held;            // microbatches whose activations are kept (F to B, or F to W)
    double activations = 0.0, parameters = 0.0;
    auto drop_activations = [&](const Action& a) {
      if (held.erase({a.stage, a.iteration, a.microbatch}) == 0) return;
      activations -= at_stage(activation_bytes, a.stage);
      if (shape.recomputes(a.stage)) activations -= rebuilt_bytes(a.stage);
    };
    auto use = [&](int stage, int v) {
      if (uses[{stage, v}]++ == 0) ++distinct[stage], parameters += parameter_bytes(stage);
    };
    auto release = [&](int stage, int v) {
      const auto it = uses.find({stage, v});
      if (--it->second == 0) uses.erase(it), --distinct[stage], parameters -= parameter_bytes(stage);
    };
    auto current = [&](int stage) -> int& {
      const auto [it, added] = version.emplace(stage, 0);
      if (added) use(stage, 0);
      return it->second;
    };
    for (const Action& a : schedule.workers[w]) {
      if (a.kind == ActionKind::FORWARD) {
        const int v = current(a.stage);
        const auto [it, added] = in_flight.emplace(std::tuple{a.stage, a.iteration, a.microbatch}, v);
        if (!added) release(a.stage, it->second), it->second = v;
        use(a.stage, v);
        if (held.insert({a.stage, a.iteration, a.microbatch}).second) activations += at_stage(activation_bytes, a.stage);
      } else if (is_backward(a.kind)) {
        const auto it = in_flight.find({a.stage, a.iteration, a.microbatch});
        if (it != in_flight.end()) release(a.stage, it->second), in_flight.erase(it);
        // The weight backward W reads the same saved tensors, so a split backward keeps them to its W,
        // and the gradients of its layers' outputs the I leaves for it.
        if (a.kind == ActionKind::BACKWARD) drop_activations(a);
        else if (held.count({a.stage, a.iteration, a.microbatch})) activations += pending_gradient_bytes(a.stage);
      } else if (a.kind == ActionKind::BACKWARD_WEIGHT) {
        if (held.count({a.stage, a.iteration, a.microbatch})) activations -= pending_gradient_bytes(a.stage);
        drop_activations(a);
      } else if (a.kind == ActionKind::RECOMPUTE) {
        activations += rebuilt_bytes(a.stage);
      } else if (a.kind == ActionKind::OPTIMIZER_STEP) {
        int& v = current(a.stage);
        release(a.stage, v);
        use(a.stage, ++v);
      } else {
        continue;
      }
      WorkerMemory& memory = result[w];
      memory.peak_in_flight = std::max(memory.peak_in_flight, static_cast<int>(held.size()));
      for (const auto& [stage, count] : distinct) memory.weight_versions = std::max(memory.weight_versions, count);
      if (activations + parameters > memory.peak_bytes) {
        memory.peak_bytes = activations + parameters;
        memory.activation_bytes_at_peak = activations;
        memory.parameter_bytes_at_peak = parameters;
      }
    }
  }
  return result;
}

std::string memory_shortfall(const std::vector<WorkerMemory>& memory, double limit_bytes) {
  if (!(limit_bytes > 0.0)) return "";
  for (std::size_t w = 0; w < memory.size(); ++w) {
    const WorkerMemory& m = memory[w];
    if (m.total_bytes() <= limit_bytes) continue;
    std::string stages;
    for (int s : m.stages) {
      if (!stages.empty()) stages += ',';
      stages += std::to_string(s);
    }
    char runtime[64] = "";
    if (m.runtime_bytes > 0.0) std::snprintf(runtime, sizeof runtime, " and %.3f GB its process holds itself", m.runtime_bytes / 1e9);
    char text[512];
    std::snprintf(text, sizeof text,
                  "worker %zu (stage%s %s) needs %.3f GB: at its peak %.3f GB of activations and %.3f GB of weights "
                  "(up to %d microbatch%s in flight, %d weight version%s), plus %.3f GB of optimizer state%s; the limit is "
                  "%.3f GB",
                  w, m.stages.size() == 1 ? "" : "s", stages.c_str(), m.total_bytes() / 1e9,
                  m.activation_bytes_at_peak / 1e9, m.parameter_bytes_at_peak / 1e9, m.peak_in_flight,
                  m.peak_in_flight == 1 ? "" : "es", m.weight_versions, m.weight_versions == 1 ? "" : "s",
                  m.optimizer_bytes / 1e9, runtime, limit_bytes / 1e9);
    return text;
  }
  return "";
}

ValidationReport validate_schedule(const Schedule& schedule, const ValidationOptions& options) {
  Checker checker(schedule, options);
  checker.check_ranges();
  checker.check_compute();
  checker.check_messages();
  ValidationReport report;
  report.memory = schedule_memory(schedule, options.activation_bytes, options.recompute_bytes, options.output_gradient_bytes);
  for (WorkerMemory& memory : report.memory) memory.runtime_bytes = options.runtime_memory_bytes;
  const std::string shortfall = memory_shortfall(report.memory, options.memory_limit_bytes);
  if (!shortfall.empty()) {
    const bool from_cluster = !options.memory_limit_source.empty();
    throw Error({from_cluster ? options.memory_limit_source : options.source, 0,
                 from_cluster ? "device.memory_bytes" : "memory"},
                "the plan is infeasible with the " + options.source + ", not run: " + shortfall,
                "give that stage more replicas or split it (pipetwin plan --memory-limit), use a schedule with fewer "
                "microbatches in flight (gpipe -> 1f1b), or profile with smaller microbatches" +
                    std::string(from_cluster ? "; --ignore-memory simulates it anyway" : ""));
  }
  report.unit_run = evaluate_schedule(schedule, std::vector<StageTimes>(schedule.shape.stages(), StageTimes{1, 1, 1, 1, 0}));
  if (!report.unit_run.completed) {
    const int w = report.unit_run.stuck_worker;
    checker.fail(w, report.unit_run.stuck_index, "deadlock: this action can never run; it " + report.unit_run.stuck_reason,
                 "reorder the schedule so every receive's send can happen first");
  }
  return report;
}

}  // namespace pipetwin
