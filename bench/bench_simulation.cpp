// Simulator speed: simulated actions per second, and one iteration of a 1,024-GPU run (8 stages x
// 128 replicas, 32 microbatches, 1F1B) on a DGX-H100-like pod (goal: under 10 s, under 4 GiB).
// Scale (issue 15): a uniform 96-layer model (10/20 ms per layer, 50 MB activations, 200 MB of
// parameters per layer) on 8 stages, 1F1B, 32 microbatches, 8 GPUs per server, 1,024 to 16,384 GPUs,
// with the bulk collective model (and the step model where it is affordable); and on the Llama 3
// cluster's four levels (1, 3 and 8 pods of 3,072 GPUs) and on a fat tree (SimGrid's FAT_TREE zone).
// Each simulation runs in a child process (SimGrid's engine runs once per process); the child's peak
// resident memory is reported as a counter.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "planner/balanced_plan.h"
#include "planner/cluster.h"
#include "planner/transformer_model.h"
#include "sim/simulation.h"

namespace pipetwin {
namespace {

Plan uniform_plan(int stages, int replicas, double stage_s, double output_bytes, double param_bytes) {
  Plan plan;
  plan.profile_name = "synthetic";
  plan.cluster_name = "synthetic";
  plan.workers = stages * replicas;
  plan.microbatch_size = 8;
  plan.microbatches = 32;
  for (int s = 0; s < stages; ++s) {
    PlanStage stage;
    stage.layer_ids = {"stage" + std::to_string(s)};
    stage.replicas = replicas;
    for (int r = 0; r < replicas; ++r) stage.devices.push_back(s * replicas + r);
    stage.forward_s = stage_s / 3;
    stage.backward_s = 2 * stage_s / 3;
    stage.compute_s = stage_s;
    stage.output_activation_bytes = output_bytes;
    stage.param_bytes = param_bytes;
    stage.activation_bytes = output_bytes;
    plan.stages.push_back(stage);
  }
  return plan;
}

Cluster pod(int servers) {
  return Cluster("pod", "", DeviceSpec{"H100", 1.0, 9.89e14, 80e9},
                 {{"server", 8, "NVSwitch", 450e9, 2e-6}, {"pod", servers, "IB", 400e9, 5e-6}});
}

double child_peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  return usage.ru_maxrss / 1024.0;
}

void run_and_count(benchmark::State& state, const sim::SimulationConfig& config, int workers);

// One iteration of `plan` on `cluster`, 1F1B, `microbatches` microbatches, no warm-up.
sim::SimulationConfig one_iteration(const Plan& plan, const Cluster& cluster, int microbatches) {
  sim::SimulationConfig config{plan, cluster};
  config.schedule_name = "1f1b";
  config.microbatches = microbatches;
  config.iterations = 1;
  config.warmup_iterations = 0;
  return config;
}

// The 96-layer model: 12 layers per stage of 8, so 0.36 s of compute and 2.4 GB of
// parameters per stage, `replicas` per stage.
Plan scale_model_plan(int replicas) { return uniform_plan(8, replicas, 12 * 0.03, 5e7, 12 * 2e8); }

void simulate_pipeline(benchmark::State& state) {
  const int stages = static_cast<int>(state.range(0)), replicas = static_cast<int>(state.range(1));
  const sim::SimulationConfig config =
      one_iteration(uniform_plan(stages, replicas, 0.03, 5e7, 2e8), pod(stages * replicas / 8), static_cast<int>(state.range(2)));
  run_and_count(state, config, stages * replicas);
}

// The 96-layer model on the pod; range(1) = 1 for the step collective model.
void simulate_at_scale(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  sim::SimulationConfig config = one_iteration(scale_model_plan(replicas), pod(8 * replicas / 8), 32);
  config.collective_model = state.range(1) == 1 ? "step" : "bulk";
  run_and_count(state, config, 8 * replicas);
}

// The same model on a two-level fat tree of SimGrid's own (FAT_TREE zone) above the pod's servers:
// range(0) replicas per stage, leaf switches of 32 servers, 8 spines, each leaf with one uplink to
// each spine (400 GB/s links).
void simulate_fat_tree(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  const int servers = replicas;  // 8 stages x replicas GPUs, 8 per server
  nlohmann::json spec = cluster_to_json(pod(servers));
  spec["fabric"] = {{"kind", "fat-tree"}, {"down", {32, servers / 32}}, {"up", {1, 8}}, {"link_count", {1, 1}},
                    {"bandwidth_bytes_per_s", 400e9}, {"latency_s", 5e-6}};
  run_and_count(state, one_iteration(scale_model_plan(replicas), cluster_from_json(spec, "fat-tree.json"), 32), 8 * replicas);
}

// The same model on Meta's Llama 3 cluster (platforms/llama3-24k-roce.json: 4 levels, pods at 1:7):
// range(0) pods of 3,072 GPUs, 8 stages of 384 x pods replicas.
void simulate_llama_cluster(benchmark::State& state) {
  const int pods = static_cast<int>(state.range(0));
  const Cluster cluster = load_cluster(PIPETWIN_SOURCE_DIR "/platforms/llama3-24k-roce.json").first_workers(pods * 3072);
  run_and_count(state, one_iteration(scale_model_plan(pods * 384), cluster, 32), pods * 3072);
}

// Llama 3 405B (pipetwin model's preset, selective recomputation, tensor parallel 8 with sequence
// parallelism: one worker per server) on range(0) H100s in servers of 8 (pod()), 16 pipeline stages
// (8 below 128 GPUs), 1F1B, 16 microbatches of one sequence per pipeline (issue 16's scale target).
// range(1): the tensor-parallel sums on the links (0) or on paper (1, --tensor-sums paper).
void simulate_llama3_405b(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const Cluster cluster = pod(gpus / 8);
  TransformerSpec spec = transformer_preset("llama3-405b");
  spec.tensor_parallel = 8, spec.sequence_parallel = true;
  const Profile profile = transformer_profile(spec, Recomputation::selective, gemm_rate(cluster.device()),
                                              {cluster.levels().front().bandwidth_bytes_per_s, cluster.levels().front().latency_s});
  const Cluster groups = tensor_parallel_groups(cluster, 8);
  const int stages = std::min(16, groups.worker_count()), replicas = groups.worker_count() / stages;
  sim::SimulationConfig config =
      one_iteration(balanced_plan(profile, groups, std::vector<int>(stages, replicas), "1f1b", 16 * replicas), groups, 16 * replicas);
  config.ignore_memory = true;
  config.tensor_sums = state.range(1) == 0 ? "links" : "paper";
  run_and_count(state, config, gpus);
}

void run_and_count(benchmark::State& state, const sim::SimulationConfig& config, int workers) {
  long long actions = 0, messages = 0;
  double iteration_s = 0.0;
  for (auto _ : state) {
    const sim::SimulationResult result = sim::simulate_in_subprocess(config);
    actions = result.summary.actions;
    messages = result.summary.messages;
    iteration_s = result.summary.iteration_s;
  }
  state.counters["workers"] = workers;
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["actions/s"] = benchmark::Counter(static_cast<double>(actions) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["messages"] = static_cast<double>(messages);
  state.counters["messages/s"] = benchmark::Counter(static_cast<double>(messages) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["simulated_iteration_s"] = iteration_s;
  state.counters["child_peak_rss_MiB"] = child_peak_rss_mib();
}

BENCHMARK(simulate_pipeline)->ArgNames({"stages", "replicas", "microbatches"})->Args({4, 2, 64})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(simulate_pipeline)->ArgNames({"stages", "replicas", "microbatches"})->Args({8, 16, 32})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(simulate_pipeline)
    ->ArgNames({"stages", "replicas", "microbatches"})
    ->Args({8, 128, 32})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK(simulate_at_scale)
    ->ArgNames({"replicas", "step_model"})
    ->Args({128, 0})
    ->Args({512, 0})
    ->Args({2048, 0})
    ->Args({128, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK(simulate_fat_tree)->ArgNames({"replicas"})->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

BENCHMARK(simulate_llama3_405b)
    ->ArgNames({"gpus", "paper_sums"})
    ->ArgsProduct({{64, 256, 1024, 4096, 16384}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK(simulate_llama_cluster)->ArgNames({"pods"})->Arg(1)->Arg(3)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
