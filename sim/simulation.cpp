#include "sim/simulation.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <simgrid/s4u.hpp>
#include <xbt/log.h>

#include "planner/error.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_lowering.h"
#include "planner/schedule_validator.h"
#include "sim/platform.h"
#include "sim/subprocess.h"
#include "traces/trace_metrics.h"

namespace sg4 = simgrid::s4u;

namespace pipetwin::sim {
namespace {

// What travels in a mailbox: enough to check that messages arrive in the order they are expected.
struct Payload {
  int stage;
  int microbatch;
};

std::string pipeline_mailbox(int from, int to, bool activation, int producer_stage) {
  return "p/" + std::to_string(from) + "/" + std::to_string(to) + (activation ? "/A/" : "/G/") +
         std::to_string(producer_stage);
}
std::string ring_mailbox(int stage, const std::string& ring, int to) {
  return "r/" + std::to_string(stage) + "/" + ring + "/" + std::to_string(to);
}

// One ring of an all-reduce: an ordered list of workers and the name of the ring.
struct Ring {
  std::string tag;
  std::vector<int> members;
};

// How the replicas of each stage all-reduce: one ring, or (hierarchical) a reduce-scatter ring inside
// each outermost unit, a ring across units between workers of the same position, then an all-gather.
struct AllReducePlan {
  bool hierarchical = false;
  std::vector<Ring> local;  // per outermost unit (hierarchical) or the single ring
  std::vector<Ring> across;  // per local position (hierarchical only)
};

AllReducePlan all_reduce_plan(const std::vector<int>& replicas, const std::string& algorithm, int workers_per_unit) {
  AllReducePlan plan;
  std::vector<int> members = replicas;
  std::sort(members.begin(), members.end());
  std::map<int, std::vector<int>> by_unit;
  for (int w : members) by_unit[w / workers_per_unit].push_back(w);
  bool even = true;
  for (const auto& [unit, list] : by_unit) even = even && list.size() == by_unit.begin()->second.size();
  if (algorithm != "hierarchical" || by_unit.size() < 2 || by_unit.begin()->second.size() < 2 || !even) {
    plan.local.push_back({"ring", members});
    return plan;
  }
  plan.hierarchical = true;
  const std::size_t local_size = by_unit.begin()->second.size();
  for (const auto& [unit, list] : by_unit) plan.local.push_back({"local" + std::to_string(unit), list});
  for (std::size_t position = 0; position < local_size; ++position) {
    Ring ring{"across" + std::to_string(position), {}};
    for (const auto& [unit, list] : by_unit) ring.members.push_back(list[position]);
    plan.across.push_back(ring);
  }
  return plan;
}

struct WorkerRun {
  int worker = 0;
  std::vector<TraceEvent> events;
  std::vector<std::pair<std::size_t, sg4::CommPtr>> sends;  // event index, transfer
  long long executed = 0;
};

class Simulator {
 public:
  Simulator(const SimulationConfig& config, const Schedule& schedule, std::vector<StageTimes> stage_times)
      : config_(config), schedule_(schedule), times_(std::move(stage_times)) {
    const int workers = schedule.shape.workers;
    int workers_per_unit = config.cluster.worker_count();
    if (!config.cluster.levels().empty()) workers_per_unit /= config.cluster.levels().back().count;
    for (int s = 0; s < schedule.shape.stages(); ++s) {
      all_reduce_.push_back(all_reduce_plan(schedule.shape.stage_workers[s], config.all_reduce, std::max(1, workers_per_unit)));
    }
    runs_.resize(workers);
    for (int w = 0; w < workers; ++w) runs_[w].worker = w;
    repetitions_ = schedule_has_flush(schedule.name) ? config.iterations : 1;
  }

  SimulationResult run() {
    int argc = 2;
    char name[] = "pipetwin";
    char log[] = "--log=root.thresh:critical";
    char* argv[] = {name, log, nullptr};
    sg4::Engine engine(&argc, argv);
    configure_engine_for_exact_links();
    hosts_ = config_.platform_xml_path.empty() ? build_platform(config_.cluster)
                                               : load_platform_xml(config_.platform_xml_path, schedule_.shape.workers);
    if (static_cast<int>(hosts_.size()) < schedule_.shape.workers) {
      throw Error({config_.cluster.source_path(), 0, "levels"},
                  "the cluster has " + std::to_string(hosts_.size()) + " workers, the schedule needs " +
                      std::to_string(schedule_.shape.workers),
                  "plan for this cluster, or use a larger one");
    }
    std::vector<sg4::ActorPtr> actors;
    for (int w = 0; w < schedule_.shape.workers; ++w) {
      actors.push_back(sg4::Actor::create("worker" + std::to_string(w), hosts_[w], [this, w] { worker(w); }));
    }
    // Permanent receivers make every send eager: a transfer starts when it is sent, as in the IR.
    for (int w = 0; w < schedule_.shape.workers; ++w) {
      for (const Action& a : schedule_.workers[w]) {
        if (a.kind == ActionKind::RECV_ACT || a.kind == ActionKind::RECV_GRAD) {
          const bool activation = a.kind == ActionKind::RECV_ACT;
          sg4::Mailbox::by_name(pipeline_mailbox(a.peer, w, activation, activation ? a.stage - 1 : a.stage + 1))
              ->set_receiver(actors[w]);
        }
      }
    }
    for (int s = 0; s < schedule_.shape.stages(); ++s) {
      for (const auto* rings : {&all_reduce_[s].local, &all_reduce_[s].across}) {
        for (const Ring& ring : *rings) {
          for (int member : ring.members) sg4::Mailbox::by_name(ring_mailbox(s, ring.tag, member))->set_receiver(actors[member]);
        }
      }
    }
    engine.run();
    if (!error_.empty()) throw Error({"", 0, "simulation"}, error_, "report this: the validated schedule misbehaved");

    SimulationResult result;
    Trace& trace = result.trace;
    trace.header.source = "simulated";
    trace.header.profile = config_.profile_name.empty() ? config_.plan.profile_name : config_.profile_name;
    trace.header.cluster = config_.platform_xml_path.empty() ? config_.cluster.name() : config_.platform_xml_path;
    trace.header.schedule = schedule_.name;
    trace.header.workers = schedule_.shape.workers;
    trace.header.stages = schedule_.shape.stages();
    trace.header.microbatches = schedule_.microbatches;
    trace.header.microbatch_size = config_.plan.microbatch_size;
    trace.header.iterations = config_.iterations;
    trace.header.warmup_iterations = config_.warmup_iterations;
    trace.header.extra = {{"all_reduce", config_.all_reduce}, {"chunks", schedule_.shape.chunks}};
    for (WorkerRun& run : runs_) {
      result.summary.actions += run.executed;
      for (TraceEvent& event : run.events) trace.events.push_back(event);
    }
    sort_events(trace);
    summarise(result);
    result.summary.messages = messages_;
    return result;
  }

 private:
  int iteration_of(const Action& action, int repetition) const {
    if (repetitions_ > 1 || action.microbatch < 0) return repetition;
    return action.microbatch / schedule_.microbatches;
  }

  double compute_seconds(const Action& action) const {
    const StageTimes& t = times_.at(action.stage);
    switch (action.kind) {
      case ActionKind::FORWARD: return t.forward_s;
      case ActionKind::BACKWARD: return t.backward_s;
      case ActionKind::BACKWARD_INPUT: return t.backward_input_s;
      case ActionKind::BACKWARD_WEIGHT: return t.backward_weight_s;
      default: return t.optimizer_s;
    }
  }

  void account_route(int from, int to, double bytes) {
    auto& links = routes_[{from, to}];
    if (links.empty()) {
      double latency = 0.0;
      hosts_[from]->route_to(hosts_[to], links, &latency);
    }
    for (sg4::Link* link : links) link_bytes_[link] += bytes;
  }

  sg4::CommPtr send(int from, int to, const std::string& mailbox, double bytes, int stage, int microbatch) {
    account_route(from, to, bytes);
    ++messages_;
    return sg4::Mailbox::by_name(mailbox)->put_async(new Payload{stage, microbatch}, static_cast<uint64_t>(bytes));
  }

  void receive(const std::string& mailbox, int stage, int microbatch) {
    auto* payload = sg4::Mailbox::by_name(mailbox)->get<Payload>();
    if ((payload->stage != stage || payload->microbatch != microbatch) && error_.empty()) {
      error_ = "mailbox " + mailbox + " delivered stage " + std::to_string(payload->stage) + " microbatch " +
               std::to_string(payload->microbatch) + " where stage " + std::to_string(stage) + " microbatch " +
               std::to_string(microbatch) + " was expected";
    }
    delete payload;
  }

  // 'steps' steps around a ring, each sending `chunk` bytes to the next member and receiving from the previous.
  void ring_steps(int worker, int stage, const Ring& ring, int steps, double chunk) {
    const auto& m = ring.members;
    const int n = static_cast<int>(m.size());
    if (n < 2) return;
    const int position = static_cast<int>(std::find(m.begin(), m.end(), worker) - m.begin());
    const int next = m[(position + 1) % n];
    std::vector<sg4::CommPtr> sent;
    for (int step = 0; step < steps; ++step) {
      sent.push_back(send(worker, next, ring_mailbox(stage, ring.tag, next), chunk, stage, step));
      receive(ring_mailbox(stage, ring.tag, worker), stage, step);
    }
    sg4::Comm::wait_all(sent);
  }

  void all_reduce(int worker, int stage, double bytes) {
    const AllReducePlan& plan = all_reduce_[stage];
    auto ring_of = [&](const std::vector<Ring>& rings) -> const Ring& {
      for (const Ring& ring : rings) {
        if (std::find(ring.members.begin(), ring.members.end(), worker) != ring.members.end()) return ring;
      }
      return rings.front();
    };
    const Ring& local = ring_of(plan.local);
    const int n = static_cast<int>(local.members.size());
    if (!plan.hierarchical) {
      ring_steps(worker, stage, local, 2 * (n - 1), bytes / n);
      return;
    }
    const Ring& across = ring_of(plan.across);
    const int k = static_cast<int>(across.members.size());
    ring_steps(worker, stage, local, n - 1, bytes / n);                 // reduce-scatter inside the unit
    ring_steps(worker, stage, across, 2 * (k - 1), bytes / n / k);      // all-reduce of my shard across units
    ring_steps(worker, stage, local, n - 1, bytes / n);                 // all-gather inside the unit
  }

  void worker(int w) {
    WorkerRun& run = runs_[w];
    const auto& actions = schedule_.workers[w];
    const double overhead_s = config_.cluster.device().action_overhead_s;
    const double send_overhead_s = config_.cluster.device().send_overhead_s;
    const double recv_overhead_s = config_.cluster.device().recv_overhead_s;
    for (int repetition = 0; repetition < repetitions_; ++repetition) {
      for (const Action& a : actions) {
        if (overhead_s > 0.0) sg4::this_actor::sleep_for(overhead_s);  // the runtime's own time between actions
        TraceEvent event{w, a.stage, kind_name(a.kind), a.microbatch, iteration_of(a, repetition),
                         sg4::Engine::get_clock(), 0.0, a.bytes, a.peer};
        switch (a.kind) {
          case ActionKind::SEND_ACT:
          case ActionKind::SEND_GRAD: {
            const bool activation = a.kind == ActionKind::SEND_ACT;
            if (send_overhead_s > 0.0) sg4::this_actor::sleep_for(send_overhead_s);  // posting the send
            run.sends.emplace_back(run.events.size(),
                                   send(w, a.peer, pipeline_mailbox(w, a.peer, activation, a.stage), a.bytes, a.stage, a.microbatch));
            break;
          }
          case ActionKind::RECV_ACT:
          case ActionKind::RECV_GRAD: {
            const bool activation = a.kind == ActionKind::RECV_ACT;
            const int producer = activation ? a.stage - 1 : a.stage + 1;
            const std::string mailbox = pipeline_mailbox(a.peer, w, activation, producer);
            const bool arrived = sg4::Mailbox::by_name(mailbox)->ready();  // delivered before we asked
            receive(mailbox, producer, a.microbatch);
            if (arrived && recv_overhead_s > 0.0) sg4::this_actor::sleep_for(recv_overhead_s);
            break;
          }
          case ActionKind::ALLREDUCE:
            all_reduce(w, a.stage, a.bytes);
            break;
          default:
            sg4::this_actor::execute(compute_seconds(a) * kReferenceFlopsPerSecond);
            break;
        }
        event.end_s = sg4::Engine::get_clock();
        run.events.push_back(event);
        ++run.executed;
      }
    }
    std::vector<sg4::CommPtr> sends;
    for (auto& [index, comm] : run.sends) sends.push_back(comm);
    sg4::Comm::wait_all(sends);
    for (auto& [index, comm] : run.sends) run.events[index].end_s = comm->get_finish_time();
  }

  void summarise(SimulationResult& result) const {
    SimulationSummary& summary = result.summary;
    const TraceMetrics metrics = trace_metrics(result.trace);
    summary.makespan_s = metrics.makespan_s;
    summary.iteration_s = metrics.mean_iteration_s;
    summary.samples_per_s = metrics.samples_per_s;
    summary.bubble_fraction = metrics.bubble_fraction;
    for (const auto& [link, bytes] : link_bytes_) {
      const double utilisation = summary.makespan_s > 0 ? bytes / (link->get_bandwidth() * summary.makespan_s) : 0.0;
      if (utilisation > summary.busiest_link.utilisation ||
          (utilisation == summary.busiest_link.utilisation && link->get_name() < summary.busiest_link.name)) {
        summary.busiest_link = {link->get_name(), bytes, link->get_bandwidth(), utilisation};
      }
    }
    for (const WorkerMemory& memory : simulation_memory(config_, schedule_)) {
      summary.peak_memory_bytes.push_back(memory.total_bytes());
    }
  }

  const SimulationConfig& config_;
  const Schedule& schedule_;
  std::vector<StageTimes> times_;
  std::vector<AllReducePlan> all_reduce_;
  std::vector<WorkerRun> runs_;
  std::vector<sg4::Host*> hosts_;
  int repetitions_ = 1;
  std::map<std::pair<int, int>, std::vector<sg4::Link*>> routes_;
  std::map<sg4::Link*, double> link_bytes_;
  std::string error_;
  long long messages_ = 0;
};

// Pipes a result from a child process to its parent as JSON.
nlohmann::json result_to_json(const SimulationResult& result) {
  const SimulationSummary& s = result.summary;
  return {{"trace", trace_to_jsonl(result.trace)},
          {"iteration_s", s.iteration_s},
          {"samples_per_s", s.samples_per_s},
          {"makespan_s", s.makespan_s},
          {"bubble_fraction", s.bubble_fraction},
          {"peak_memory_bytes", s.peak_memory_bytes},
          {"busiest_link",
           {{"name", s.busiest_link.name},
            {"bytes", s.busiest_link.bytes},
            {"bandwidth", s.busiest_link.bandwidth_bytes_per_s},
            {"utilisation", s.busiest_link.utilisation}}},
          {"actions", s.actions},
          {"messages", s.messages}};
}

SimulationResult result_from_json(const nlohmann::json& json) {
  SimulationResult result;
  result.trace = trace_from_jsonl(json.at("trace").get<std::string>(), "simulation");
  SimulationSummary& s = result.summary;
  s.iteration_s = json.at("iteration_s");
  s.samples_per_s = json.at("samples_per_s");
  s.makespan_s = json.at("makespan_s");
  s.bubble_fraction = json.at("bubble_fraction").get<std::vector<double>>();
  s.peak_memory_bytes = json.at("peak_memory_bytes").get<std::vector<double>>();
  const auto& link = json.at("busiest_link");
  s.busiest_link = {link.at("name"), link.at("bytes"), link.at("bandwidth"), link.at("utilisation")};
  s.actions = json.at("actions");
  s.messages = json.at("messages");
  return result;
}

}  // namespace

Schedule prepare_schedule(const SimulationConfig& config) {
  if (config.iterations < 1) throw Error({"", 0, "--iterations"}, "iterations must be >= 1", "e.g. --iterations 3");
  if (config.warmup_iterations < 0 || config.warmup_iterations >= config.iterations) {
    throw Error({"", 0, "--warmup"}, "warm-up iterations must be between 0 and iterations - 1",
                "e.g. --iterations 3 --warmup 1");
  }
  if (config.all_reduce != "ring" && config.all_reduce != "hierarchical") {
    throw Error({"", 0, "--all-reduce"}, "unknown all-reduce '" + config.all_reduce + "'", "use ring or hierarchical");
  }
  const PipelineShape shape = pipeline_shape(config.plan, config.chunks);
  Schedule schedule = lower_schedule(generate_schedule(config.schedule_name, shape, config.microbatches, config.iterations));
  ValidationOptions options;
  options.source = config.schedule_name + " schedule";
  options.activation_bytes = stage_activation_bytes(config.plan);
  if (!config.schedule_csv_path.empty()) {
    schedule.workers = load_schedule_actions(config.schedule_csv_path, shape.workers);
    options.source = config.schedule_csv_path;
  }
  const ValidationReport report = validate_schedule(schedule, options);  // also rejects a schedule that deadlocks
  if (!config.ignore_memory) {
    const std::string shortfall = memory_shortfall(report.memory, config.cluster.device().memory_bytes);
    if (!shortfall.empty()) {
      throw Error({config.plan.cluster_path.empty() ? config.cluster.source_path() : config.plan.cluster_path, 0,
                   "device.memory_bytes"},
                  "the plan is infeasible, not simulated: " + shortfall,
                  "give that stage more replicas or split it (pipetwin plan --memory-limit), use a schedule with fewer "
                  "microbatches in flight (gpipe -> 1f1b), profile with smaller microbatches, or pass --ignore-memory "
                  "to simulate it anyway");
    }
  }
  return schedule;
}

std::vector<WorkerMemory> simulation_memory(const SimulationConfig& config, const Schedule& schedule) {
  return schedule_memory(schedule, stage_activation_bytes(config.plan));
}

std::vector<StageTimes> simulation_stage_times(const SimulationConfig& config) {
  if (!config.stage_times.empty()) return config.stage_times;
  if (config.compute_model == "profile") return stage_times_from_plan(config.plan);
  if (config.compute_model != "flops") {
    throw Error({"", 0, "--compute-model"}, "unknown compute model '" + config.compute_model + "'", "use profile or flops");
  }
  const double peak = config.cluster.device().peak_flops;
  if (!(peak > 0.0)) {
    throw Error({config.cluster.source_path(), 0, "device.peak_flops"}, "the cluster does not give the device's peak FLOP/s",
                "add device.peak_flops, or use --compute-model profile");
  }
  std::vector<StageTimes> times;
  for (std::size_t s = 0; s < config.plan.stages.size(); ++s) {
    const PlanStage& stage = config.plan.stages[s];
    if (!(stage.forward_flops > 0.0)) {
      throw Error({"", 0, "stages[" + std::to_string(s) + "].forward_flops"},
                  "the profile has no FLOPs for every layer of stage " + std::to_string(s),
                  "profile FLOPs (the layers' \"flops\" field), or use --compute-model profile");
    }
    const double forward = stage.forward_flops / peak * config.cluster.device().speed;
    times.push_back({forward, 2 * forward, forward, forward, 0.0});
  }
  return times;
}

SimulationResult simulate(const SimulationConfig& config) { return simulate_prepared(config, prepare_schedule(config)); }

SimulationResult simulate_prepared(const SimulationConfig& config, const Schedule& schedule) {
  std::vector<StageTimes> times = simulation_stage_times(config);
  if (static_cast<int>(times.size()) != schedule.shape.stages()) {
    throw Error({"", 0, "stage_times"}, "stage times for " + std::to_string(times.size()) + " stages, the schedule has " +
                                            std::to_string(schedule.shape.stages()),
                "give one entry per stage");
  }
  Simulator simulator(config, schedule, std::move(times));
  return simulator.run();
}

SimulationResult simulate_in_subprocess(const SimulationConfig& config) {
  const Schedule schedule = prepare_schedule(config);  // schedule errors surface here, in the caller's process
  const std::string text = finish_child(
      start_child([&config, &schedule] { return result_to_json(simulate_prepared(config, schedule)).dump(); }));
  const nlohmann::json json = nlohmann::json::parse(text);
  if (json.contains("error")) throw Error({"", 0, "simulation"}, json.at("error").get<std::string>(), "");
  return result_from_json(json);
}

std::string summary_text(const SimulationConfig& config, const SimulationResult& result) {
  const SimulationSummary& s = result.summary;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line,
                "Simulated %s on %s: %d workers, %d stages, schedule %s, %d microbatches x %d iterations (%d warm-up)\n",
                result.trace.header.profile.c_str(), result.trace.header.cluster.c_str(), result.trace.header.workers,
                result.trace.header.stages, result.trace.header.schedule.c_str(), result.trace.header.microbatches,
                config.iterations, config.warmup_iterations);
  out += line;
  std::snprintf(line, sizeof line, "Time per iteration:   %.6f s\nThroughput:           %.1f samples/s\n", s.iteration_s,
                s.samples_per_s);
  out += line;
  std::snprintf(line, sizeof line, "Busiest link:         %s, %.3f GB moved, %.1f%% utilised\n", s.busiest_link.name.c_str(),
                s.busiest_link.bytes / 1e9, 100.0 * s.busiest_link.utilisation);
  out += s.busiest_link.name.empty() ? "Busiest link:         none (no communication)\n" : line;
  out += "  worker  bubble   peak memory\n";
  for (std::size_t w = 0; w < s.bubble_fraction.size(); ++w) {
    const bool over = config.cluster.device().memory_bytes > 0 && s.peak_memory_bytes[w] > config.cluster.device().memory_bytes;
    std::snprintf(line, sizeof line, "  %-6zu  %5.1f%%  %8.3f GB%s\n", w, 100.0 * s.bubble_fraction[w],
                  s.peak_memory_bytes[w] / 1e9, over ? "  (more than the device's memory)" : "");
    out += line;
  }
  return out;
}

}  // namespace pipetwin::sim
