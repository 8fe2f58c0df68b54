#include "planner/schedule_validator.h"

#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "planner/error.h"

namespace pipetwin {
namespace {

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
    const int total = schedule_.microbatches * schedule_.iterations;
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
        if (is_compute(a.kind) && shape.worker_of(a.stage, a.microbatch) != w) {
          fail(w, i, "microbatch " + std::to_string(a.microbatch) + " of stage " + std::to_string(a.stage) +
                         " belongs to worker " + std::to_string(shape.worker_of(a.stage, a.microbatch)),
               "replicas take microbatches round robin (microbatch mod replicas)");
        }
        const bool message = a.kind == ActionKind::SEND_ACT || a.kind == ActionKind::RECV_ACT ||
                             a.kind == ActionKind::SEND_GRAD || a.kind == ActionKind::RECV_GRAD;
        if (message && (a.peer < 0 || a.peer >= shape.workers || a.peer == w)) {
          fail(w, i, "peer " + std::to_string(a.peer) + " is not another worker", "name the worker at the other end");
        }
      }
    }
  }

  void check_compute() const {
    // (stage, microbatch) -> where its F, B, I, W are (worker, index), -1 when absent.
    struct Seen {
      int count[4] = {0, 0, 0, 0};
      int where[4] = {-1, -1, -1, -1};
      int worker = -1;
    };
    std::map<std::pair<int, int>, Seen> seen;
    auto slot = [](ActionKind kind) {
      return kind == ActionKind::FORWARD ? 0 : kind == ActionKind::BACKWARD ? 1 : kind == ActionKind::BACKWARD_INPUT ? 2 : 3;
    };
    for (int w = 0; w < schedule_.shape.workers; ++w) {
      const auto& actions = schedule_.workers[w];
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        if (!is_compute(a.kind)) continue;
        Seen& entry = seen[{a.stage, a.microbatch}];
        const int k = slot(a.kind);
        if (++entry.count[k] > 1) fail(w, i, "runs a second time", "each microbatch runs each pass once per stage");
        entry.where[k] = i;
        entry.worker = w;
        if (k != 0 && entry.count[0] == 0) {
          fail(w, i, "comes before the forward of microbatch " + std::to_string(a.microbatch),
               "run " + std::to_string(a.stage) + "F" + std::to_string(a.microbatch) + " first");
        }
        if (k == 3 && entry.count[2] == 0) {
          fail(w, i, "the weight gradient comes before the input gradient",
               "run " + std::to_string(a.stage) + "I" + std::to_string(a.microbatch) + " first");
        }
      }
    }
    const int total = schedule_.microbatches * schedule_.iterations;
    for (int s = 0; s < schedule_.shape.stages(); ++s) {
      for (int b = 0; b < total; ++b) {
        const int owner = schedule_.shape.worker_of(s, b);
        auto it = seen.find({s, b});
        const std::string name = "stage " + std::to_string(s) + " microbatch " + std::to_string(b);
        if (it == seen.end() || it->second.count[0] == 0) {
          fail(owner, -1, name + " has no forward", "add " + std::to_string(s) + "F" + std::to_string(b) + " to worker " + std::to_string(owner));
        }
        const Seen& entry = it->second;
        const bool full = entry.count[1] == 1 && entry.count[2] == 0 && entry.count[3] == 0;
        const bool split = entry.count[1] == 0 && entry.count[2] == 1 && entry.count[3] == 1;
        if (!full && !split) {
          fail(owner, -1, name + " needs one backward: B, or I and W",
               "add the missing backward to worker " + std::to_string(owner));
        }
      }
    }
  }

  void check_messages() const {
    const PipelineShape& shape = schedule_.shape;
    const int last = shape.stages() - 1;
    using Key = std::tuple<int, int, bool, int, int>;  // sender, receiver, activation?, producing stage, microbatch
    std::map<Key, std::pair<int, int>> sends, receives;  // -> (worker, index)
    for (int w = 0; w < shape.workers; ++w) {
      const auto& actions = schedule_.workers[w];
      std::set<std::tuple<bool, int, int>> received;  // (activation?, stage, microbatch) received so far
      for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
        const Action& a = actions[i];
        switch (a.kind) {
          case ActionKind::SEND_ACT:
          case ActionKind::SEND_GRAD: {
            const bool activation = a.kind == ActionKind::SEND_ACT;
            const Key key{w, a.peer, activation, a.stage, a.microbatch};
            if (!sends.emplace(key, std::pair{w, i}).second) fail(w, i, "sends the same message twice", "send it once");
            break;
          }
          case ActionKind::RECV_ACT:
          case ActionKind::RECV_GRAD: {
            const bool activation = a.kind == ActionKind::RECV_ACT;
            const Key key{a.peer, w, activation, activation ? a.stage - 1 : a.stage + 1, a.microbatch};
            if (!receives.emplace(key, std::pair{w, i}).second) fail(w, i, "receives the same message twice", "receive it once");
            received.insert({activation, a.stage, a.microbatch});
            break;
          }
          case ActionKind::FORWARD:
            if (a.stage > 0 && shape.worker_of(a.stage - 1, a.microbatch) != w &&
                !received.count({true, a.stage, a.microbatch})) {
              fail(w, i, "needs stage " + std::to_string(a.stage - 1) + "'s output from worker " +
                             std::to_string(shape.worker_of(a.stage - 1, a.microbatch)) + " but no RECV_F comes before it",
                   "insert " + std::to_string(a.stage) + "RECV_F" + std::to_string(a.microbatch) + " before it");
            }
            break;
          case ActionKind::BACKWARD:
          case ActionKind::BACKWARD_INPUT:
            if (a.stage < last && shape.worker_of(a.stage + 1, a.microbatch) != w &&
                !received.count({false, a.stage, a.microbatch})) {
              fail(w, i, "needs stage " + std::to_string(a.stage + 1) + "'s gradient from worker " +
                             std::to_string(shape.worker_of(a.stage + 1, a.microbatch)) + " but no RECV_B comes before it",
                   "insert " + std::to_string(a.stage) + "RECV_B" + std::to_string(a.microbatch) + " before it");
            }
            break;
          default:
            break;
        }
      }
    }
    for (const auto& [key, where] : receives) {
      if (!sends.count(key)) {
        fail(where.first, where.second, "has no matching SEND on worker " + std::to_string(std::get<0>(key)),
             "add the send, or remove this receive");
      }
    }
    for (const auto& [key, where] : sends) {
      if (!receives.count(key)) {
        fail(where.first, where.second, "is never received by worker " + std::to_string(std::get<1>(key)),
             "add the receive on that worker, or remove this send");
      }
    }
    // Replicas of a stage must meet at the same number of all-reduces.
    for (int s = 0; s < shape.stages(); ++s) {
      int expected = -1;
      for (int w : shape.stage_workers[s]) {
        int count = 0;
        for (const Action& a : schedule_.workers[w]) count += a.kind == ActionKind::ALLREDUCE && a.stage == s;
        if (expected >= 0 && count != expected) {
          fail(w, -1, "runs " + std::to_string(count) + " all-reduces of stage " + std::to_string(s) + ", its replicas " +
                          std::to_string(expected),
               "every replica of a stage all-reduces at the same updates");
        }
        expected = count;
      }
    }
  }

 private:
  const Schedule& schedule_;
  const ValidationOptions& options_;
};

}  // namespace

std::vector<WorkerMemory> schedule_memory(const Schedule& schedule, const std::vector<double>& activation_bytes) {
  const PipelineShape& shape = schedule.shape;
  std::vector<WorkerMemory> result(shape.workers);
  for (int s = 0; s < shape.stages(); ++s) {
    for (int holder : shape.stage_workers[s]) {
      if (holder < 0 || holder >= shape.workers) continue;
      result[holder].stages.push_back(s);
      if (s < static_cast<int>(shape.param_bytes.size())) result[holder].optimizer_bytes += shape.param_bytes[s];
    }
  }
  for (int w = 0; w < shape.workers; ++w) {
    std::map<int, int> version;                              // per stage: current weight version
    std::map<std::pair<int, int>, int> in_flight;            // (stage, microbatch) -> version its forward used
    double activations = 0.0;
    for (const Action& a : schedule.workers[w]) {
      if (a.kind == ActionKind::FORWARD) {
        in_flight[{a.stage, a.microbatch}] = version[a.stage];
        if (a.stage < static_cast<int>(activation_bytes.size())) activations += activation_bytes[a.stage];
      } else if (is_backward(a.kind)) {
        in_flight.erase({a.stage, a.microbatch});
        if (a.stage < static_cast<int>(activation_bytes.size())) activations -= activation_bytes[a.stage];
      } else if (a.kind == ActionKind::OPTIMIZER_STEP) {
        ++version[a.stage];
      } else {
        continue;
      }
      std::set<std::pair<int, int>> versions;  // (stage, version) still needed
      for (const auto& [stage, current] : version) versions.insert({stage, current});
      for (const auto& [key, used] : in_flight) versions.insert({key.first, used});
      WorkerMemory& memory = result[w];
      memory.peak_in_flight = std::max(memory.peak_in_flight, static_cast<int>(in_flight.size()));
      int stage_versions = 0;  // the most versions any one stage of this worker keeps
      for (const auto& [stage, unused] : version) {
        int count = 0;
        for (const auto& entry : versions) count += entry.first == stage;
        stage_versions = std::max(stage_versions, count);
      }
      memory.weight_versions = std::max(memory.weight_versions, stage_versions);
      double parameters = 0.0;
      for (const auto& [stage, used] : versions) {
        if (stage < static_cast<int>(shape.param_bytes.size())) parameters += shape.param_bytes[stage];
      }
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
    for (int s : m.stages) stages += (stages.empty() ? "" : ",") + std::to_string(s);
    char text[512];
    std::snprintf(text, sizeof text,
                  "worker %zu (stage%s %s) needs %.3f GB: at its peak %.3f GB of activations and %.3f GB of weights "
                  "(up to %d microbatch%s in flight, %d weight version%s), plus %.3f GB of optimizer state; the limit is "
                  "%.3f GB",
                  w, m.stages.size() == 1 ? "" : "s", stages.c_str(), m.total_bytes() / 1e9,
                  m.activation_bytes_at_peak / 1e9, m.parameter_bytes_at_peak / 1e9, m.peak_in_flight,
                  m.peak_in_flight == 1 ? "" : "es", m.weight_versions, m.weight_versions == 1 ? "" : "s",
                  m.optimizer_bytes / 1e9,
                  limit_bytes / 1e9);
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
  report.memory = schedule_memory(schedule, options.activation_bytes);
  const std::string shortfall = memory_shortfall(report.memory, options.memory_limit_bytes);
  if (!shortfall.empty()) {
    throw Error({options.source, 0, "memory"}, "infeasible: " + shortfall,
                "use fewer microbatches in flight (gpipe -> 1f1b), more replicas or stages for that stage, or profile "
                "with smaller microbatches");
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
