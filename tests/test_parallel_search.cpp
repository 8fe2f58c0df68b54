// The tensor x pipeline x data parallel search: every configuration covers the cluster, the choice is
// the fastest that fits, the binding constraint is named, and the parts are checked by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "planner/error.h"
#include "planner/parallel_search.h"
#include "planner/profile_io.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_evaluator.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// A small Llama-like model: 8 blocks, h 1024, 16 heads (4 kv), f 4096, V 32000, s 1024.
TransformerSpec small_model() {
  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.name = "small";
  spec.layers = 8, spec.hidden = 1024, spec.ffn_hidden = 4096, spec.heads = 16, spec.kv_heads = 4;
  spec.vocabulary = 32000, spec.sequence_length = 1024;
  return spec;
}

// 2 servers x 4 GPUs: 100 GB/s inside, 10 GB/s between, peak 100 TFLOP/s at efficiency 0.5.
Cluster two_servers(double memory_bytes) {
  DeviceSpec device{"gpu", 1.0, 100e12, memory_bytes};
  return Cluster("two-servers", "", device,
                 {{"server", 4, "nvlink", 100e9, 1e-6}, {"cluster", 2, "ib", 10e9, 5e-6}}, "two-servers.json");
}

TEST(ParallelSearch, EveryConfigurationCoversTheClusterAndTheChoiceIsTheFastestThatFits) {
  ParallelSearchRequest request;
  request.model = small_model();
  request.global_batch = 16;
  const ParallelSearchResult roomy = search_parallel_plans(request, two_servers(1e12));
  ASSERT_GT(roomy.configurations.size(), 20u);
  for (const ParallelConfiguration& c : roomy.configurations) {
    EXPECT_EQ(c.tensor_parallel * c.stages * c.data_parallel, 8) << c.label();
    EXPECT_EQ(c.data_parallel * c.microbatch_size * c.microbatches, 16) << c.label();
    EXPECT_TRUE(c.schedule == "1f1b" || c.schedule == "gpipe" || c.data_parallel == 1) << c.label();
  }
  for (std::size_t i = 1; i < roomy.configurations.size(); ++i) {
    EXPECT_LE(roomy.configurations[i - 1].iteration_s, roomy.configurations[i].iteration_s);
  }
  EXPECT_EQ(roomy.best_fit, 0);  // 1 TB per GPU: everything fits, the fastest wins
  EXPECT_THAT(roomy.binding_constraint(), HasSubstr("time"));

  // With a memory between the least and the most any configuration needs, the choice is the
  // fastest that fits, and every faster one is over memory.
  double least = 1e300, most = 0;
  for (const ParallelConfiguration& c : roomy.configurations) {
    least = std::min(least, c.peak_memory_bytes), most = std::max(most, c.peak_memory_bytes);
  }
  const double limit = (least + roomy.configurations.front().peak_memory_bytes) / 2;
  ASSERT_LT(limit, roomy.configurations.front().peak_memory_bytes);
  const ParallelSearchResult tight = search_parallel_plans(request, two_servers(limit));
  ASSERT_GE(tight.best_fit, 1);
  EXPECT_LE(tight.configurations[tight.best_fit].peak_memory_bytes, limit);
  for (int i = 0; i < tight.best_fit; ++i) EXPECT_GT(tight.configurations[i].peak_memory_bytes, limit);
  EXPECT_THAT(tight.binding_constraint(), HasSubstr("memory: the fastest, " + tight.configurations[0].label()));

  const ParallelSearchResult none = search_parallel_plans(request, two_servers(least / 2));
  EXPECT_EQ(none.best_fit, -1);
  EXPECT_THAT(none.binding_constraint(), HasSubstr("nothing fits"));
}

// t = 1, p = 1, d = 2 on one server of 2: the iteration is one GPU's forward and backward of its
// microbatches plus a ring all-reduce of all the gradients between the two: 2 (1/2) S / B + 2 latencies.
TEST(ParallelSearch, DataParallelAllReduceByHand) {
  ParallelSearchRequest request;
  request.model = small_model();
  request.global_batch = 4;
  request.tensor_parallel = {1};
  request.microbatch_sizes = {1};
  request.recomputation = {Recomputation::none};
  request.schedules = {"1f1b"};
  const Cluster pair("pair", "", DeviceSpec{"gpu", 1.0, 100e12, 1e12}, {{"server", 2, "nvlink", 100e9, 1e-6}}, "p.json");
  const ParallelSearchResult result = search_parallel_plans(request, pair);
  ASSERT_EQ(result.configurations.size(), 2u);  // p = 1 (d = 2) and p = 2 (d = 1)
  const auto single = std::find_if(result.configurations.begin(), result.configurations.end(),
                                   [](const auto& c) { return c.stages == 1; });
  ASSERT_NE(single, result.configurations.end());
  TransformerSpec spec = request.model;
  const Profile profile = transformer_profile(spec, Recomputation::none, {100e12, 0.5, 0.0});
  double param_bytes = 0, compute_s = 0;
  for (const Layer& layer : profile.layers()) param_bytes += layer.param_bytes, compute_s += (layer.fwd_ms + layer.bwd_ms) / 1000;
  EXPECT_NEAR(single->allreduce_s, 2 * 0.5 * param_bytes / 100e9 + 2 * 1e-6, 1e-12);
  EXPECT_NEAR(single->iteration_s, 2 * compute_s + single->allreduce_s, 1e-9);  // 2 microbatches per replica
  EXPECT_EQ(single->microbatches, 2);
}

// A measured profile at half its batch: times, FLOPs and activations halve, parameters stay.
TEST(ParallelSearch, AProfileAtASmallerMicrobatchScalesItsTimesAndActivations) {
  const Profile vgg16 = load_profile(testing::pipedream_profile("vgg16"));
  const Profile half = profile_at_microbatch(vgg16, 32);
  ASSERT_EQ(half.layer_count(), vgg16.layer_count());
  EXPECT_EQ(half.batch_size(), 32);
  EXPECT_DOUBLE_EQ(half.total_fwd_ms(), vgg16.total_fwd_ms() / 2);
  EXPECT_DOUBLE_EQ(half.total_bwd_ms(), vgg16.total_bwd_ms() / 2);
  EXPECT_DOUBLE_EQ(half.layer(1).activation_bytes, vgg16.layer(1).activation_bytes / 2);
  EXPECT_DOUBLE_EQ(half.total_param_bytes(), vgg16.total_param_bytes());
  EXPECT_EQ(half.edges(), vgg16.edges());
  EXPECT_THROW(profile_at_microbatch(vgg16, 0), Error);
}

// PipeDream's VGG-16 on Cluster-A (16 V100 of 16 GB): PipeDream's own plan needs 29.6 GB on its first
// stage; the search over stage counts, data parallelism and microbatch sizes of 64, 32, 16 and 8
// returns one that fits, without tensor parallelism; recomputation none or full (every stage: it has
// no attention core to recompute selectively), full trading a forward per microbatch for memory.
TEST(ParallelSearch, AMeasuredProfileGetsAPlanThatFits) {
  ParallelSearchRequest request;
  request.measured = load_profile(testing::pipedream_profile("vgg16"));
  request.global_batch = 1024;
  request.microbatch_sizes = {64, 32, 16, 8};
  const Cluster cluster = load_cluster(testing::platform("pipedream-cluster-a"));
  const ParallelSearchResult result = search_parallel_plans(request, cluster);
  ASSERT_GE(result.best_fit, 0);
  const ParallelConfiguration& chosen = result.configurations[result.best_fit];
  EXPECT_LE(chosen.peak_memory_bytes, 16e9);
  std::map<std::string, const ParallelConfiguration*> none;  // by label less the mode
  for (const ParallelConfiguration& c : result.configurations) {
    EXPECT_EQ(c.tensor_parallel, 1);
    EXPECT_NE(c.recomputation, Recomputation::selective);
    if (c.replicas.empty()) {
      EXPECT_EQ(c.stages * c.data_parallel, 16);
    } else {  // PipeDream's own plan at this microbatch size ("9-3-1-1-1-1" at 8 and 16 images)
      int gpus = 0;
      for (std::size_t at = 0; at < c.replicas.size(); at = c.replicas.find('-', at) + 1) {
        gpus += std::stoi(c.replicas.substr(at));
        if (c.replicas.find('-', at) == std::string::npos) break;
      }
      EXPECT_EQ(gpus, 16) << c.label();
    }
    if (c.recomputation == Recomputation::none) none[c.label()] = &c;
  }
  int compared = 0;
  for (const ParallelConfiguration& c : result.configurations) {
    if (c.recomputation != Recomputation::full || c.stages < 2) continue;
    std::string label = c.label();
    label.replace(label.find(" full "), 6, " none ");
    const ParallelConfiguration& kept = *none.at(label);
    EXPECT_GT(c.iteration_s, kept.iteration_s) << label;       // one more forward per microbatch
    // Two stages: the first (the busiest) keeps nothing per microbatch in flight, its input being the
    // data. (With many short stages a stage's input can outweigh its own activations: no rule there.)
    if (c.stages == 2) {
      EXPECT_LT(c.peak_memory_bytes, kept.peak_memory_bytes) << label;
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
  const ParallelPlan plan = parallel_plan(request, cluster, chosen);
  EXPECT_EQ(plan.profile.batch_size(), chosen.microbatch_size);
  EXPECT_EQ(plan.plan.workers, 16);
  request.recomputation = {Recomputation::full};
  const ParallelConfiguration recomputed = search_parallel_plans(request, cluster).configurations.front();
  EXPECT_TRUE(parallel_plan(request, cluster, recomputed).plan.stages.front().recomputed);  // the written plan too
  request.recomputation = {Recomputation::selective};
  EXPECT_THROW(search_parallel_plans(request, cluster), Error);
  request.recomputation = {Recomputation::none};
  request.tensor_parallel = {2};
  EXPECT_THROW(search_parallel_plans(request, cluster), Error);
}

// PipeDream's own plan of VGG-16 on Cluster-A at 64 images per microbatch replicates its stages
// unequally ("12-2-1-1": its first stage on 12 GPUs) and is searched beside the uniform splits: 16 GPUs
// in all, its plan written as the search judged it (the same time on paper over the outermost link),
// its all-reduce part inside the iteration; asked for other stage counts, it is left out.
TEST(ParallelSearch, PipeDreamsUnequalReplicationIsSearchedWhereItApplies) {
  ParallelSearchRequest request;
  request.measured = load_profile(testing::pipedream_profile("vgg16"));
  request.global_batch = 960;
  request.microbatch_sizes = {64};
  request.recomputation = {Recomputation::none};
  request.schedules = {"1f1b", "gpipe"};
  const Cluster cluster = load_cluster(testing::platform("pipedream-cluster-a"));
  const ParallelSearchResult result = search_parallel_plans(request, cluster);
  const std::string expected = optimize_partition(profile_at_microbatch(*request.measured, 64), cluster, {}).configuration;
  ASSERT_EQ(expected, "12-2-1-1");
  int pipedream = 0;
  for (const ParallelConfiguration& c : result.configurations) {
    if (c.replicas.empty()) continue;
    ++pipedream;
    EXPECT_EQ(c.replicas, expected);
    EXPECT_EQ(c.stages, 4);
    EXPECT_EQ(c.microbatches, 960 / 64);
    EXPECT_THAT(c.label(), ::testing::HasSubstr(" r12-2-1-1 "));
    EXPECT_GT(c.allreduce_s, 0.0);
    EXPECT_LT(c.allreduce_s, c.iteration_s);
    const ParallelPlan written = parallel_plan(request, cluster, c);
    EXPECT_EQ(written.plan.configuration, expected);
    EXPECT_EQ(written.plan.workers, 16);
    ScheduleRequest schedule;
    schedule.name = c.schedule;
    schedule.microbatches = c.microbatches;
    const ClusterLevel& outermost = cluster.levels().back();
    const Evaluation again = evaluate_schedule(build_schedule(written.plan, schedule).schedule,
                                               stage_times_from_plan(written.plan),
                                               {outermost.bandwidth_bytes_per_s, outermost.latency_s});
    EXPECT_DOUBLE_EQ(again.makespan_s, c.iteration_s) << c.label();
  }
  EXPECT_EQ(pipedream, 2);  // 1f1b and gpipe
  EXPECT_THAT(parallel_search_csv(result), ::testing::HasSubstr(",12-2-1-1\n"));
  request.stages = {16};  // a stage count PipeDream's plan does not have: left out
  const ParallelSearchResult sixteen = search_parallel_plans(request, cluster);
  ASSERT_FALSE(sixteen.configurations.empty());
  for (const ParallelConfiguration& c : sixteen.configurations) EXPECT_TRUE(c.replicas.empty()) << c.label();
}

TEST(ParallelSearch, ImpossibleRequestsNameTheOption) {
  ParallelSearchRequest request;
  request.model = small_model();
  request.global_batch = 3;
  request.tensor_parallel = {4};
  request.stages = {1};  // t 4 x p 1 on 8 GPUs: d = 2 replicas cannot share 3 sequences
  try {
    search_parallel_plans(request, two_servers(1e12));
    FAIL() << "an odd batch over 2 replicas was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--global-batch");
  }
  const auto field_of = [&](const ParallelSearchRequest& r) {
    try {
      search_parallel_plans(r, two_servers(1e12));
    } catch (const Error& error) {
      return error.context().field;
    }
    return std::string("accepted");
  };
  request.global_batch = 16;
  request.stages = {9};  // 8 blocks
  EXPECT_EQ(field_of(request), "--stages");
  request.stages = {1};
  request.tensor_parallel = {3};  // 16 heads, and a server of 4
  EXPECT_EQ(field_of(request), "--tp");
  request.tensor_parallel = {8};  // more than a server's 4 GPUs
  EXPECT_EQ(field_of(request), "--tp");
  request.tensor_parallel = {4};
  EXPECT_EQ(field_of(request), "accepted");
  request.global_batch = 0;
  EXPECT_EQ(field_of(request), "--global-batch");
}

}  // namespace
}  // namespace pipetwin
