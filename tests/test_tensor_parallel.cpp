// Tensor parallelism of the gpt zoo model (exec/tensor_parallel): which slice each rank holds, and
// gradient equivalence: two processes, each one rank of a 2-way group over the run's transport (Gloo),
// end with the single-process model's loss and, for every parameter, their slice of its gradient.
#include <gtest/gtest.h>

#include <memory>

#include "exec/child_processes.h"
#include "exec/tensor_parallel.h"
#include "exec/transport.h"
#include "planner/error.h"

namespace pipetwin {
namespace {

using exec::Model;

torch::Tensor loss_of(Model& model, const exec::Batch& batch) {
  torch::Tensor x = batch.inputs;
  for (std::size_t l = 0; l < model.layer_count(); ++l) x = model.layer(l).forward(x);
  return model.loss(x, batch.labels);
}

// The largest difference between a tensor-parallel model's gradients and its slices of the whole
// model's, over the largest whole gradient (both models after backward).
double largest_gradient_difference(Model& parallel, Model& whole, int rank, int ranks) {
  double difference = 0.0, largest = 0.0;
  for (std::size_t l = 0; l < whole.layer_count(); ++l) {
    auto whole_parameters = whole.layer(l).ptr()->named_parameters();
    for (const auto& held : parallel.layer(l).ptr()->named_parameters()) {
      const torch::Tensor expected =
          exec::tensor_parallel_shard(held.key(), whole_parameters[held.key()].grad(), rank, ranks);
      EXPECT_EQ(held.value().grad().sizes(), expected.sizes()) << "layer " << l << " " << held.key();
      difference = std::max(difference, (held.value().grad() - expected).abs().max().item<double>());
      largest = std::max(largest, expected.abs().max().item<double>());
    }
  }
  return difference / largest;
}

// Rows of the QKV weight (all queries, then keys, then values, 32 rows each) that rank 1 of 2 holds:
// the second half of each; the output and down projections are cut by columns instead.
TEST(TensorParallelShard, CutsTheProjectionsAsMegatronDoes) {
  const torch::Tensor qkv = torch::arange(96).unsqueeze(1).repeat({1, 32}).to(torch::kFloat);
  const torch::Tensor held = exec::tensor_parallel_shard("qkv.weight", qkv, 1, 2);
  ASSERT_EQ(held.size(0), 48);
  for (int part = 0; part < 3; ++part) {
    for (int row = 0; row < 16; ++row) EXPECT_EQ(held[part * 16 + row][0].item<int>(), part * 32 + 16 + row);
  }
  const torch::Tensor down = torch::arange(128).unsqueeze(0).repeat({32, 1});
  const torch::Tensor down_held = exec::tensor_parallel_shard("down.weight", down, 0, 2);
  EXPECT_EQ(down_held.size(1), 64);
  EXPECT_EQ(down_held[0][63].item<int>(), 63);
  EXPECT_TRUE(exec::tensor_parallel_shard("norm1.weight", qkv, 1, 2).equal(qkv));
  EXPECT_TRUE(exec::tensor_parallel_shard("out.bias", qkv, 1, 2).equal(qkv));
}

// One rank alone is the whole model; one rank of two whose all-reduces do nothing is not (the check
// below can fail: without the group's sums, half the heads and half the MLP are missing).
TEST(TensorParallelModel, OneRankIsTheWholeModelAndHalfAModelIsNot) {
  auto reference = exec::make_model("gpt");
  const exec::Batch batch = reference->batch(7, 0, 4);
  int all_reduces = 0;
  auto alone = exec::tensor_parallel_model(exec::make_model("gpt"), 0, 1, [&](torch::Tensor&) { ++all_reduces; });
  const torch::Tensor loss = loss_of(*alone, batch), expected = loss_of(*reference, batch);
  loss.backward();
  expected.backward();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
  EXPECT_LT(largest_gradient_difference(*alone, *reference, 0, 1), 1e-5);
  EXPECT_EQ(all_reduces, 16);  // 4 blocks x (2 forward + 2 backward)

  auto half = exec::tensor_parallel_model(exec::make_model("gpt"), 0, 2, [](torch::Tensor&) {});
  torch::NoGradGuard no_grad;
  EXPECT_GT(std::abs(loss_of(*half, batch).item<double>() - expected.item<double>()), 1e-3);
}

TEST(TensorParallelModel, RefusesAModelWithoutBlocksAndADegreeThatDoesNotDivideTheHeads) {
  try {
    exec::tensor_parallel_model(exec::make_model("gpt"), 0, 3, [](torch::Tensor&) {});
    FAIL() << "three ranks for two heads";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--tp");
  }
  try {
    exec::tensor_parallel_model(exec::make_model("mlp"), 0, 2, [](torch::Tensor&) {});
    FAIL() << "an mlp has no transformer blocks";
  } catch (const Error& error) {
    EXPECT_EQ(error.context().field, "--model");
  }
}

// Two processes, ranks of one group: each returns its loss, the single-process loss, the largest
// relative gradient difference and the all-reduces it took part in.
TEST(TensorParallelModel, TwoRanksOverGlooHaveTheWholeModelsLossAndGradients) {
  const std::vector<int> group = {0, 1};
  const auto results = exec::run_connected_children(
      2, 4, std::chrono::milliseconds(30000), {group},
      [&](exec::Transport& transport, int rank) {
        auto reference = exec::make_model("gpt");
        int all_reduces = 0;
        auto parallel = exec::tensor_parallel_model(exec::make_model("gpt"), rank, 2,
                                                    [&](torch::Tensor& tensor) {
                                                      ++all_reduces;
                                                      transport.all_reduce(tensor, group, "tensor-parallel sum");
                                                    });
        const exec::Batch batch = reference->batch(7, 0, 4);
        const torch::Tensor loss = loss_of(*parallel, batch), expected = loss_of(*reference, batch);
        loss.backward();
        expected.backward();
        return std::vector<double>{loss.item<double>(), expected.item<double>(),
                                   largest_gradient_difference(*parallel, *reference, rank, 2), double(all_reduces)};
      },
      "tensor-parallel test", "read its message above");
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_NEAR(results[rank][0], results[rank][1], 1e-5);
    EXPECT_LT(results[rank][2], 1e-4);
    EXPECT_EQ(results[rank][3], 16);
  }
  EXPECT_EQ(results[0][1], results[1][1]);  // both built the same whole model
}

}  // namespace
}  // namespace pipetwin
