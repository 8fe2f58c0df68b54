// The dynamic program's optimum equals an exhaustive search over every split of a small chain and
// every replica assignment, and the chain fast path equals the general DP on every input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "planner/error.h"
#include "planner/partition_optimizer.h"
#include "test_support.h"

namespace pipetwin {
namespace {

struct Chain {
  std::vector<double> time_ms, params, activations;
};

// Exhaustive search, written from the stage-level definition: stage s covers layers [a, b) on r
// replicas; its time is (T + 4(r-1)P/(B r)) / r; every stage but the first also waits for its input
// activation 2 a_in/(B r) and, unless it is the last, its output 2 a_out/(B r). Memory: a stage
// holds max(1, ceil((W - workers up to and including it) / r)) copies of its parameters and activations.
double brute_force(const Chain& chain, int workers, double bandwidth, bool straight, double memory_limit,
                   bool activation_transfer) {
  const int n = static_cast<int>(chain.time_ms.size());
  double best = INFINITY;
  std::vector<int> cuts;  // stage boundaries
  std::vector<int> replicas;
  std::function<void(int, int)> place = [&](int stage, int used) {
    const int stages = static_cast<int>(cuts.size()) - 1;
    if (stage == stages) {
      if (used != workers) return;
      double pipeline = 0.0;
      int cumulative = 0;
      for (int s = 0; s < stages; ++s) {
        double compute = 0, params = 0, activations = 0;
        for (int l = cuts[s]; l < cuts[s + 1]; ++l) {
          compute += chain.time_ms[l] / 1000.0;
          params += chain.params[l];
          activations += chain.activations[l];
        }
        const int r = replicas[s];
        cumulative += r;
        const double copies = std::max(1.0, std::ceil(double(workers - cumulative) / r));
        if (copies * (params + activations) > memory_limit) return;
        double time = (compute + 4.0 * (r - 1) * params / (bandwidth * r)) / r;
        if (activation_transfer && s > 0) time = std::max(time, 2.0 * chain.activations[cuts[s] - 1] / (bandwidth * r));
        if (activation_transfer && s > 0 && s + 1 < stages) {
          time = std::max(time, 2.0 * chain.activations[cuts[s + 1] - 1] / (bandwidth * r));
        }
        pipeline = std::max(pipeline, time);
      }
      best = std::min(best, pipeline);
      return;
    }
    const int max_r = straight ? 1 : workers - used;
    for (int r = 1; r <= max_r; ++r) {
      replicas[stage] = r;
      place(stage + 1, used + r);
    }
  };
  for (int mask = 0; mask < (1 << (n - 1)); ++mask) {
    cuts = {0};
    for (int l = 1; l < n; ++l) {
      if (mask & (1 << (l - 1))) cuts.push_back(l);
    }
    cuts.push_back(n);
    replicas.assign(cuts.size() - 1, 0);
    place(0, 0);
  }
  return best;
}

Chain random_chain(std::mt19937& random, int layers) {
  std::uniform_real_distribution<double> time(0.1, 10.0), params(0.0, 5e7), activations(1e5, 5e7);
  std::uniform_int_distribution<int> zero(0, 4);
  Chain chain;
  for (int l = 0; l < layers; ++l) {
    chain.time_ms.push_back(time(random));
    chain.params.push_back(zero(random) == 0 ? 0.0 : params(random));
    chain.activations.push_back(activations(random));
  }
  return chain;
}

TEST(OptimizerBruteForce, DynamicProgramEqualsExhaustiveSearchOnSmallChains) {
  std::mt19937 random(20261202);
  std::uniform_int_distribution<int> layer_count(1, 8), worker_count(1, 4), coin(0, 1);
  std::uniform_real_distribution<double> log_bandwidth(8.0, 11.0);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Chain chain = random_chain(random, layer_count(random));
    const int workers = worker_count(random);
    const double bandwidth = std::pow(10.0, log_bandwidth(random));
    OptimizerOptions options;
    options.straight = trial % 5 == 0;
    options.activation_transfer = coin(random) == 1;
    if (trial % 3 == 0) options.memory_limit_bytes = 1.2e8;
    options.use_chain_fast_path = coin(random) == 1;
    const double expected =
        brute_force(chain, workers, bandwidth, options.straight,
                    options.memory_limit_bytes.value_or(INFINITY), options.activation_transfer);
    const Profile profile = testing::chain_profile(chain.time_ms, chain.params, chain.activations);
    const Cluster cluster = testing::simple_cluster({{workers, bandwidth}});
    if (std::isinf(expected)) {
      EXPECT_THROW(optimize_partition(profile, cluster, options), Error) << "trial " << trial;
      ++infeasible;
      continue;
    }
    const PartitionResult result = optimize_partition(profile, cluster, options);
    EXPECT_NEAR(result.pipeline_time_s, expected, 1e-12 * expected) << "trial " << trial;
    ++compared;
  }
  EXPECT_GT(compared, 250);
  EXPECT_GT(infeasible, 5);
}

TEST(OptimizerBruteForce, ChainFastPathGivesTheSamePlanAsTheGeneralDp) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> layer_count(2, 40), count(1, 5), coin(0, 1);
  for (int trial = 0; trial < 60; ++trial) {
    const Chain chain = random_chain(random, layer_count(random));
    const Profile profile = testing::chain_profile(chain.time_ms, chain.params, chain.activations);
    std::vector<std::pair<int, double>> levels{{count(random), 2e10}};
    if (coin(random)) levels.push_back({count(random), 3e9});
    if (coin(random)) levels.push_back({count(random), 1e9});
    const Cluster cluster = testing::simple_cluster(levels);
    OptimizerOptions fast, general;
    fast.activation_transfer = general.activation_transfer = coin(random) == 1;
    if (trial % 4 == 0) fast.memory_limit_bytes = general.memory_limit_bytes = 3e8;
    general.use_chain_fast_path = false;
    PartitionResult a, b;
    bool a_failed = false, b_failed = false;
    try { a = optimize_partition(profile, cluster, fast); } catch (const Error&) { a_failed = true; }
    try { b = optimize_partition(profile, cluster, general); } catch (const Error&) { b_failed = true; }
    ASSERT_EQ(a_failed, b_failed) << "trial " << trial;
    if (a_failed) continue;
    EXPECT_EQ(a.pipeline_time_s, b.pipeline_time_s) << "trial " << trial;
    EXPECT_EQ(a.configuration, b.configuration) << "trial " << trial;
    ASSERT_EQ(a.stages.size(), b.stages.size());
    for (std::size_t s = 0; s < a.stages.size(); ++s) {
      EXPECT_EQ(a.stages[s].layers, b.stages[s].layers) << "trial " << trial;
      EXPECT_EQ(a.stages[s].devices, b.stages[s].devices) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace pipetwin
