#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <sstream>

#include "planner/error.h"
#include "planner/json_fields.h"

namespace pipetwin {
namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string device_ranges(const std::vector<int>& devices) {
  std::string text;
  for (std::size_t i = 0; i < devices.size();) {
    std::size_t end = i;
    while (end + 1 < devices.size() && devices[end + 1] == devices[end] + 1) ++end;
    if (!text.empty()) text += ",";
    text += std::to_string(devices[i]);
    if (end > i) {
      text += '-';
      text += std::to_string(devices[end]);
    }
    i = end + 1;
  }
  return text;
}

std::string gigabytes(double bytes) { return format("%.3f GB", bytes / 1e9); }

}  // namespace

std::vector<double> per_stage(const Plan& plan, double PlanStage::*figure) {
  std::vector<double> values;
  for (const PlanStage& stage : plan.stages) values.push_back(stage.*figure);
  return values;
}

int pipedream_warm_up(int workers, int workers_before, int replicas) { return (workers - workers_before - 1) / replicas; }

void set_stage_memory(PlanStage& stage, int workers, int workers_before) {
  stage.in_flight = pipedream_warm_up(workers, workers_before, stage.replicas) + 1;
  stage.memory_bytes = stage.in_flight * (stage.param_bytes + stage.activation_bytes) + stage.optimizer_state_bytes() +
                       stage.recompute_bytes;
}

namespace {

// Full recomputation of stage s (recompute_every_stage), if it keeps its activations; memory refigured.
void recompute_stage(Plan& plan, std::size_t s, int workers_before) {
  PlanStage& stage = plan.stages[s];
  if (!stage.recomputed) {
    stage.recomputed = true;
    stage.recompute_s = stage.forward_s;
    stage.recompute_bytes = stage.activation_bytes;
    stage.activation_bytes = s == 0 ? 0.0 : plan.stages[s - 1].output_activation_bytes;
    stage.compute_s += stage.recompute_s;
  }
  set_stage_memory(stage, plan.workers, workers_before);
}

}  // namespace

void recompute_every_stage(Plan& plan) {
  int workers_before = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    recompute_stage(plan, s, workers_before);
    workers_before += plan.stages[s].replicas;
  }
}

int recompute_stages_over_memory(Plan& plan) {
  int recomputed = 0, workers_before = 0;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const PlanStage& stage = plan.stages[s];
    if (plan.device_memory_bytes > 0.0 && stage.memory_bytes > plan.device_memory_bytes && !stage.recomputed) {
      recompute_stage(plan, s, workers_before);
      ++recomputed;
    }
    workers_before += stage.replicas;
  }
  return recomputed;
}

int default_microbatches(const PartitionResult& result) {
  long long multiple = 1;
  for (const PipelineStage& stage : result.stages) multiple = std::lcm(multiple, static_cast<long long>(stage.replicas));
  const long long wanted = std::max<long long>(8, static_cast<long long>(result.stages.size()));
  if (multiple > 1024) return static_cast<int>(wanted);
  return static_cast<int>(std::min<long long>(1024, (wanted + multiple - 1) / multiple * multiple));
}

Plan make_plan(const Profile& profile, const Cluster& cluster, const OptimizerOptions& options,
               const PartitionResult& result, const std::string& schedule, int microbatches) {
  if (microbatches < 1) {
    throw Error({"", 0, "--microbatches"}, "microbatches must be >= 1", "e.g. --microbatches 8");
  }
  Plan plan;
  plan.profile_name = profile.name();
  plan.profile_path = profile.source_path();
  plan.cluster_name = cluster.name();
  plan.cluster_path = cluster.source_path();
  plan.workers = result.workers;
  plan.device_memory_bytes = cluster.device().memory_bytes;
  plan.cost_model = options.cost_model;
  plan.straight = options.straight;
  plan.activation_transfer = options.activation_transfer;
  plan.memory_limit_bytes = options.memory_limit_bytes;
  plan.schedule = schedule;
  plan.microbatch_size = profile.batch_size();
  plan.microbatches = microbatches;
  plan.configuration = result.configuration;
  plan.slowest_stage_s = result.pipeline_time_s;
  plan.data_parallel_s = result.data_parallel_time_s;
  plan.single_worker_s = result.single_worker_time_s;
  plan.time_per_iteration_s = microbatches * result.pipeline_time_s;
  plan.samples_per_s = profile.batch_size() / result.pipeline_time_s;
  int workers_before = 0;
  for (const PipelineStage& stage : result.stages) {
    PlanStage out;
    for (std::size_t layer : stage.layers) {
      out.layer_ids.push_back(profile.layer(layer).id);
      out.layer_indices.push_back(layer);
    }
    out.replicas = stage.replicas;
    out.devices = stage.devices;
    out.compute_s = stage.compute_s;
    out.forward_s = stage.forward_s;
    out.backward_s = stage.backward_s;
    out.backward_input_s = stage.backward_input_s;
    out.backward_weight_s = stage.backward_weight_s;
    out.compute_share = stage.compute_share;
    out.forward_flops = stage.forward_flops;
    out.param_bytes = stage.param_bytes;
    out.activation_bytes = stage.activation_bytes;
    out.output_gradient_bytes = stage.output_gradient_bytes;
    out.optimizer_bytes = stage.optimizer_bytes;
    out.output_activation_bytes = stage.output_activation_bytes;
    out.recomputed = stage.recomputed;
    out.recompute_s = stage.recompute_s;
    out.recompute_bytes = stage.recompute_bytes;
    out.tensor_sums = stage.tensor_sums;
    set_stage_memory(out, plan.workers, workers_before);
    workers_before += stage.replicas;
    plan.stages.push_back(std::move(out));
  }
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const PlanStage& stage = plan.stages[s];
    stages.push_back({{"id", s},
                      {"layers", stage.layer_ids},
                      {"layer_indices", stage.layer_indices},
                      {"replicas", stage.replicas},
                      {"devices", stage.devices},
                      {"compute_s", stage.compute_s},
                      {"forward_s", stage.forward_s},
                      {"backward_s", stage.backward_s},
                      {"backward_input_s", stage.backward_input_s},
                      {"backward_weight_s", stage.backward_weight_s},
                      {"optimizer_s", stage.optimizer_s},
                      {"compute_share", stage.compute_share},
                      {"forward_flops", stage.forward_flops},
                      {"param_bytes", stage.param_bytes},
                      {"activation_bytes", stage.activation_bytes},
                      {"output_gradient_bytes", stage.output_gradient_bytes},
                      {"optimizer_bytes", stage.optimizer_state_bytes()},
                      {"output_activation_bytes", stage.output_activation_bytes},
                      {"in_flight", stage.in_flight},
                      {"memory_bytes", stage.memory_bytes}});
    if (stage.recomputed) {  // written only where the stage recomputes: older plans stay as they were
      stages.back()["recompute_s"] = stage.recompute_s;
      stages.back()["recompute_bytes"] = stage.recompute_bytes;
    }
    if (stage.tensor_sums.ranks > 1) stages.back()["tensor_sums"] = tensor_sums_to_json(stage.tensor_sums);
  }
  nlohmann::json options = {{"straight", plan.straight}, {"activation_transfer", plan.activation_transfer}};
  options["memory_limit_bytes"] = plan.memory_limit_bytes ? nlohmann::json(*plan.memory_limit_bytes) : nullptr;
  return {{"format", "pipetwin.plan/1"},
          {"profile", {{"name", plan.profile_name}, {"path", plan.profile_path}}},
          {"cluster", {{"name", plan.cluster_name}, {"path", plan.cluster_path}}},
          {"workers", plan.workers},
          {"device_memory_bytes", plan.device_memory_bytes},
          {"cost_model", plan.cost_model},
          {"options", options},
          {"schedule", plan.schedule},
          {"microbatch_size", plan.microbatch_size},
          {"microbatches", plan.microbatches},
          {"configuration", plan.configuration},
          {"stages", stages},
          {"predicted",
           {{"slowest_stage_s", plan.slowest_stage_s},
            {"time_per_iteration_s", plan.time_per_iteration_s},
            {"samples_per_s", plan.samples_per_s},
            {"data_parallel_s", plan.data_parallel_s},
            {"single_worker_s", plan.single_worker_s},
            {"speedup_over_data_parallel", plan.speedup_over_data_parallel()}}}};
}

Plan plan_from_json(const nlohmann::json& document, const std::string& path) {
  using namespace json_fields;
  expect_format(document, "pipetwin.plan/1", path);
  Plan plan;
  const nlohmann::json& profile = require(document, "profile", "", path);
  plan.profile_name = string(profile, "name", "profile", path);
  plan.profile_path = string_or(profile, "path", "", "profile", path);
  const nlohmann::json& cluster = require(document, "cluster", "", path);
  plan.cluster_name = string(cluster, "name", "cluster", path);
  plan.cluster_path = string_or(cluster, "path", "", "cluster", path);
  plan.workers = small_integer(document, "workers", "", path);
  if (plan.workers < 1) throw Error({path, 0, "workers"}, "must be >= 1", "give the number of workers the plan uses");
  plan.device_memory_bytes = number_or(document, "device_memory_bytes", 0.0, "", path);
  plan.cost_model = string_or(document, "cost_model", "pipedream", "", path);
  if (document.contains("options")) {
    const nlohmann::json& options = document.at("options");
    plan.straight = boolean_or(options, "straight", false, "options", path);
    plan.activation_transfer = boolean_or(options, "activation_transfer", true, "options", path);
    if (options.contains("memory_limit_bytes") && !options.at("memory_limit_bytes").is_null()) {
      plan.memory_limit_bytes = number(options, "memory_limit_bytes", "options", path);
    }
  }
  plan.schedule = string(document, "schedule", "", path);
  plan.microbatch_size = small_integer(document, "microbatch_size", "", path);
  plan.microbatches = small_integer(document, "microbatches", "", path);
  if (plan.microbatch_size < 1 || plan.microbatches < 1) {
    throw Error({path, 0, plan.microbatch_size < 1 ? "microbatch_size" : "microbatches"}, "must be >= 1",
                "give a positive count");
  }
  plan.configuration = string_or(document, "configuration", "", "", path);
  const nlohmann::json& stages = require(document, "stages", "", path);
  if (!stages.is_array() || stages.empty()) {
    throw Error({path, 0, "stages"}, "expected a non-empty array of stages", "list at least one stage");
  }
  std::vector<bool> device_used(static_cast<std::size_t>(std::max(plan.workers, 0)), false);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::string where = "stages[" + std::to_string(s) + "]";
    const nlohmann::json& entry = stages[s];
    PlanStage stage;
    const nlohmann::json& layers = require(entry, "layers", where, path);
    if (!layers.is_array() || layers.empty()) {
      throw Error({path, 0, where + ".layers"}, "expected a non-empty array of layer ids", "list the stage's layers");
    }
    for (const auto& id : layers) {
      if (!id.is_string()) throw Error({path, 0, where + ".layers"}, "layer ids must be strings", "quote the ids");
      stage.layer_ids.push_back(id.get<std::string>());
    }
    if (entry.contains("layer_indices")) {
      for (const auto& index : entry.at("layer_indices")) {
        if (!index.is_number_unsigned()) {
          throw Error({path, 0, where + ".layer_indices"}, "expected non-negative integers", "fix the indices");
        }
        stage.layer_indices.push_back(index.get<std::size_t>());
      }
    }
    stage.replicas = small_integer(entry, "replicas", where, path);
    const nlohmann::json& devices = require(entry, "devices", where, path);
    if (!devices.is_array()) throw Error({path, 0, where + ".devices"}, "expected an array", "list worker ids");
    for (const auto& device : devices) {
      if (!device.is_number_integer()) {
        throw Error({path, 0, where + ".devices"}, "worker ids must be integers", "fix the ids");
      }
      const int id = device.get<int>();
      if (id < 0 || id >= plan.workers) {
        throw Error({path, 0, where + ".devices"},
                    "worker " + std::to_string(id) + " is outside 0.." + std::to_string(plan.workers - 1),
                    "use worker ids below \"workers\"");
      }
      if (device_used[id]) {
        throw Error({path, 0, where + ".devices"}, "worker " + std::to_string(id) + " is given to two stages",
                    "each worker runs one stage replica");
      }
      device_used[id] = true;
      stage.devices.push_back(id);
    }
    if (stage.replicas < 1 || static_cast<std::size_t>(stage.replicas) != stage.devices.size()) {
      throw Error({path, 0, where + ".replicas"},
                  "replicas is " + std::to_string(stage.replicas) + " but " + std::to_string(stage.devices.size()) +
                      " devices are listed",
                  "list one device per replica");
    }
    stage.compute_s = number_or(entry, "compute_s", 0.0, where, path);
    stage.forward_s = number_or(entry, "forward_s", 0.0, where, path);
    stage.backward_s = number_or(entry, "backward_s", 0.0, where, path);
    stage.backward_input_s = number_or(entry, "backward_input_s", 0.0, where, path);
    stage.backward_weight_s = number_or(entry, "backward_weight_s", 0.0, where, path);
    stage.optimizer_s = number_or(entry, "optimizer_s", 0.0, where, path);
    stage.compute_share = number_or(entry, "compute_share", 1.0, where, path);
    if (!(stage.compute_share > 0.0)) {
      throw Error({path, 0, where + ".compute_share"}, "not positive", "a positive weight (1 is the default) or leave it out");
    }
    stage.forward_flops = number_or(entry, "forward_flops", 0.0, where, path);
    for (auto [value, field] : {std::pair{stage.compute_s, "compute_s"}, std::pair{stage.forward_s, "forward_s"},
                                std::pair{stage.backward_s, "backward_s"}, std::pair{stage.optimizer_s, "optimizer_s"},
                                std::pair{stage.backward_input_s, "backward_input_s"},
                                std::pair{stage.backward_weight_s, "backward_weight_s"}}) {
      if (value < 0.0) throw Error({path, 0, where + "." + field}, "negative time", "times are >= 0 seconds");
    }
    stage.param_bytes = number_or(entry, "param_bytes", 0.0, where, path);
    stage.activation_bytes = number_or(entry, "activation_bytes", 0.0, where, path);
    stage.output_gradient_bytes = number_or(entry, "output_gradient_bytes", 0.0, where, path);
    stage.optimizer_bytes = number_or(entry, "optimizer_bytes", stage.param_bytes, where, path);
    stage.output_activation_bytes = number_or(entry, "output_activation_bytes", 0.0, where, path);
    stage.in_flight = small_integer_or(entry, "in_flight", 1, where, path);
    stage.memory_bytes = number_or(entry, "memory_bytes", 0.0, where, path);
    stage.recomputed = entry.contains("recompute_s");
    stage.recompute_s = number_or(entry, "recompute_s", 0.0, where, path);
    stage.recompute_bytes = number_or(entry, "recompute_bytes", 0.0, where, path);
    if (stage.recompute_s < 0.0 || stage.recompute_bytes < 0.0) {
      throw Error({path, 0, where + ".recompute_s"}, "negative recomputation time or bytes", "times and bytes are >= 0");
    }
    stage.tensor_sums = tensor_sums_from_json(entry, "tensor_sums", where, path);
    plan.stages.push_back(std::move(stage));
  }
  if (document.contains("predicted")) {
    const nlohmann::json& predicted = document.at("predicted");
    plan.slowest_stage_s = number_or(predicted, "slowest_stage_s", 0.0, "predicted", path);
    plan.time_per_iteration_s = number_or(predicted, "time_per_iteration_s", 0.0, "predicted", path);
    plan.samples_per_s = number_or(predicted, "samples_per_s", 0.0, "predicted", path);
    plan.data_parallel_s = number_or(predicted, "data_parallel_s", 0.0, "predicted", path);
    plan.single_worker_s = number_or(predicted, "single_worker_s", 0.0, "predicted", path);
  }
  return plan;
}

void write_plan(const Plan& plan, const std::string& path) {
  json_fields::write_text_atomically(path, plan_to_json(plan).dump(2) + "\n");
}

Plan load_plan(const std::string& path) { return plan_from_json(json_fields::read_file(path), path); }

std::string plan_summary(const Plan& plan, const Profile& profile, const PartitionResult& result) {
  std::ostringstream out;
  out << "Plan for " << plan.profile_name << " (" << profile.layer_count() << " layers, "
      << result.states.states.size() << " antichain states) on " << plan.cluster_name << ", " << plan.workers
      << " workers, cost model '" << plan.cost_model << "'" << (plan.straight ? ", straight" : "")
      << (plan.activation_transfer ? "" : ", no activation transfer");
  if (plan.memory_limit_bytes) out << ", memory limit " << gigabytes(*plan.memory_limit_bytes);
  out << "\n\n";
  for (std::size_t l = result.levels.size(); l-- > 0;) {
    const LevelPartition& level = result.levels[l];
    out << "Level " << l + 1 << " '" << level.level_name << "': " << level.units << " units at "
        << format("%.4g", level.bandwidth_bytes_per_s / 1e9) << " GB/s\n";
    for (const auto& segment : level.segments) {
      out << "  states [" << segment.front().first_state << ", " << segment.back().end_state << "):";
      for (const LevelStage& stage : segment) {
        out << "  [" << stage.first_state << ", " << stage.end_state << ") x" << stage.replicas << " "
            << format("%.6f", stage.stage_time_s) << " s";
      }
      out << "\n";
    }
  }
  out << "\nPipeline: " << plan.stages.size() << " stage(s), configuration " << plan.configuration << "\n";
  out << "  stage  layers  first..last            replicas  devices      compute/replica  params      "
         "memory/worker\n";
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const PlanStage& stage = plan.stages[s];
    char line[256];
    const std::string span = stage.layer_ids.front() + ".." + stage.layer_ids.back();
    std::snprintf(line, sizeof line, "  %-5zu  %-6zu  %-22s %-9d %-12s %-16s %-11s %s\n", s, stage.layer_ids.size(),
                  span.c_str(), stage.replicas, device_ranges(stage.devices).c_str(),
                  format("%.6f s", stage.compute_s / stage.replicas).c_str(), gigabytes(stage.param_bytes).c_str(),
                  gigabytes(stage.memory_bytes).c_str());
    out << line;
  }
  int recomputing = 0;
  for (const PlanStage& stage : plan.stages) recomputing += stage.recomputed;
  if (recomputing > 0) {
    out << "  recomputation: " << recomputing << " of " << plan.stages.size()
        << " stages run their forward again before each backward (in compute and memory above; the\n"
        << "  optimizer's figures below are without it: pipetwin simulate gives the time with it)\n";
  }
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.device_memory_bytes > 0.0 && plan.stages[s].memory_bytes > plan.device_memory_bytes) {
      out << "  warning: stage " << s << " needs " << gigabytes(plan.stages[s].memory_bytes) << " per worker ("
          << plan.stages[s].in_flight << " minibatches in flight x (parameters + activations) + optimizer state), "
          << "more than the device's " << gigabytes(plan.device_memory_bytes)
          << ". PipeDream's memory check (--memory-limit) counts only stashed copies per level and does not see "
             "this; "
          << (plan.stages[s].recomputed ? "" : "recompute it (--recompute auto), ")
          << "profile at a smaller minibatch or use more workers.\n";
    }
  }
  out << "\nSlowest stage (time per minibatch):      " << format("%.10g", plan.slowest_stage_s) << " s\n";
  out << "Data parallel on " << plan.workers << " workers:" << std::string(plan.workers < 10 ? 14 : 13, ' ')
      << format("%.10g", plan.data_parallel_s) << " s\n";
  out << "Single worker:                           " << format("%.10g", plan.single_worker_s) << " s\n";
  out << "Speedup over data parallelism:           " << format("%.10g", plan.speedup_over_data_parallel()) << "x\n";
  out << "Speedup over one worker:                 " << format("%.10g", plan.single_worker_s / plan.slowest_stage_s)
      << "x\n";
  out << "Throughput:                              " << format("%.1f", plan.samples_per_s) << " samples/s ("
      << plan.microbatch_size << " per minibatch)\n";
  return out.str();
}

}  // namespace pipetwin
