#include "planner/partition_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>

#include "planner/cost_model.h"
#include "planner/error.h"
#include "planner/partition_solver.h"
#include "planner/stage_figures.h"

namespace pipetwin {
namespace {

using namespace partition_solver;

std::string format_bytes(double bytes) {
  std::ostringstream out;
  out.precision(4);
  out << bytes / 1e9 << " GB";
  return out.str();
}

[[noreturn]] void throw_no_fit(const Profile& profile, const Cluster& cluster, const OptimizerOptions& options,
                               std::size_t states) {
  if (!options.memory_limit_bytes) {
    // No memory bound: only a straight pipeline (a stage on every worker) can find no partition, where the
    // chain of the graph's antichain states has fewer cuts than there are workers.
    throw Error({profile.source_path(), 0, "--straight"},
                "a straight pipeline puts a stage on each of the " + std::to_string(cluster.worker_count()) +
                    " workers; this profile (" + std::to_string(profile.layers().size()) + " layers) splits into at most " +
                    std::to_string(states) + " stages",
                "take at most " + std::to_string(states) + " workers (--workers) or drop --straight");
  }
  double largest_layer = 0.0, total = 0.0;
  std::string largest_id;
  for (const Layer& layer : profile.layers()) {
    const double bytes = layer.activation_bytes + layer.param_bytes;
    total += bytes;
    if (bytes > largest_layer) {
      largest_layer = bytes;
      largest_id = layer.id;
    }
  }
  throw Error({profile.source_path(), 0, "--memory-limit"},
              "no partition over " + std::to_string(cluster.worker_count()) + " workers fits " +
                  format_bytes(*options.memory_limit_bytes) + " per worker (layer '" + largest_id + "' alone needs " +
                  format_bytes(largest_layer) + " of parameters and activations; the whole model " +
                  format_bytes(total) + ")",
              "raise --memory-limit, add workers, or drop --straight");
}

}  // namespace

double data_parallel_time_s(double compute_s, double param_bytes, const Cluster& cluster, const std::string& cost_model) {
  const auto cost = make_cost_model(cost_model);
  double time = compute_s;
  int inner = 1;
  for (const ClusterLevel& level : cluster.levels()) {
    time = cost->stage_time_s(time, param_bytes, level.count, level.bandwidth_bytes_per_s, true, inner);
    inner = level.count;
  }
  return time;
}

namespace {

// A run of states handed down from the levels above, with the units it got at each of them.
struct Segment {
  std::size_t first_state, end_state;
  std::vector<std::pair<int, int>> unit_ranges;  // per level above (outermost first): first unit, count
};

struct SolvedLevels {
  std::vector<Table> tables;  // innermost first
  std::vector<LevelInputs> inputs;
};

// Solves the levels innermost first; each level's full-width answers are the next one's compute.
SolvedLevels solve_levels(const Cluster& cluster, const Solver& solver, std::size_t states) {
  SolvedLevels solved;
  solved.tables.reserve(cluster.levels().size());
  int inner = 1, workers_per_unit = 1;
  for (std::size_t l = 0; l < cluster.levels().size(); ++l) {
    const ClusterLevel& level = cluster.levels()[l];
    LevelInputs input{level.count, level.bandwidth_bytes_per_s, inner, workers_per_unit, l + 1 == cluster.levels().size()};
    const LevelCompute compute(solver.raw_compute(), solved.tables.empty() ? nullptr : &solved.tables.back(), states);
    solved.tables.push_back(solver.solve_level(input, compute));
    solved.inputs.push_back(input);
    inner = level.count;
    workers_per_unit *= level.count;
  }
  return solved;
}

// Walks the levels outermost first, splitting each segment handed down by the level above along the
// table's choices; records each level's stages and returns the innermost segments (the leaves).
std::vector<Segment> unwind_levels(const Cluster& cluster, const SolvedLevels& solved, const Solver& solver,
                                   const CostModel& cost, std::size_t states, std::vector<LevelPartition>& levels) {
  std::vector<Segment> segments{{0, states, {}}};
  levels.resize(solved.tables.size());
  for (std::size_t l = solved.tables.size(); l-- > 0;) {
    const Table& table = solved.tables[l];
    const LevelInputs& input = solved.inputs[l];
    LevelPartition& partition = levels[l];
    partition.level_name = cluster.levels()[l].name;
    partition.units = input.machines;
    partition.bandwidth_bytes_per_s = input.bandwidth;
    const LevelCompute compute(solver.raw_compute(), l == 0 ? nullptr : &solved.tables[l - 1], states);
    std::vector<Segment> next_segments;
    for (const Segment& segment : segments) {
      std::vector<LevelStage> stages;
      std::size_t end = segment.end_state;
      const Cell* cell = &table.at(segment.first_state, end - 1, input.machines - 1);
      while (cell->split_state >= 0) {
        const std::size_t k = static_cast<std::size_t>(cell->split_state);
        LevelStage stage{k + 1, end, cell->replicas, 0, compute(k + 1, end - 1), 0.0};
        stage.stage_time_s = cost.stage_time_s(stage.compute_s, solver.parameters()(k + 1, end - 1), stage.replicas,
                                               input.bandwidth, false, input.inner_workers);
        stages.push_back(stage);
        end = k + 1;
        cell = &table.at(segment.first_state, k, cell->rest_machines);
      }
      LevelStage first{segment.first_state, end, cell->replicas, 0, compute(segment.first_state, end - 1), 0.0};
      first.stage_time_s = cost.stage_time_s(first.compute_s, solver.parameters()(segment.first_state, end - 1),
                                             first.replicas, input.bandwidth, true, input.inner_workers);
      stages.push_back(first);
      std::reverse(stages.begin(), stages.end());
      int unit = 0;
      for (LevelStage& stage : stages) {
        stage.first_unit = unit;
        unit += stage.replicas;
        Segment child{stage.first_state, stage.end_state, segment.unit_ranges};
        child.unit_ranges.emplace_back(stage.first_unit, stage.replicas);
        next_segments.push_back(std::move(child));
      }
      partition.segments.push_back(std::move(stages));
    }
    segments = std::move(next_segments);
  }
  return segments;
}

// The pipeline's stages from the leaf segments: worker ids (sum over levels of unit index x workers
// per unit below), layers (those the states do not cover go to the first stage if inputs, else to
// the latest stage among their predecessors) and each stage's figures.
std::vector<PipelineStage> leaf_stages(const Profile& profile, const Cluster& cluster, const AntichainStates& states,
                                       const std::vector<Segment>& segments) {
  std::vector<PipelineStage> stages;
  std::vector<int> stride(cluster.levels().size(), 1);
  for (std::size_t l = 1; l < stride.size(); ++l) stride[l] = stride[l - 1] * cluster.levels()[l - 1].count;
  std::vector<int> stage_of_layer(profile.layer_count(), -1);
  for (const Segment& segment : segments) {
    PipelineStage stage;
    stage.first_state = segment.first_state;
    stage.end_state = segment.end_state;
    stage.devices = {0};
    stage.replicas = 1;
    const std::size_t levels = segment.unit_ranges.size();
    for (std::size_t r = 0; r < levels; ++r) {
      const std::size_t level = levels - 1 - r;  // unit_ranges is outermost first
      const auto [first_unit, count] = segment.unit_ranges[r];
      std::vector<int> expanded;
      for (int base : stage.devices) {
        for (int u = first_unit; u < first_unit + count; ++u) expanded.push_back(base + u * stride[level]);
      }
      stage.devices = std::move(expanded);
      stage.replicas *= count;
    }
    std::sort(stage.devices.begin(), stage.devices.end());
    const auto& end_closure = states.states[segment.end_state - 1].closure;
    const std::vector<std::size_t> empty;
    const auto& start_closure = segment.first_state == 0 ? empty : states.states[segment.first_state - 1].closure;
    std::set_difference(end_closure.begin(), end_closure.end(), start_closure.begin(), start_closure.end(),
                        std::back_inserter(stage.layers));
    for (std::size_t layer : stage.layers) stage_of_layer[layer] = static_cast<int>(stages.size());
    stage.output_activation_bytes = states.states[segment.end_state - 1].output_activation_bytes;
    stages.push_back(std::move(stage));
  }
  for (std::size_t input : states.removed_inputs) {
    stage_of_layer[input] = 0;
    stages[0].layers.push_back(input);
  }
  for (std::size_t layer = 0; layer < profile.layer_count(); ++layer) {
    if (stage_of_layer[layer] >= 0) continue;
    int stage = 0;
    for (std::size_t p : profile.predecessors(layer)) stage = std::max(stage, stage_of_layer[p]);
    stage_of_layer[layer] = stage;
    stages[stage].layers.push_back(layer);
  }
  for (PipelineStage& stage : stages) {
    std::sort(stage.layers.begin(), stage.layers.end());
    set_stage_figures(stage, stage_figures(profile, stage.layers));
  }
  return stages;
}

}  // namespace

PartitionResult optimize_partition(const Profile& profile, const Cluster& cluster, const OptimizerOptions& options) {
  const auto cost = make_cost_model(options.cost_model);
  if (options.memory_limit_bytes && !(*options.memory_limit_bytes > 0.0)) {
    throw Error({"", 0, "--memory-limit"}, "the memory limit must be a positive number of bytes", "e.g. 16e9");
  }
  for (const ClusterLevel& level : cluster.levels()) {
    if (level.count > std::numeric_limits<std::int16_t>::max()) {
      throw Error({cluster.source_path(), 0, "levels"}, "a level of " + std::to_string(level.count) +
                                                            " units is more than the optimizer handles (32767)",
                  "split the level into two levels");
    }
  }
  PartitionResult result;
  result.states = build_antichain_states(profile);
  result.workers = cluster.worker_count();
  const std::size_t n = result.states.states.size();
  const Solver solver(result.states, options, *cost);
  const SolvedLevels solved = solve_levels(cluster, solver, n);
  result.pipeline_time_s = solved.tables.back().at(0, n - 1, solved.tables.back().machines() - 1).value;
  if (is_none(result.pipeline_time_s)) throw_no_fit(profile, cluster, options, n);
  result.single_worker_time_s = result.states.states.back().compute_s;
  result.data_parallel_time_s =
      data_parallel_time_s(result.single_worker_time_s, result.states.states.back().param_bytes, cluster,
                           options.cost_model);
  const std::vector<Segment> leaves = unwind_levels(cluster, solved, solver, *cost, n, result.levels);
  result.stages = leaf_stages(profile, cluster, result.states, leaves);
  for (const PipelineStage& stage : result.stages) {
    if (!result.configuration.empty()) result.configuration += "-";
    result.configuration += std::to_string(stage.replicas);
  }
  return result;
}

}  // namespace pipetwin
