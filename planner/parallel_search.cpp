#include "planner/parallel_search.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_generators.h"

namespace pipetwin {

namespace {

// The innermost level whose units hold both workers (-1 for the same worker).
int common_level(const Cluster& cluster, int a, int b) {
  if (a == b) return -1;
  long long size = 1;
  for (std::size_t l = 0; l < cluster.levels().size(); ++l) {
    size *= cluster.levels()[l].count;
    if (a / size == b / size) return static_cast<int>(l);
  }
  return static_cast<int>(cluster.levels().size()) - 1;
}

std::vector<int> divisors_up_to(int value, int limit) {
  std::vector<int> out;
  for (int d = 1; d <= std::min(value, limit); ++d) {
    if (value % d == 0) out.push_back(d);
  }
  return out;
}

// Stages per worker the search gives a schedule: 2 for those that hold several (looped, V).
int chunks_of(const std::string& schedule) {
  return schedule_placement(schedule) == Placement::OneStagePerWorker ? 1 : 2;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}

TransformerSpec configured(const ParallelSearchRequest& request, int tensor_parallel, int microbatch_size) {
  TransformerSpec spec = request.model;
  spec.tensor_parallel = tensor_parallel;
  spec.sequence_parallel = request.sequence_parallel && tensor_parallel > 1;
  spec.microbatch_size = microbatch_size;
  return spec;
}

TensorParallelLink innermost_link(const Cluster& cluster) {
  return {cluster.levels().front().bandwidth_bytes_per_s, cluster.levels().front().latency_s};
}

// One GPU's profile of a configuration: the transformer's share of its tensor-parallel group, or the
// measured profile at the microbatch size.
Profile searched_profile(const ParallelSearchRequest& request, int tensor_parallel, int microbatch_size,
                         Recomputation mode, const Cluster& cluster) {
  if (request.measured) return profile_at_microbatch(*request.measured, microbatch_size);
  return transformer_profile(configured(request, tensor_parallel, microbatch_size), mode, gemm_rate(cluster.device()),
                             innermost_link(cluster));
}

// One pipeline of `stages` x `chunks` balanced stages, one worker each, on a single level with the
// link the real pipeline's boundaries cross.
Plan pipeline_plan(const Profile& profile, const Cluster& groups, int stages, int chunks, int data_parallel,
                   const std::string& schedule, int microbatches, ClusterLevel* crossing) {
  int level = -1;
  for (int s = 0; s + 1 < stages; ++s) level = std::max(level, common_level(groups, s * data_parallel, (s + 1) * data_parallel));
  ClusterLevel link{"pipeline", stages * chunks, "none", 1e30, 0.0};
  if (level >= 0) link = groups.levels()[level], link.count = stages * chunks;
  *crossing = link;
  const Cluster pipeline("pipeline", "", groups.device(), {link});
  return balanced_plan(profile, pipeline, stages * chunks, schedule, microbatches);
}

}  // namespace

std::string ParallelConfiguration::label() const {
  return "t" + std::to_string(tensor_parallel) + " p" + std::to_string(stages) +
         (replicas.empty() ? " d" + std::to_string(data_parallel) : " r" + replicas) + " b" + std::to_string(microbatch_size) + " m" + std::to_string(microbatches) + " " +
         recomputation_name(recomputation) + " " + schedule;
}

std::string ParallelSearchResult::binding_constraint() const {
  if (configurations.empty()) return "no configuration could be laid out";
  if (best_fit < 0) {
    const auto least = std::min_element(configurations.begin(), configurations.end(), [](const auto& a, const auto& b) {
      return a.peak_memory_bytes < b.peak_memory_bytes;
    });
    return "memory: nothing fits; the least any configuration needs is " + gigabytes(least->peak_memory_bytes) + " (" +
           least->label() + ") against the device's " + gigabytes(device_memory_bytes);
  }
  if (best_fit == best_overall) return "time: the fastest configuration fits in memory";
  const ParallelConfiguration& faster = configurations[best_overall];
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.4g s", faster.iteration_s);
  return "memory: the fastest, " + faster.label() + " (" + seconds + " per iteration), needs " +
         gigabytes(faster.peak_memory_bytes) + " on its busiest GPU, over the device's " + gigabytes(device_memory_bytes);
}

std::string parallel_search_csv(const ParallelSearchResult& result) {
  std::string out =
      "tensor_parallel,stages,data_parallel,microbatch_size,microbatches,recomputation,schedule,iteration_s,allreduce_s,"
      "model_tflops_per_gpu,peak_memory_bytes,fits,replicas\n";
  for (const ParallelConfiguration& c : result.configurations) {
    char numbers[160];
    std::snprintf(numbers, sizeof numbers, "%.17g,%.17g,%.17g,%.17g", c.iteration_s, c.allreduce_s,
                  c.model_tflops_per_gpu, c.peak_memory_bytes);
    out += std::to_string(c.tensor_parallel) + "," + std::to_string(c.stages) + "," + std::to_string(c.data_parallel) +
           "," + std::to_string(c.microbatch_size) + "," + std::to_string(c.microbatches) + "," +
           recomputation_name(c.recomputation) + "," + c.schedule + "," + numbers + "," + (c.fits ? "true" : "false") +
           "," + c.replicas + "\n";
  }
  return out;
}

ParallelSearchResult search_parallel_plans(const ParallelSearchRequest& request, const Cluster& cluster) {
  const bool measured = request.measured.has_value();
  if (measured) {
    for (int t : request.tensor_parallel) {
      if (t != 1) {
        throw Error({request.measured->source_path(), 0, "--tp"}, "a measured profile has no tensor-parallel split",
                    "leave --tp out (or describe a transformer with --preset)");
      }
    }
  } else {
    check_transformer_spec(request.model);
  }
  if (request.global_batch < 1) {
    throw Error({"", 0, "--global-batch"}, "the global batch must be >= 1 sequence", "e.g. --global-batch 1024");
  }
  if (!measured && !(cluster.device().peak_flops > 0.0)) {
    throw Error({cluster.source_path(), 0, "device.peak_flops"}, "the cluster does not give the device's peak FLOP/s",
                "add device.peak_flops (e.g. 9.89e14 for an H100's bf16)");
  }
  const int gpus = cluster.worker_count();
  int blocks = request.model.layers;
  // The model's training FLOPs per sequence, no recomputation, whole model (for TFLOP/s per GPU;
  // a measured profile's forward FLOPs x 3 where it has them, else 0).
  double flops_per_sequence = 0;
  if (measured) {
    blocks = 0;
    for (const Layer& layer : request.measured->layers()) {
      if (!layer.is_input) ++blocks;
      flops_per_sequence += 3 * layer.flops.value_or(0.0) / request.measured->batch_size();
    }
  } else {
    TransformerSpec whole = request.model;
    whole.microbatch_size = 1, whole.tensor_parallel = 1, whole.sequence_parallel = false;
    for (const TransformerLayerCost& cost : transformer_layer_costs(whole, Recomputation::none)) {
      flops_per_sequence += cost.forward_flops + cost.backward_input_flops + cost.backward_weight_flops;
    }
  }
  // A measured profile knows no attention core to recompute selectively: none or full (every stage).
  std::vector<Recomputation> recomputation;
  for (Recomputation r : request.recomputation) {
    if (!measured || r != Recomputation::selective) recomputation.push_back(r);
  }
  if (recomputation.empty()) {
    throw Error({"", 0, "--recompute"}, "a measured profile recomputes none or every stage, not selectively",
                "give --recompute none,full (selective needs a transformer's attention core: --preset)");
  }

  for (int p : request.stages) {
    if (p < 1 || p > blocks) {
      throw Error({"", 0, "--stages"}, std::to_string(p) + " stages for " + std::to_string(blocks) + " blocks",
                  "give between 1 and " + std::to_string(blocks) + " stages (one block at least per stage)");
    }
  }
  std::vector<int> degrees = measured ? std::vector<int>{1} : request.tensor_parallel;
  const bool degrees_given = !degrees.empty();
  if (!degrees_given) degrees = divisors_up_to(cluster.levels().front().count, cluster.levels().front().count);
  ParallelSearchResult result;
  result.device_memory_bytes = cluster.device().memory_bytes;
  std::string last_refusal;
  // Builds the configuration's validated schedule and runs it on paper over `link`: its time, its busiest
  // GPU's memory; false (counted as not laid out) where the schedule cannot be built.
  auto judge = [&](const Plan& plan, int chunks, const ClusterLevel& link, ParallelConfiguration& c, BuiltSchedule& built,
                   Evaluation& run) {
    ScheduleRequest schedule_request;
    schedule_request.name = c.schedule;
    schedule_request.microbatches = plan.microbatches;
    schedule_request.chunks = chunks;
    try {
      built = build_schedule(plan, schedule_request);
    } catch (const Error& error) {  // e.g. a schedule that needs more microbatches than this
      last_refusal = error.what();
      ++result.skipped;
      return false;
    }
    run = evaluate_schedule(built.schedule, stage_times_from_plan(plan), {link.bandwidth_bytes_per_s, link.latency_s});
    c.iteration_s = run.makespan_s;
    for (const WorkerMemory& memory : built.report.memory) c.peak_memory_bytes = std::max(c.peak_memory_bytes, memory.total_bytes());
    c.fits = !(result.device_memory_bytes > 0.0) || c.peak_memory_bytes <= result.device_memory_bytes;
    return true;
  };
  auto tflops = [&](const ParallelConfiguration& c) {
    return flops_per_sequence * request.global_batch / (c.iteration_s * gpus) / 1e12;
  };
  for (int t : degrees) {
    try {
      if (!measured) check_transformer_spec(configured(request, t, 1));
    } catch (const Error& error) {
      if (degrees_given) throw;  // asked for by name: say why it cannot be
      last_refusal = error.what();
      continue;
    }
    const Cluster groups = tensor_parallel_groups(cluster, t);
    const int workers = groups.worker_count();
    std::vector<int> stage_counts = request.stages;
    if (stage_counts.empty()) stage_counts = divisors_up_to(workers, blocks);
    std::map<std::pair<int, Recomputation>, Profile> profiles;  // by (b, recomputation)
    for (int p : stage_counts) {
      if (workers % p != 0) continue;  // p is within 1..blocks (checked above, or a divisor up to blocks)
      const int d = workers / p;
      for (int b : request.microbatch_sizes) {
        if (request.global_batch % (d * b) != 0 || (measured && b > request.measured->batch_size())) continue;
        const int m = request.global_batch / (d * b);
        if (m > request.max_microbatches_per_pipeline) {
          ++result.skipped;
          continue;
        }
        for (Recomputation r : recomputation) {
          auto found = profiles.find({b, r});
          if (found == profiles.end()) {
            found = profiles.emplace(std::pair{b, r}, searched_profile(request, t, b, r, cluster)).first;
          }
          const Profile& profile = found->second;
          for (const std::string& schedule : request.schedules) {
            const int chunks = chunks_of(schedule);
            if ((schedule_needs_unreplicated_stages(schedule) && d > 1) || p * chunks > blocks + 2) continue;
            ParallelConfiguration c;
            c.tensor_parallel = t, c.stages = p, c.data_parallel = d, c.microbatch_size = b, c.microbatches = m;
            c.recomputation = r, c.schedule = schedule;
            ClusterLevel crossing;
            Plan plan = pipeline_plan(profile, groups, p, chunks, d, schedule, m, &crossing);
            if (measured && r == Recomputation::full) recompute_every_stage(plan);
            BuiltSchedule built;
            Evaluation run;
            if (!judge(plan, chunks, crossing, c, built, run)) continue;
            // Gradients of the busiest worker, all-reduced among the d replicas over the level they span.
            std::vector<double> gradient_bytes(p, 0.0);
            for (std::size_t s = 0; s < plan.stages.size(); ++s) {
              gradient_bytes[built.schedule.shape.stage_workers[s].front()] += plan.stages[s].param_bytes;
            }
            const double bytes = *std::max_element(gradient_bytes.begin(), gradient_bytes.end());
            int level = -1;
            for (int s = 0; s < p; ++s) level = std::max(level, common_level(groups, s * d, s * d + d - 1));
            if (level >= 0) {
              const ClusterLevel& span = groups.levels()[level];
              c.allreduce_s = CommunicationCost{span.bandwidth_bytes_per_s, span.latency_s}.ring_allreduce_s(bytes, d);
            }
            c.iteration_s += c.allreduce_s;
            c.model_tflops_per_gpu = tflops(c);
            result.configurations.push_back(std::move(c));
          }
        }
      }
    }
  }
  // PipeDream's own plan where it replicates stages unequally (uniform replication is searched above).
  for (int b : measured ? request.microbatch_sizes : std::vector<int>{}) {
    if (b > request.measured->batch_size() || request.global_batch % b != 0) continue;
    const Profile profile = searched_profile(request, 1, b, Recomputation::none, cluster);
    const PartitionResult partition = optimize_partition(profile, cluster, OptimizerOptions{});
    bool unequal = false;
    for (const PipelineStage& stage : partition.stages) unequal = unequal || stage.replicas != partition.stages.front().replicas;
    const int p = static_cast<int>(partition.stages.size());
    if (!unequal || (!request.stages.empty() && std::find(request.stages.begin(), request.stages.end(), p) == request.stages.end())) {
      continue;
    }
    const ClusterLevel& outermost = cluster.levels().back();  // the slowest link the pipeline may cross
    for (Recomputation r : recomputation) {
      for (const std::string& schedule : request.schedules) {
        if (schedule_needs_unreplicated_stages(schedule) || chunks_of(schedule) > 1) continue;
        ParallelConfiguration c;
        c.stages = p, c.microbatch_size = b, c.microbatches = request.global_batch / b;
        c.recomputation = r, c.schedule = schedule, c.replicas = partition.configuration;
        Plan plan = make_plan(profile, cluster, OptimizerOptions{}, partition, schedule, c.microbatches);
        if (r == Recomputation::full) recompute_every_stage(plan);
        BuiltSchedule built;
        Evaluation run;
        if (!judge(plan, 1, outermost, c, built, run)) continue;
        for (int w = 0; w < static_cast<int>(built.schedule.workers.size()); ++w) {
          for (std::size_t i = 0; i < built.schedule.workers[w].size(); ++i) {
            if (built.schedule.workers[w][i].kind != ActionKind::ALLREDUCE) continue;
            c.allreduce_s = std::max(c.allreduce_s, run.timings[w][i].end_s - run.timings[w][i].start_s);
          }
        }
        c.model_tflops_per_gpu = tflops(c);
        result.configurations.push_back(std::move(c));
      }
    }
  }
  if (result.configurations.empty()) {
    throw Error({"", 0, "--global-batch"},
                "no configuration of " + std::to_string(gpus) + " GPUs splits a batch of " +
                    std::to_string(request.global_batch) + " sequences into whole microbatches" +
                    (last_refusal.empty() ? "" : " (last refusal: " + last_refusal + ")"),
                "use a global batch that is a multiple of the data-parallel degrees, or other --tp/--stages");
  }
  std::stable_sort(result.configurations.begin(), result.configurations.end(),
                   [](const auto& a, const auto& b) { return a.iteration_s < b.iteration_s; });
  result.best_overall = 0;
  for (std::size_t i = 0; i < result.configurations.size(); ++i) {
    if (result.configurations[i].fits) {
      result.best_fit = static_cast<int>(i);
      break;
    }
  }
  return result;
}

ParallelPlan parallel_plan(const ParallelSearchRequest& request, const Cluster& cluster,
                           const ParallelConfiguration& configuration) {
  Profile profile = searched_profile(request, configuration.tensor_parallel, configuration.microbatch_size,
                                     configuration.recomputation, cluster);
  Cluster groups = tensor_parallel_groups(cluster, configuration.tensor_parallel);
  const int chunks = chunks_of(configuration.schedule);
  const int microbatches = configuration.microbatches * configuration.data_parallel;  // round robin over replicas
  Plan plan;
  if (!configuration.replicas.empty()) {  // PipeDream's plan, as the search made it
    plan = make_plan(profile, groups, OptimizerOptions{}, optimize_partition(profile, groups, OptimizerOptions{}),
                     configuration.schedule, microbatches);
  } else if (chunks > 1) {  // unreplicated (d = 1): planned as stages x chunks workers, as --chunks wants
    ClusterLevel crossing;
    plan = pipeline_plan(profile, groups, configuration.stages, chunks, 1, configuration.schedule, microbatches, &crossing);
    plan.cluster_name = groups.name(), plan.cluster_path = groups.source_path();
  } else {
    plan = balanced_plan(profile, groups, std::vector<int>(configuration.stages, configuration.data_parallel),
                         configuration.schedule, microbatches);
  }
  if (request.measured && configuration.recomputation == Recomputation::full) recompute_every_stage(plan);
  return {std::move(profile), std::move(groups), std::move(plan)};
}

}  // namespace pipetwin
