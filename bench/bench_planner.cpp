// Planner speed: the partition optimizer on PipeDream's three profiles, and on a synthetic
// 1,000-layer chain over 1,024 workers in three levels (goal: under 1 s on one core).
#include <benchmark/benchmark.h>

#include <random>

#include "planner/parallel_search.h"
#include "planner/partition_optimizer.h"
#include "planner/profile_io.h"

namespace pipetwin {
namespace {

std::string profile_path(const std::string& model) { return std::string(PIPETWIN_PROFILES_DIR) + "/" + model + ".txt"; }
std::string platform_path(const std::string& name) {
  return std::string(PIPETWIN_SOURCE_DIR) + "/platforms/" + name + ".json";
}

void plan_real_profile(benchmark::State& state, const std::string& model, const std::string& cluster_name,
                       int workers) {
  const Profile profile = load_profile(profile_path(model));
  const Cluster cluster = load_cluster(platform_path(cluster_name)).first_workers(workers);
  for (auto _ : state) {
    PartitionResult result = optimize_partition(profile, cluster, {});
    benchmark::DoNotOptimize(result.pipeline_time_s);
  }
}
BENCHMARK_CAPTURE(plan_real_profile, vgg16_cluster_a_16, "vgg16", "pipedream-cluster-a", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_real_profile, resnet50_cluster_a_16, "resnet50", "pipedream-cluster-a", 16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_real_profile, gnmt_cluster_b_8, "gnmt", "pipedream-cluster-b", 8)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(plan_real_profile, gnmt_cluster_b_16, "gnmt", "pipedream-cluster-b", 16)->Unit(benchmark::kMillisecond);

// A chain of `layers` with seeded random times (0.1..2 ms), parameters (0..40 MB) and activations.
Profile synthetic_chain(int layers) {
  std::mt19937 random(1000);
  std::uniform_real_distribution<double> time(0.1, 2.0), params(0.0, 4e7), activations(1e5, 2e7);
  std::vector<Layer> list;
  std::vector<Profile::Edge> edges;
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    layer.id = "layer" + std::to_string(l);
    layer.fwd_ms = time(random);
    layer.bwd_ms = 2 * layer.fwd_ms;
    layer.param_bytes = params(random);
    layer.activation_bytes = activations(random);
    list.push_back(layer);
    if (l > 0) edges.emplace_back(l - 1, l);
  }
  return Profile("chain" + std::to_string(layers), 32, list, edges);
}

Cluster three_levels(int gpus, int servers, int racks) {
  return Cluster("synthetic", "", DeviceSpec{"gpu", 1.0, 0.0, 80e9},
                 {{"server", gpus, "NVLink", 300e9, 2e-6}, {"rack", servers, "IB", 50e9, 5e-6},
                  {"pod", racks, "spine", 12.5e9, 1e-5}});
}

void plan_synthetic_chain(benchmark::State& state) {
  const Profile profile = synthetic_chain(static_cast<int>(state.range(0)));
  const Cluster cluster = three_levels(static_cast<int>(state.range(1)), static_cast<int>(state.range(2)),
                                       static_cast<int>(state.range(3)));
  std::size_t stages = 0;
  for (auto _ : state) {
    PartitionResult result = optimize_partition(profile, cluster, {});
    stages = result.stages.size();
    benchmark::DoNotOptimize(result.pipeline_time_s);
  }
  state.counters["workers"] = cluster.worker_count();
  state.counters["stages"] = static_cast<double>(stages);
}
BENCHMARK(plan_synthetic_chain)
    ->ArgNames({"layers", "gpus", "servers", "racks"})
    ->Args({1000, 4, 8, 32})
    ->Args({1000, 8, 8, 16})
    ->Args({1000, 8, 16, 8})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// pipetwin search's full space for Llama 3 405B (126 blocks) on 16,384 H100 in servers of 8 (NVLink
// 450 GB/s, 400 GB/s per server above), global batch 2,048 sequences (16M tokens): every t dividing 8,
// every stage count up to 126, microbatch sizes 1/2/4, three recomputation modes, five schedules.
void search_llama3_405b_16k(benchmark::State& state) {
  ParallelSearchRequest request;
  request.model = transformer_preset("llama3-405b");
  request.global_batch = 2048;
  const Cluster cluster("h100-16k", "", DeviceSpec{"H100", 1.0, 9.89e14, 80e9},
                        {{"server", 8, "NVLink", 450e9, 2e-6}, {"cluster", 2048, "IB", 400e9, 5e-6}});
  std::size_t configurations = 0;
  for (auto _ : state) configurations = search_parallel_plans(request, cluster).configurations.size();
  state.counters["configurations"] = static_cast<double>(configurations);
}
BENCHMARK(search_llama3_405b_16k)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
