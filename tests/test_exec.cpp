// The libtorch back end end to end: real worker processes, real tensors. Gradient equivalence with
// single-process training, weight stashing, convergence, traces, dead and hung peers, checkpoints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "exec/child_processes.h"
#include "exec/model_zoo.h"
#include "exec/reference_training.h"
#include "exec/tensor_parallel.h"
#include "exec/transport.h"
#include "exec/validation.h"
#include "exec/validation_matrix.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/plan.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_lowering.h"
#include "test_support.h"
#include "traces/trace.h"
#include "traces/trace_metrics.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A plan of the MLP (7 layers) by hand: stage s has layers [first, last] on the given workers.
Plan mlp_plan(const std::vector<std::pair<std::pair<int, int>, std::vector<int>>>& stages, int workers) {
  Plan plan;
  plan.profile_name = "mlp";
  plan.cluster_name = "localhost-cpu";
  plan.workers = workers;
  plan.microbatch_size = 16;
  plan.microbatches = 4;
  plan.schedule = "1f1b";
  for (const auto& [layers, devices] : stages) {
    PlanStage stage;
    for (int l = layers.first; l <= layers.second; ++l) stage.layer_ids.push_back("layer" + std::to_string(l));
    stage.devices = devices;
    stage.replicas = static_cast<int>(devices.size());
    stage.forward_s = stage.backward_s = 1e-3;
    plan.stages.push_back(stage);
  }
  return plan;
}

struct RunResult {
  testing::CommandResult result;
  std::string directory;
};

// `environment`, when given, is put before the command ("NAME=value ...").
RunResult run_plan(const testing::TempDir& dir, const Plan& plan, const std::string& arguments,
                   const std::string& environment = "") {
  write_plan(plan, dir.file("plan.json"));
  RunResult run;
  run.directory = dir.file("checkpoints");
  run.result = testing::run_command(environment + " " + PIPETWIN_BINARY + " run --plan " + dir.file("plan.json") +
                                    " --model " + plan.profile_name + " --lr 0.05 --checkpoint-dir " + run.directory +
                                    " -o " + dir.file("trace.jsonl") + " " + arguments);
  return run;
}

// Each stage's parameters from the workers' checkpoints, by plan stage (the first replica's).
std::map<int, std::vector<torch::Tensor>> checkpointed(const RunResult& run, const Plan& plan, int workers) {
  std::map<int, std::vector<torch::Tensor>> result;
  auto model = exec::make_model("mlp");
  for (int w = 0; w < workers; ++w) {
    const auto meta = json_fields::read_file(run.directory + "/worker" + std::to_string(w) + ".json");
    std::vector<torch::Tensor> tensors;
    torch::load(tensors, meta.at("tensors").get<std::string>());
    std::size_t next = 0;
    for (const auto& stage : meta.at("stages")) {
      const int s = stage.at("stage");
      const std::size_t count = stage.at("parameters");
      std::vector<torch::Tensor> parameters(tensors.begin() + next, tensors.begin() + next + count);
      next += 2 * count;  // parameters, then momentum
      if (!result.count(s)) result[s] = parameters;
    }
  }
  EXPECT_EQ(result.size(), plan.stages.size());
  return result;
}

double max_difference(const std::map<int, std::vector<torch::Tensor>>& stages, const Plan& plan,
                      const exec::ReferenceResult& reference) {
  double worst = 0.0;
  for (const auto& [s, parameters] : stages) {
    std::vector<torch::Tensor> expected;
    for (const std::string& id : plan.stages[s].layer_ids) {
      const int layer = std::stoi(id.substr(5));
      for (const auto& p : reference.parameters[layer]) expected.push_back(p);
    }
    EXPECT_EQ(expected.size(), parameters.size());
    for (std::size_t p = 0; p < std::min(expected.size(), parameters.size()); ++p) {
      worst = std::max(worst, (expected[p] - parameters[p]).abs().max().item<double>());
    }
  }
  return worst;
}

exec::ReferenceResult reference(int microbatches, int iterations) {
  exec::ReferenceOptions options;
  options.microbatch_size = 16;
  options.microbatches = microbatches;
  options.iterations = iterations;
  return exec::train_reference(options);
}

struct EquivalenceCase {
  std::string name;
  std::vector<std::pair<std::pair<int, int>, std::vector<int>>> stages;
  int workers;
  std::string arguments;
  bool recompute = false;  // every stage recomputes its forward before each backward (recompute_every_stage)
};

void PrintTo(const EquivalenceCase& value, std::ostream* out) { *out << value.name; }

class GradientEquivalence : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(GradientEquivalence, WeightsAfterTwoIterationsEqualSingleProcessTraining) {
  testing::TempDir dir;
  int plan_workers = 0;
  for (const auto& stage : GetParam().stages) plan_workers = std::max(plan_workers, *std::max_element(stage.second.begin(), stage.second.end()) + 1);
  Plan plan = mlp_plan(GetParam().stages, plan_workers);
  if (GetParam().recompute) recompute_every_stage(plan);
  const RunResult run = run_plan(dir, plan, GetParam().arguments + " -m 4 --iterations 2");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const double difference = max_difference(checkpointed(run, plan, GetParam().workers), plan, reference(4, 2));
  EXPECT_LE(difference, 1e-5) << GetParam().name;
  // A recomputing run recomputes every pass once, just before its backward: as many R as F.
  std::map<ActionKind, int> passes;
  for (const TraceEvent& e : load_trace(dir.file("trace.jsonl")).events) ++passes[e.kind];
  EXPECT_EQ(passes[ActionKind::FORWARD], 2 * 4 * static_cast<int>(plan.stages.size()));
  EXPECT_EQ(passes[ActionKind::RECOMPUTE], GetParam().recompute ? passes[ActionKind::FORWARD] : 0);
  RecordProperty("max_abs_difference", std::to_string(difference));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, GradientEquivalence,
    ::testing::Values(
        EquivalenceCase{"gpipe", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s gpipe"},
        EquivalenceCase{"1f1b", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s 1f1b"},
        EquivalenceCase{"interleaved", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2,
                        "-s interleaved --chunks 2 --workers 2"},
        EquivalenceCase{"zb_h1", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s zb-h1"},
        EquivalenceCase{"zb_h2", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s zb-h2"},
        EquivalenceCase{"looped_bfs", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2,
                        "-s looped-bfs --chunks 2 --workers 2"},
        EquivalenceCase{"interleaved_zb", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2,
                        "-s interleaved-zb --chunks 2 --workers 2"},
        EquivalenceCase{"zb_v", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2, "-s zb-v --workers 2"},
        EquivalenceCase{"dualpipe_v", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2,
                        "-s dualpipe-v --workers 2"},
        EquivalenceCase{"1f1b_replicated", {{{0, 3}, {0, 1}}, {{4, 6}, {2}}}, 3, "-s 1f1b"},
        EquivalenceCase{"1f1b_recomputed", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s 1f1b", true},
        EquivalenceCase{"zb_h1_recomputed", {{{0, 3}, {0}}, {{4, 6}, {1}}}, 2, "-s zb-h1", true},
        EquivalenceCase{"dualpipe_v_recomputed", {{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 5}, {2}}, {{6, 6}, {3}}}, 2,
                        "-s dualpipe-v --workers 2", true}),
    [](const auto& info) { return info.param.name; });

// Tensor parallelism in the pipeline: the gpt model (7 layers, like the MLP) on 2 stages x 2
// tensor-parallel ranks, 4 processes; every process's checkpoint holds, for each parameter of its
// stage, its rank's slice of the single-process run's weights after two iterations. zb-h1 splits the
// backward: the input pass and the weight pass both sum inside the blocks.
class TensorParallelEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallelEquivalence, EveryRanksWeightsAreItsSliceOfSingleProcessTraining) {
  testing::TempDir dir;
  Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  plan.profile_name = "gpt";
  plan.microbatch_size = 8;
  const RunResult run = run_plan(dir, plan, "-s " + GetParam() + " -m 4 --iterations 2 --tp 2");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("on 2 workers x 2 tensor-parallel ranks"));
  exec::ReferenceOptions options;
  options.model = "gpt";
  options.microbatch_size = 8;
  const exec::ReferenceResult reference = exec::train_reference(options);
  double worst = 0.0;
  int compared = 0;
  for (int process = 0; process < 4; ++process) {
    const int worker = process % 2, lane = process / 2;
    auto parallel = exec::tensor_parallel_model(exec::make_model("gpt"), lane, 2,
                                                [](torch::Tensor&) {});
    const auto meta = json_fields::read_file(run.directory + "/worker" + std::to_string(process) + ".json");
    std::vector<torch::Tensor> tensors;
    torch::load(tensors, meta.at("tensors").get<std::string>());
    ASSERT_EQ(meta.at("stages").size(), 1u);
    std::size_t next = 0;
    for (const std::string& id : plan.stages[worker].layer_ids) {
      const int layer = std::stoi(id.substr(5));
      std::size_t p = 0;
      for (const auto& held : parallel->layer(layer).ptr()->named_parameters()) {
        ASSERT_LT(next, tensors.size());
        const torch::Tensor expected =
            exec::tensor_parallel_shard(held.key(), reference.parameters[layer][p++], lane, 2);
        ASSERT_EQ(tensors[next].sizes(), expected.sizes()) << "process " << process << " layer " << layer << " " << held.key();
        worst = std::max(worst, (tensors[next++] - expected).abs().max().item<double>());
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * (2 + 4 * 12 + 2 + 2));  // both ranks: embedding 2, blocks 12 each, norm 2, head 2
  EXPECT_LE(worst, 1e-5);
  RecordProperty("max_abs_difference", std::to_string(worst));
  // The trace is the first rank's: one worker's events per plan worker.
  std::set<int> workers;
  for (const TraceEvent& e : load_trace(dir.file("trace.jsonl")).events) workers.insert(e.worker);
  EXPECT_EQ(workers, (std::set<int>{0, 1}));
}

// A dead tensor-parallel rank stops the run, named with its plan worker and rank.
TEST(Faults, ADeadTensorParallelRankIsNamedWithItsWorkerAndRank) {
  testing::TempDir dir;
  Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  plan.profile_name = "gpt";
  plan.microbatch_size = 8;
  const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 2 --tp 2 --timeout 10 --fault die:3:5");
  EXPECT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("worker 3 (plan worker 1, tensor-parallel rank 1) exited"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("trace.jsonl")));
}

INSTANTIATE_TEST_SUITE_P(Schedules, TensorParallelEquivalence, ::testing::Values("1f1b", "zb-h1"),
                         [](const auto& info) { return info.param == "1f1b" ? std::string("one_f_one_b") : std::string("zb_h1"); });

// torch.distributed.pipelining's CSV, written by hand, runs for real: a 2-rank zero-bubble schedule
// trains the MLP to single-process weights, and a 4-rank DualPipeV (8 stages of VGG-16) runs every
// pass, its overlapped pairs included.
TEST(TorchScheduleFile, AHandWrittenZeroBubbleFileTrainsLikeOneProcess) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  const RunResult run = run_plan(dir, plan, "--iterations 2 --schedule-file " PIPETWIN_SOURCE_DIR
                                            "/tests/data/torch_zero_bubble_2_ranks.csv");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_LE(max_difference(checkpointed(run, plan, 2), plan, reference(4, 2)), 1e-5);
  const Trace trace = load_trace(dir.file("trace.jsonl"));
  EXPECT_EQ(trace.header.schedule, "torch");
  int weights = 0;
  for (const TraceEvent& e : trace.events) weights += e.kind == ActionKind::BACKWARD_WEIGHT;
  EXPECT_EQ(weights, 2 * 2 * 4);
}

TEST(TorchScheduleFile, AHandWrittenFourRankDualPipeVRuns) {
  testing::TempDir dir;
  Plan plan = mlp_plan({}, 8);  // one device per stage, as a plan is written; the file places them on 4 ranks
  plan.profile_name = "vgg16";
  plan.microbatch_size = 4;
  const int layers = 37, stages = 8;
  for (int s = 0; s < stages; ++s) {
    PlanStage stage;
    for (int l = s * layers / stages; l < (s + 1) * layers / stages; ++l) stage.layer_ids.push_back("layer" + std::to_string(l));
    stage.devices = {s};
    stage.forward_s = stage.backward_s = 1e-3;
    plan.stages.push_back(stage);
  }
  write_plan(plan, dir.file("plan.json"));
  const auto result = testing::run_pipetwin("run --plan " + dir.file("plan.json") + " --model vgg16 --workers 4 --iterations 2 "
                                            "--schedule-file " PIPETWIN_SOURCE_DIR "/tests/data/torch_dualpipe_v_4_ranks.csv -o " +
                                            dir.file("t.jsonl"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const Trace trace = load_trace(dir.file("t.jsonl"));
  EXPECT_EQ(trace.header.workers, 4);
  std::map<ActionKind, int> passes;
  for (const TraceEvent& e : trace.events) ++passes[e.kind];
  EXPECT_EQ(passes[ActionKind::FORWARD], 2 * 8 * 8);  // iterations x stages x microbatches
  EXPECT_EQ(passes[ActionKind::BACKWARD] + passes[ActionKind::BACKWARD_INPUT], 2 * 8 * 8);
  EXPECT_EQ(passes[ActionKind::BACKWARD_INPUT], passes[ActionKind::BACKWARD_WEIGHT]);
  EXPECT_GT(passes[ActionKind::BACKWARD_INPUT], 0);
}

TEST(AsyncPipeDream, EveryBackwardUsesItsForwardsWeightsAndTrainingConverges) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  write_plan(plan, dir.file("plan.json"));
  const auto result = testing::run_pipetwin("run --plan " + dir.file("plan.json") +
                                            " --model mlp -s pipedream -m 8 --iterations 10 --lr 0.2 --checkpoint-dir " +
                                            dir.file("ck") + " --versions-log " + dir.file("versions.json"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  int checked = 0, stale = 0;
  for (int w = 0; w < 2; ++w) {
    const auto log = json_fields::read_file(dir.file("versions.json") + "." + std::to_string(w));
    for (const auto& entry : log) {
      EXPECT_EQ(entry.at("forward"), entry.at("backward")) << entry.dump();
      ++checked;
      // On the first stage, later microbatches' forwards ran on weights older than the newest update.
      stale += entry.at("stage") == 0 && entry.at("forward").get<int>() < entry.at("microbatch").get<int>();
    }
  }
  EXPECT_EQ(checked, 2 * 80);
  EXPECT_GT(stale, 0);
  // Convergence: the trained model's loss on fresh data is well below the initial model's.
  auto model = exec::make_model("mlp");
  auto whole = model->stage(0, 6);
  auto loss = [&] {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (int b = 0; b < 8; ++b) {
      const auto data = model->batch(99, b, 64);
      total += model->loss(whole->forward(data.inputs), data.labels).item<double>();
    }
    return total / 8;
  };
  const double before = loss();
  RunResult run;
  run.directory = dir.file("ck");
  const auto stages = checkpointed(run, plan, 2);
  auto parameters = whole->parameters();
  std::size_t next = 0;
  for (const auto& [s, tensors] : stages) {
    torch::NoGradGuard no_grad;
    for (const auto& t : tensors) parameters[next++].copy_(t);
  }
  const double after = loss();
  EXPECT_LT(after, 0.7 * before) << "before " << before << " after " << after;
}

TEST(Runs, TwoStagesAndTwoByTwoEndToEndWithAReadableTrace) {
  for (const auto& [stages, workers] :
       {std::pair{std::vector<std::pair<std::pair<int, int>, std::vector<int>>>{{{0, 3}, {0}}, {{4, 6}, {1}}}, 2},
        std::pair{std::vector<std::pair<std::pair<int, int>, std::vector<int>>>{{{0, 3}, {0, 1}}, {{4, 6}, {2, 3}}}, 4}}) {
    testing::TempDir dir;
    Plan plan = mlp_plan(stages, workers);
    const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 3");
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    EXPECT_THAT(run.result.output, HasSubstr("samples/s"));
    const Trace trace = load_trace(dir.file("trace.jsonl"));
    EXPECT_EQ(trace.header.source, "measured");
    EXPECT_EQ(trace.header.workers, workers);
    int forwards = 0;
    for (const auto& e : trace.events) forwards += e.kind == ActionKind::FORWARD;
    EXPECT_EQ(forwards, 2 * 4 * 3);  // 2 stages x 4 microbatches x 3 iterations
    const TraceMetrics metrics = trace_metrics(trace);
    EXPECT_GT(metrics.mean_iteration_s, 0.0);
    EXPECT_EQ(static_cast<int>(metrics.bubble_fraction.size()), workers);
  }
}

// Receives posted ahead (as a worker posts each one when the one before it on its channel is taken):
// messages sent after the posting, in another order, land in their own receives; taking a message
// nobody posted, or posting one twice, is refused naming the message.
TEST(Transport, ReceivesPostedAheadGetTheirOwnMessages) {
  const auto results = exec::run_connected_children(
      2, 4, std::chrono::milliseconds(30000), {},
      [](exec::Transport& transport, int rank) {
        std::vector<double> seen(4, 0.0);
        if (rank == 1) {
          transport.post_receive(torch::zeros({3}), 0, 5, "message 5");
          transport.post_receive(torch::zeros({2}), 0, 6, "message 6");
          transport.barrier();
          seen[1] = transport.take_receive(6).sum().item<double>();
          seen[0] = transport.take_receive(5).sum().item<double>();
          try {
            transport.take_receive(7);
          } catch (const Error& error) {
            seen[2] = error.context().field == "message 7";
          }
          transport.post_receive(torch::zeros({1}), 0, 8, "message 8");
          try {
            transport.post_receive(torch::zeros({1}), 0, 8, "message 8 again");
          } catch (const Error& error) {
            seen[3] = error.context().field == "message 8";
          }
          seen[3] += transport.take_receive(8).item<double>();
        } else {
          transport.barrier();  // both receives are posted before anything is sent
          transport.send(torch::full({2}, 3.0), 1, 6, "message 6");
          transport.send(torch::full({3}, 2.0), 1, 5, "message 5");
          transport.send(torch::full({1}, 10.0), 1, 8, "message 8");
          transport.finish_sends();
        }
        transport.barrier();
        return seen;
      },
      "transport test", "read its message above");
  EXPECT_EQ(results[1][0], 6.0);   // 3 x 2
  EXPECT_EQ(results[1][1], 6.0);   // 2 x 3
  EXPECT_EQ(results[1][2], 1.0);   // take without a post refused
  EXPECT_EQ(results[1][3], 11.0);  // a second post refused (1), the first still gets its message (10)
}

// validate's default cluster is the repository's: found from any folder in the folder above the
// executable's (the build folder's parent); a path that is nowhere is refused naming --cluster.
TEST(Validate, TheDefaultClusterIsFoundBesideTheBuildFromAnyFolder) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("repo/build"));
  std::filesystem::create_directories(dir.file("repo/platforms"));
  testing::write_file(dir.file("repo/platforms/here.json"), "{}");
  EXPECT_EQ(exec::resolve_cluster_path("platforms/here.json", dir.file("repo/build")), dir.file("repo/platforms/here.json"));
  EXPECT_EQ(exec::resolve_cluster_path(dir.file("repo/platforms/here.json"), ""), dir.file("repo/platforms/here.json"));
  try {
    exec::resolve_cluster_path("platforms/missing.json", dir.file("repo/build"));
    FAIL() << "a cluster that is nowhere";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--cluster");
    EXPECT_THAT(error.what(), HasSubstr("platforms/missing.json"));
    EXPECT_THAT(error.what(), HasSubstr("pass --cluster FILE"));
  }
}

// A worker's memory does not grow with the iterations: a sent tensor is let go once delivered (it was
// kept to the end of the run: 4 microbatches x 4 MB more per iteration on each worker here). A run's
// peak varies from run to run whatever its length (worker 0: 98-116 MB over runs of 2 to 64
// iterations; 27 MB apart under a parallel ctest), so the runs differ by 18 iterations: keeping a
// quarter of what they send would add 72 MB (keeping every send: about 400 MB).
TEST(Runs, MemoryStaysFlatOverIterations) {
  auto peaks = [](int iterations) {
    testing::TempDir dir;
    Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
    plan.microbatch_size = 16384;  // 64 wide: each activation and gradient sent is 4 MB
    // Under AddressSanitizer freed memory waits in a quarantine (256 MB) before it is reused, so the
    // resident set would grow with every iteration until the quarantine is full: the workers run
    // without it here (the variable means nothing to a build without the sanitizer).
    const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations " + std::to_string(iterations),
                                   "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0\"");
    EXPECT_EQ(run.result.exit_code, 0) << run.result.output;
    const Trace trace = load_trace(dir.file("trace.jsonl"));
    return trace.header.extra.at("peak_memory_bytes").get<std::vector<double>>();
  };
  const std::vector<double> short_run = peaks(2), long_run = peaks(20);
  const double sent_in_eighteen_iterations_bytes = 18 * 4 * 4.0 * 1024 * 1024;
  ASSERT_EQ(short_run.size(), 2u);
  ASSERT_EQ(long_run.size(), 2u);
  for (int worker = 0; worker < 2; ++worker) {
    ASSERT_GT(short_run[worker], 0.0);
    EXPECT_LT(long_run[worker] - short_run[worker], sent_in_eighteen_iterations_bytes / 4)
        << "worker " << worker << ": " << short_run[worker] / 1048576 << " MB in 2 iterations, " << long_run[worker] / 1048576 << " in 20";
  }
}

// Each worker process records its CPU over the measured iterations and its compute actions' within it:
// both positive, the compute's no more than the process's nor than the wall time of its compute
// actions there (a thread runs at most as long as it waits).
TEST(Runs, EachWorkerRecordsItsCpuBesideItsComputes) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 4");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const Trace trace = load_trace(dir.file("trace.jsonl"));
  // The launcher records the cores the processes had (this process's, as they inherit its mask).
  const int cores = trace.header.extra.at("cores").get<int>();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const auto process = trace.header.extra.at("process_cpu_s").get<std::vector<double>>();
  const auto compute = trace.header.extra.at("compute_cpu_s").get<std::vector<double>>();
  ASSERT_EQ(process.size(), 2u);
  ASSERT_EQ(compute.size(), 2u);
  std::vector<double> computing_s(2, 0.0);
  for (const TraceEvent& e : trace.events) {
    if (e.iteration >= trace.header.warmup_iterations && (is_compute(e.kind) || e.kind == ActionKind::OPTIMIZER_STEP)) {
      computing_s[e.worker] += e.end_s - e.start_s;
    }
  }
  for (int worker = 0; worker < 2; ++worker) {
    EXPECT_GT(compute[worker], 0.0) << worker;
    EXPECT_LE(compute[worker], process[worker]) << worker;
    EXPECT_LE(compute[worker], computing_s[worker] + 1e-3) << worker;
  }
  // run prints each worker's share of its computing time on a core: its compute CPU over that time.
  const std::size_t table = run.result.output.find("  worker  bubble   on a core while computing\n");
  ASSERT_NE(table, std::string::npos) << run.result.output;
  std::istringstream rows(run.result.output.substr(table));
  std::string header;
  std::getline(rows, header);
  for (int worker = 0; worker < 2; ++worker) {
    std::string row;
    std::getline(rows, row);
    int printed_worker = -1;
    double bubble_percent = -1.0, on_core_percent = -1.0;
    ASSERT_EQ(std::sscanf(row.c_str(), "%d %lf%% %lf%%", &printed_worker, &bubble_percent, &on_core_percent), 3) << row;
    EXPECT_EQ(printed_worker, worker);
    EXPECT_NEAR(on_core_percent, 100 * compute[worker] / computing_s[worker], 0.051) << row;
  }
}

TEST(Faults, ADeadWorkerStopsEveryoneNamingItAndLeavesNoProcess) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 1}, {0}}, {{2, 3}, {1}}, {{4, 6}, {2}}}, 3);
  const auto start = std::chrono::steady_clock::now();
  const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 50 --timeout 5 --fault die:1:7");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("worker 1 exited with status 3"));
  EXPECT_THAT(run.result.output, HasSubstr("peer worker 1 is dead or hung"));
  EXPECT_LT(seconds, 15.0);
  EXPECT_NE(testing::run_command("pgrep -f '[r]un --plan " + dir.file("plan.json") + "'").exit_code, 0) << "a worker is still running";
}

TEST(Faults, AHungWorkerIsNamedAfterTheTimeoutAndKilled) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  const auto start = std::chrono::steady_clock::now();
  const RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 50 --timeout 2 --fault hang:1:5");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("peer worker 1 is dead or hung"));
  EXPECT_LT(seconds, 20.0);
  EXPECT_NE(testing::run_command("pgrep -f '[r]un --plan " + dir.file("plan.json") + "'").exit_code, 0) << "a worker is still running";
}

TEST(Checkpoints, ResumingGivesTheWeightsOfAnUninterruptedRun) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 2");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 2 --resume");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_LE(max_difference(checkpointed(run, plan, 2), plan, reference(4, 4)), 1e-5);
  // The resumed run's trace counts its own 2 iterations (once stamped 2 and 3, past the header's
  // count, so it reported 0 s per iteration) and says where they are in the training.
  const Trace resumed = load_trace(dir.file("trace.jsonl"));
  EXPECT_EQ(resumed.header.extra.value("first_iteration", 0), 2);
  for (const TraceEvent& e : resumed.events) EXPECT_TRUE(e.iteration >= 0 && e.iteration < 2) << e.iteration;
  EXPECT_GT(trace_metrics(resumed).median_iteration_s, 0.0);
  // Only the newest checkpoint's tensors remain, and no temporary file.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run.directory)) {
    EXPECT_EQ(entry.path().extension() == ".tmp", false) << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 6);  // worker<w>.json, worker<w>.iteration3.pt and .iteration4.pt (the newest two)
}

int checkpoint_iteration(const RunResult& run, int worker) {
  return json_fields::read_file(run.directory + "/worker" + std::to_string(worker) + ".json").at("iteration");
}

TEST(Checkpoints, AWorkerKilledMidIterationThenRestartedGivesTheUninterruptedWeights) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  // Worker 1 dies halfway through iteration 3 (its actions count across iterations).
  const std::size_t per_iteration = lower_schedule(generate_schedule("1f1b", pipeline_shape(plan, 1), 4)).workers[1].size();
  const std::string fault = "die:1:" + std::to_string(2 * per_iteration + per_iteration / 2);
  RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 4 --timeout 5 --fault " + fault);
  ASSERT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("worker 1 exited with status 3"));
  EXPECT_EQ(checkpoint_iteration(run, 0), 2);
  EXPECT_EQ(checkpoint_iteration(run, 1), 2);
  run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 2 --resume");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_LE(max_difference(checkpointed(run, plan, 2), plan, reference(4, 4)), 1e-5);
}

TEST(Checkpoints, DyingWhileSavingLeavesTheLastCompleteCheckpointAndEveryoneResumesFromIt) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  // Worker 0 dies with iteration 3's tensors only in the temporary file. It had received worker 1's
  // last gradient of iteration 3, so worker 1 finished iteration 3 and saved it.
  RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 4 --timeout 5 --fault diesave:0:3");
  ASSERT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("dying on purpose while saving iteration 3"));
  EXPECT_TRUE(std::filesystem::exists(run.directory + "/worker0.iteration3.pt.tmp"));
  EXPECT_FALSE(std::filesystem::exists(run.directory + "/worker0.iteration3.pt"));
  EXPECT_EQ(checkpoint_iteration(run, 0), 2);  // the JSON still names the complete iteration-2 tensors
  EXPECT_EQ(checkpoint_iteration(run, 1), 3);
  // Both resume from iteration 2, the newest both saved: worker 1 from the checkpoint it kept before.
  run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 2 --resume");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(checkpoint_iteration(run, 0), 4);
  EXPECT_EQ(checkpoint_iteration(run, 1), 4);
  EXPECT_LE(max_difference(checkpointed(run, plan, 2), plan, reference(4, 4)), 1e-5);
}

TEST(Checkpoints, CheckpointsOfDifferentRunsAreRefused) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 4");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  // Worker 1's checkpoint from a 1-iteration run: iterations 4 and 3 against 1.
  const std::string kept = run.directory + "-kept";
  std::filesystem::rename(run.directory, kept);
  run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 1");
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  std::filesystem::copy_file(kept + "/worker0.json", run.directory + "/worker0.json",
                             std::filesystem::copy_options::overwrite_existing);
  for (const char* file : {"/worker0.iteration3.pt", "/worker0.iteration4.pt"}) {
    std::filesystem::copy_file(kept + file, run.directory + file);
  }
  run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 1 --resume --timeout 5");
  EXPECT_EQ(run.result.exit_code, 1) << run.result.output;
  EXPECT_THAT(run.result.output, HasSubstr("this worker holds iterations 4 and 3, the others resume from iteration 1"));
  EXPECT_THAT(run.result.output, HasSubstr("not from the same run"));
}

// A damaged newest checkpoint on one worker (a flipped byte, a truncated file, a missing file): its
// checksum says so, every worker resumes from the previous iteration, which all hold intact, says
// why, and the weights after training on are those of an uninterrupted run.
TEST(Checkpoints, ADamagedNewestCheckpointFallsBackToThePreviousOneOnEveryWorker) {
  for (const std::string damage : {"flip", "truncate", "remove"}) {
    testing::TempDir dir;
    const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
    RunResult run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 4");
    ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
    const std::string newest = run.directory + "/worker0.iteration4.pt";
    const auto size = std::filesystem::file_size(newest);
    if (damage == "flip") {
      std::fstream file(newest, std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(static_cast<std::streamoff>(size / 2));
      const char byte = static_cast<char>(file.get());
      file.seekp(static_cast<std::streamoff>(size / 2));
      file.put(static_cast<char>(byte ^ 0x5a));
    } else if (damage == "truncate") {
      std::filesystem::resize_file(newest, size / 3);
    } else {
      std::filesystem::remove(newest);
    }
    run = run_plan(dir, plan, "-s 1f1b -m 4 --iterations 1 --resume --timeout 10");
    ASSERT_EQ(run.result.exit_code, 0) << damage << ": " << run.result.output;
    EXPECT_THAT(run.result.output, HasSubstr("worker 0: resuming from iteration 3, not from its newest checkpoint (iteration 4)"))
        << damage;
    EXPECT_THAT(run.result.output, HasSubstr(damage == "remove" ? "is missing" : "corrupt or torn (checksum mismatch)")) << damage;
    EXPECT_THAT(run.result.output, HasSubstr("worker 1: resuming from iteration 3")) << damage;
    EXPECT_THAT(run.result.output, Not(HasSubstr("PytorchStreamReader"))) << damage;
    EXPECT_LE(max_difference(checkpointed(run, plan, 2), plan, reference(4, 4)), 1e-5) << damage;
  }
}

TEST(Faults, AMalformedFaultIsRefused) {
  testing::TempDir dir;
  const Plan plan = mlp_plan({{{0, 3}, {0}}, {{4, 6}, {1}}}, 2);
  for (const char* fault : {"die:0", "explode:0:3", "die:0:3x", "die:-1:3"}) {
    const RunResult run = run_plan(dir, plan, std::string("-s 1f1b -m 4 --iterations 1 --fault ") + fault);
    EXPECT_EQ(run.result.exit_code, 1) << fault;
    EXPECT_THAT(run.result.output, HasSubstr("--fault")) << fault;
    EXPECT_THAT(run.result.output, HasSubstr("is not a fault")) << fault;
  }
}

// Runs as "configuration.run ...", e.g. "0.0 1.0 0.1".
std::string runs_text(const std::vector<exec::ScheduledRun>& runs) {
  std::string result;
  for (const exec::ScheduledRun& run : runs) {
    if (!result.empty()) result += ' ';
    result += std::to_string(run.configuration);
    result += '.';
    result += std::to_string(run.run);
  }
  return result;
}

// The matrix's order of runs: 3 rounds over a base and 4 other configurations, the base 6 times, twice
// a round (before the first configuration and half-way); every other configuration once a round in
// order; runs numbered from 0 per configuration. With 4 base runs the first round gets two, the others
// one; with 2, the last round none.
TEST(ValidationMatrix, RunOrderSpreadsTheBasesRunsThroughTheRounds) {
  auto text = runs_text;
  EXPECT_EQ(text(exec::run_order(5, 3, 6)), "0.0 1.0 2.0 0.1 3.0 4.0 0.2 1.1 2.1 0.3 3.1 4.1 0.4 1.2 2.2 0.5 3.2 4.2");
  EXPECT_EQ(text(exec::run_order(5, 3, 4)), "0.0 1.0 2.0 0.1 3.0 4.0 0.2 1.1 2.1 3.1 4.1 0.3 1.2 2.2 3.2 4.2");
  EXPECT_EQ(text(exec::run_order(5, 3, 2)), "0.0 1.0 2.0 3.0 4.0 0.1 1.1 2.1 3.1 4.1 1.2 2.2 3.2 4.2");
  EXPECT_EQ(text(exec::run_order(1, 2, 3)), "0.0 0.1 0.2");
  EXPECT_THROW(exec::run_order(5, 0, 6), Error);
  EXPECT_THROW(exec::run_order(5, 3, 0), Error);
}

// Runs taken again for costlier compute: those over the machine's usual state (the lower quartile of
// the base's known figures, position n / 4 in increasing order) times 1 + tolerance, the base's own
// included; never an unknown figure; none when no base figure is known.
TEST(ValidationMatrix, CostlierRunsAreThoseOverTheUsualStateByTheTolerance) {
  const std::vector<std::vector<double>> figures = {
      {1.02, -1.0, 0.98, 1.30, 1.00},  // the base: of 0.98, 1.00, 1.02, 1.30 the usual is 1.00 (position 1)
      {1.05, 1.18, -1.0},
      {1.17, 1.16, 1.33},
      {0.90}};
  auto text = [](const exec::CostlierRuns& costlier) { return runs_text(costlier.runs); };
  const exec::CostlierRuns at_15 = exec::costlier_runs(figures, 0.15);
  EXPECT_DOUBLE_EQ(at_15.usual_cpu_per_work, 1.00);
  EXPECT_EQ(text(at_15), "0.3 1.1 2.0 2.1 2.2");                            // over 1.15
  EXPECT_EQ(text(exec::costlier_runs(figures, 0.165)), "0.3 1.1 2.0 2.2");  // over 1.165
  EXPECT_EQ(text(exec::costlier_runs(figures, 0.04)), "0.3 1.0 1.1 2.0 2.1 2.2");
  EXPECT_EQ(text(exec::costlier_runs(figures, 0.40)), "");                  // over 1.40
  // Seven base runs, four in a slow state (their median 1.28 is a slow one) and one odd quick run: the
  // usual state is 1.00 (position 7 / 4 = 1), not the odd 0.90 nor the slow median; the slow four and
  // the configuration's 1.20 lie over 1.15.
  const exec::CostlierRuns slow_base = exec::costlier_runs({{0.90, 1.29, 1.00, 1.30, 1.01, 1.31, 1.28}, {1.12, 1.20}}, 0.15);
  EXPECT_DOUBLE_EQ(slow_base.usual_cpu_per_work, 1.00);
  EXPECT_EQ(text(slow_base), "0.1 0.3 0.5 0.6 1.1");
  // Two base runs: the usual is the quicker (position 0).
  const exec::CostlierRuns two = exec::costlier_runs({{1.60, 1.40}, {1.60, 1.70}}, 0.15);
  EXPECT_DOUBLE_EQ(two.usual_cpu_per_work, 1.40);
  EXPECT_EQ(text(two), "1.1");  // over 1.61
  EXPECT_EQ(exec::costlier_runs({{-1.0, -1.0}, {5.0}}, 0.15).usual_cpu_per_work, -1.0);
  EXPECT_EQ(text(exec::costlier_runs({{-1.0, -1.0}, {5.0}}, 0.15)), "");
  EXPECT_EQ(text(exec::costlier_runs({}, 0.15)), "");
}

}  // namespace
}  // namespace pipetwin
