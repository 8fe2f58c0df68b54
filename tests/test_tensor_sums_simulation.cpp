// Tensor-parallel sums on the simulated links: a worker of t GPUs, its sums rings among them, every
// rank's share of the pipeline's messages its own flow. Hand-computed times; each simulation runs in a
// child process (SimGrid's engine runs once per process).
#include <gtest/gtest.h>

#include "planner/schedule_evaluator.h"
#include "planner/transformer_model.h"
#include "sim/simulation.h"
#include "sim_support.h"

namespace pipetwin {
namespace {

constexpr double kBandwidth = 100e9, kLatency = 1e-6;  // every GPU's link to its server's switch

// One server of 4 GPUs: two workers of 2 tensor-parallel GPUs each.
Cluster four_gpus() {
  return Cluster("four-gpus", "", DeviceSpec{"gpu", 1.0, 0.0, 80e9}, {{"server", 4, "nvlink", kBandwidth, kLatency}}, "four-gpus.json");
}

// Two forward and two backward sums of 4 MB per microbatch on each stage; their paper time, by hand:
// a ring of t = 2 is 2(t-1)/t x 4 MB / 100 GB/s + 2(t-1) x 1 us = 42 us each, 84 us a pass
// (the route between two GPUs of the server is two links of half its latency each).
constexpr double kOneSum_s = 4e6 / kBandwidth + 2 * kLatency, kPassSums_s = 2 * kOneSum_s;

Plan two_stages_of_two_gpus(double output_bytes) {
  Plan plan = testing::straight_plan(2, 1e-3, 2e-3, output_bytes);
  for (PlanStage& stage : plan.stages) {
    stage.tensor_sums.ranks = 2;
    stage.tensor_sums.forward = {2, 8e6, kPassSums_s};
    stage.tensor_sums.backward = {2, 8e6, kPassSums_s};
  }
  return plan;
}

sim::SimulationResult simulate(const Plan& plan, int microbatches, const std::string& tensor_sums = "links") {
  sim::SimulationConfig config{plan, four_gpus()};
  config.tensor_sums = tensor_sums;
  config.schedule_name = "1f1b";
  config.microbatches = microbatches;
  config.iterations = 1;
  config.warmup_iterations = 0;
  return sim::simulate_in_subprocess(config);
}

double on_paper_s(const Plan& plan, int microbatches) {
  ScheduleRequest request;
  request.name = "1f1b";
  request.microbatches = microbatches;
  return evaluate_schedule(build_schedule(plan, request).schedule, stage_times_from_plan(plan), {kBandwidth, kLatency}).makespan_s;
}

// With nothing else on the links, every sum takes its paper time and the iteration the evaluator's.
TEST(TensorSumsSimulation, AloneOnTheLinksTheyTakeTheirPaperTime) {
  const int m = 4;
  const Plan plan = two_stages_of_two_gpus(0.0);
  const auto result = simulate(plan, m);
  int sums = 0;
  for (const TraceEvent& e : result.trace.events) {
    if (e.kind != ActionKind::TENSOR_ALLREDUCE) continue;
    ++sums;
    EXPECT_NEAR(e.end_s - e.start_s, kPassSums_s, 1e-12) << e.worker << " " << e.microbatch;
    EXPECT_DOUBLE_EQ(e.bytes, 8e6);
  }
  EXPECT_EQ(sums, 2 * m * 2);  // 2 workers x m microbatches x (F, B)
  EXPECT_EQ(result.trace.header.extra.value("tensor_parallel", 0), 2);
  EXPECT_NEAR(result.summary.makespan_s, on_paper_s(plan, m), 1e-12);
  // --tensor-sums paper: the profile's time, no flows, the same here.
  const auto paper = simulate(plan, m, "paper");
  EXPECT_NEAR(paper.summary.makespan_s, result.summary.makespan_s, 1e-12);
  EXPECT_LT(paper.summary.messages, result.summary.messages);
  EXPECT_EQ(paper.trace.header.extra.value("tensor_sums", ""), "paper");
}

// Activations of 40 MB per rank (0.4 ms a message) arrive on a GPU's link while its worker sums over
// the same link: the sums take longer than alone, and the iteration longer than on paper.
TEST(TensorSumsSimulation, TheyShareTheGpusLinksWithThePipelinesMessages) {
  const int m = 4;
  const Plan plan = two_stages_of_two_gpus(40e6);
  const auto result = simulate(plan, m);
  double longest_s = 0;
  for (const TraceEvent& e : result.trace.events) {
    if (e.kind == ActionKind::TENSOR_ALLREDUCE) longest_s = std::max(longest_s, e.end_s - e.start_s);
  }
  EXPECT_GT(longest_s, kPassSums_s * 1.01);
  EXPECT_GT(result.summary.makespan_s, on_paper_s(plan, m) + 1e-6);
  // On paper the sums see no other traffic: faster than on the links.
  EXPECT_LT(simulate(plan, m, "paper").summary.makespan_s, result.summary.makespan_s - 1e-6);
}

// A cluster of tensor-parallel groups (as pipetwin model --tp writes it) is taken apart into its GPUs;
// a cluster of GPUs is taken as it is.
TEST(TensorSumsSimulation, GroupsAreTakenApartIntoTheirGpus) {
  const Cluster groups = tensor_parallel_groups(four_gpus(), 2);
  EXPECT_EQ(groups.worker_count(), 2);
  const Cluster gpus = sim::tensor_parallel_gpus(groups, 2);
  EXPECT_EQ(gpus.worker_count(), 4);
  EXPECT_EQ(gpus.name(), "four-gpus");
  EXPECT_EQ(sim::tensor_parallel_gpus(four_gpus(), 2).worker_count(), 4);
  EXPECT_EQ(sim::tensor_parallel_gpus(groups, 1).worker_count(), 2);
  // The plan of two workers on the groups' cluster simulates as on the GPUs.
  sim::SimulationConfig config{two_stages_of_two_gpus(0.0), groups};
  config.schedule_name = "1f1b";
  config.microbatches = 4;
  config.iterations = 1;
  config.warmup_iterations = 0;
  EXPECT_NEAR(sim::simulate_in_subprocess(config).summary.makespan_s, on_paper_s(config.plan, 4), 1e-12);
}

}  // namespace
}  // namespace pipetwin
