// Transformer profiles from a description, checked against published parameter counts, Narayanan et
// al.'s FLOPs formula, Korthikanti et al.'s activation memory and Megatron-LM's theoretical memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "planner/balanced_plan.h"
#include "planner/error.h"
#include "planner/profile_io.h"
#include "planner/schedule_builder.h"
#include "planner/transformer_model.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

double total(const std::vector<TransformerLayerCost>& costs, double TransformerLayerCost::*field) {
  double sum = 0;
  for (const TransformerLayerCost& cost : costs) sum += cost.*field;
  return sum;
}

double parameters(const TransformerSpec& spec) {
  return total(transformer_layer_costs(spec, Recomputation::none), &TransformerLayerCost::parameters);
}

// Published parameter counts (the models' released checkpoints, as their model cards list them).
TEST(TransformerModel, PresetsHaveThePublishedParameterCounts) {
  EXPECT_EQ(parameters(transformer_preset("llama2-7b")), 6'738'415'616.0);
  EXPECT_EQ(parameters(transformer_preset("llama2-70b")), 68'976'648'192.0);
  EXPECT_EQ(parameters(transformer_preset("llama3-8b")), 8'030'261'248.0);
  EXPECT_EQ(parameters(transformer_preset("llama3-70b")), 70'553'706'496.0);
  EXPECT_EQ(parameters(transformer_preset("llama3-405b")), 405'853'388'800.0);
}

// Narayanan et al. SC'21: P = 12 L h^2 (1 + 13/(12h) + (V + s)/(12 L h)), which leaves out the final
// LayerNorm's 2h.
TEST(TransformerModel, Gpt3ParametersMatchNarayanansFormula) {
  const TransformerSpec gpt3 = transformer_preset("gpt3-175b");
  const double L = 96, h = 12288, V = 51200, s = 2048;
  const double expected = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h)) + 2 * h;
  EXPECT_NEAR(parameters(gpt3), expected, 1e-9 * expected);
  EXPECT_NEAR(parameters(gpt3) / 1e9, 174.6, 0.05);  // GPT-3's 175B
}

// With full recomputation one iteration of B sequences costs F = 96 B s L h^2 (1 + s/(6h) + V/(16 L h)).
TEST(TransformerModel, FullRecomputationFlopsMatchNarayanansFormula) {
  for (int microbatch : {1, 4}) {
    TransformerSpec gpt3 = transformer_preset("gpt3-175b");
    gpt3.microbatch_size = microbatch;
    const auto costs = transformer_layer_costs(gpt3, Recomputation::full);
    const double flops = total(costs, &TransformerLayerCost::forward_flops) +
                         total(costs, &TransformerLayerCost::backward_input_flops) +
                         total(costs, &TransformerLayerCost::backward_weight_flops) +
                         total(costs, &TransformerLayerCost::recompute_flops);
    const double B = microbatch, s = 2048, L = 96, h = 12288, V = 51200;
    const double expected = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    EXPECT_NEAR(flops, expected, 1e-12 * expected) << "microbatch " << microbatch;
  }
}

// Korthikanti et al. 2022, Table 2 (t = 1): sbh(34 + 5as/h) bytes without recomputation, 34 sbh
// selective, 2 sbh full (the block's input); the block sends its output, 2 sbh.
TEST(TransformerModel, BlockActivationsMatchKorthikanti) {
  TransformerSpec gpt3 = transformer_preset("gpt3-175b");
  gpt3.microbatch_size = 2;
  const double sbh = 2.0 * 2048 * 12288, as_over_h = 96.0 * 2048 / 12288;
  const auto block = [&](Recomputation mode) { return transformer_layer_costs(gpt3, mode).at(1); };
  EXPECT_DOUBLE_EQ(block(Recomputation::none).stashed_bytes, sbh * (34 + 5 * as_over_h));
  EXPECT_DOUBLE_EQ(block(Recomputation::selective).stashed_bytes, 34 * sbh);
  EXPECT_DOUBLE_EQ(block(Recomputation::full).stashed_bytes, 2 * sbh);
  EXPECT_DOUBLE_EQ(block(Recomputation::none).output_bytes, 2 * sbh);
  // Recomputation: selective redoes the attention core (4bs^2h), full the whole forward.
  EXPECT_DOUBLE_EQ(block(Recomputation::selective).recompute_flops, 4 * 2.0 * 2048 * 2048 * 12288);
  EXPECT_DOUBLE_EQ(block(Recomputation::full).recompute_flops, block(Recomputation::full).forward_flops);
  EXPECT_DOUBLE_EQ(block(Recomputation::none).recompute_flops, 0.0);
}

// Hand count for a tiny gated GQA block: b = 1, s = 4, h = 8, a = 2 heads (d = 4), k = 1, f = 16, e = 2.
TEST(TransformerModel, GatedGroupedQueryBlockByHand) {
  TransformerSpec spec;
  spec.layers = 1, spec.hidden = 8, spec.ffn_hidden = 16, spec.heads = 2, spec.kv_heads = 1;
  spec.vocabulary = 10, spec.sequence_length = 4, spec.gated_mlp = true;
  const TransformerLayerCost block = transformer_layer_costs(spec, Recomputation::none).at(1);
  // GEMMs: QKV 4x(8+8)x8 = 512 MACs, out 4x8x8 = 256, up+gate 2x4x16x8 = 1024, down 4x8x16 = 512;
  // scores 2 heads x (4x4x4 + 4x4x4) = 256 MACs.
  EXPECT_DOUBLE_EQ(block.forward_flops, 2.0 * (512 + 256 + 1024 + 512 + 256));
  EXPECT_DOUBLE_EQ(block.backward_input_flops, 2.0 * (2304 + 2 * 256));
  EXPECT_DOUBLE_EQ(block.backward_weight_flops, 2.0 * 2304);
  // Parameters: Wq 64, Wk 32, Wv 32, Wo 64, MLP 3 x 128, two RMSNorms 8 each.
  EXPECT_DOUBLE_EQ(block.parameters, 64 + 32 + 32 + 64 + 384 + 16);
  // Stash (elements x 2 bytes): norms 2x32, QKV in 32, Q 32 + K 16, V 16, out in 32, MLP in 32,
  // gate, up, product 3 x 64; softmax output 2 heads x 16.
  EXPECT_DOUBLE_EQ(block.stashed_bytes, 2.0 * (64 + 32 + 48 + 16 + 32 + 32 + 192 + 32));
}

// Megatron-LM's theoretical_memory_usage (sequence parallel, selective recomputation, no distributed
// optimizer): the first stage holds (L/p blocks + embedding) / t x 18 bytes per parameter and
// (L sbh(18 + 4f/h) + p (8sb + sbh)) / t bytes of activations (p microbatches in flight under 1F1B).
// Checked without tensor parallelism and with t = 8 (norms are replicated and the token ids whole in
// pipetwin, hence not exactly equal). Megatron's formula leaves out what one block rebuilds by
// selective recomputation and holds during its backward, the attention scores 5as^2b / t (e = 2,
// dropout), which pipetwin counts: added to the formula here (1.6% of it).
class MegatronMemory : public ::testing::TestWithParam<int> {};

TEST_P(MegatronMemory, FirstStageMemoryMatchesMegatronsTheoreticalMemory) {
  const int t = GetParam();
  TransformerSpec spec = transformer_preset("gpt3-175b");
  spec.layers = 32, spec.hidden = 4096, spec.ffn_hidden = 16384, spec.heads = 32, spec.kv_heads = 32;
  spec.linear_biases = false, spec.learned_positions = false;  // Megatron's count has neither
  spec.tensor_parallel = t, spec.sequence_parallel = t > 1;
  const int stages = 4, microbatches = 8;
  const Profile profile = transformer_profile(spec, Recomputation::selective, {312e12, 0.5, 0.0}, {300e9, 2e-6});
  const Cluster cluster = testing::simple_cluster({{stages, 300e9}});  // one worker per tensor-parallel group
  const Plan plan = balanced_plan(profile, cluster, stages, "1f1b", microbatches);
  ASSERT_EQ(plan.stages.front().layer_ids.front(), "embedding");
  ASSERT_EQ(plan.stages.front().layer_ids.size(), 1u + spec.layers / stages);
  ScheduleRequest request;
  request.name = "1f1b";
  const BuiltSchedule built = build_schedule(plan, request);
  const double measured = built.report.memory.at(0).total_bytes();

  const double L = spec.layers, h = spec.hidden, f = spec.ffn_hidden, s = spec.sequence_length, V = spec.vocabulary;
  const double transformer_parameters = 10 * L * h * h * ((1 + f / h) / 5 + 1.0 / 5 + 2 / (5 * h) + 1 / (5 * L * h));
  const double weights_and_optimizer = (transformer_parameters / stages + V * h) / t * 18;
  const double activations = (s * h * (18 + 4 * f / h) * L + (8 * s + s * h) * stages) / t;
  const double a = spec.heads, rebuilt = 5 * a * s * s / t;
  const double megatron = weights_and_optimizer + activations + rebuilt;
  EXPECT_NEAR(measured / megatron, 1.0, 0.01) << measured / 1e9 << " GB against Megatron's " << megatron / 1e9;
}
INSTANTIATE_TEST_SUITE_P(TensorParallel, MegatronMemory, ::testing::Values(1, 8));

TEST(TransformerModel, TimesAreFlopsOverThePeakTimesTheShapedEfficiency) {
  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.layers = 2;
  const auto costs = transformer_layer_costs(spec, Recomputation::none);
  const Profile flat = transformer_profile(spec, Recomputation::none, {1e15, 0.5, 0.0});
  const Layer& block = flat.layer(1);
  EXPECT_NEAR(block.fwd_ms, 1000 * costs[1].forward_flops / 5e14, 1e-9);
  EXPECT_NEAR(block.bwd_ms, 2 * block.fwd_ms, 1e-9);
  EXPECT_NEAR(*block.bwd_weight_ms, 1000 * costs[1].backward_weight_flops / 5e14, 1e-9);
  EXPECT_DOUBLE_EQ(*block.flops, costs[1].forward_flops);
  EXPECT_DOUBLE_EQ(block.param_bytes, 2 * costs[1].parameters);
  EXPECT_DOUBLE_EQ(*block.optimizer_bytes, 16 * costs[1].parameters);
  EXPECT_DOUBLE_EQ(flat.layer(0).fwd_ms, 0.0);  // the embedding lookup has no GEMM
  // A half dimension of 128: the down projection (4096 x 4096 x 11008) runs at
  // 0.5 x 4096/4224 x 4096/4224 x 11008/11136 of the peak.
  const GemmRate shaped{1e15, 0.5, 128};
  const Gemm down{4096, 4096, 11008, 1};
  EXPECT_NEAR(shaped.seconds(down), down.flops() / (5e14 * (4096.0 / 4224) * (4096.0 / 4224) * (11008.0 / 11136)), 1e-15);
  EXPECT_GT(transformer_profile(spec, Recomputation::none, shaped).layer(1).fwd_ms, block.fwd_ms);
}

TEST(TransformerModel, RecomputationIsItsOwnForwardBeforeTheBackward) {
  TransformerSpec spec = transformer_preset("llama3-8b");
  spec.layers = 2;
  const GemmRate rate{1e15, 0.5, 0.0};
  const Profile none = transformer_profile(spec, Recomputation::none, rate);
  const Profile full = transformer_profile(spec, Recomputation::full, rate);
  const Profile selective = transformer_profile(spec, Recomputation::selective, rate);
  EXPECT_FALSE(none.layer(1).recompute_ms.has_value());
  EXPECT_NEAR(*full.layer(1).recompute_ms, none.layer(1).fwd_ms, 1e-9);  // the whole block forward again
  const double scores_ms = 1000 * 4.0 * 8192 * 8192 * 4096 / 5e14;    // QK^T and PV: 2 x 2 s^2 h FLOPs
  EXPECT_NEAR(*selective.layer(1).recompute_ms, scores_ms, 1e-9);
  for (const Profile* recomputing : {&full, &selective}) {
    EXPECT_DOUBLE_EQ(recomputing->layer(1).bwd_ms, none.layer(1).bwd_ms);  // the backward itself is unchanged
    EXPECT_DOUBLE_EQ(recomputing->layer(1).recompute_bytes,
                     *none.layer(1).stashed_bytes - *recomputing->layer(1).stashed_bytes);  // what it spared
    EXPECT_NEAR(compute_ms(recomputing->layer(1)), compute_ms(none.layer(1)) + *recomputing->layer(1).recompute_ms, 1e-9);
  }
  EXPECT_FALSE(full.layer(3).recompute_ms.has_value());  // the output layer is not recomputed
  EXPECT_LT(*full.layer(1).stashed_bytes, *selective.layer(1).stashed_bytes);
  EXPECT_LT(*selective.layer(1).stashed_bytes, *none.layer(1).stashed_bytes);
}

TEST(TransformerModel, ProfileRoundTripsThroughJsonWithItsMemoryFields) {
  TransformerSpec spec = transformer_preset("llama2-7b");
  spec.layers = 3;
  const Profile profile = transformer_profile(spec, Recomputation::selective, {1e15, 0.5, 64});
  testing::TempDir dir;
  write_profile_json(profile, dir.file("p.json"));
  const Profile loaded = load_profile(dir.file("p.json"));
  ASSERT_EQ(loaded.layer_count(), 5u);
  for (std::size_t i = 0; i < loaded.layer_count(); ++i) {
    EXPECT_EQ(loaded.layer(i).stashed_bytes, profile.layer(i).stashed_bytes);
    EXPECT_EQ(loaded.layer(i).optimizer_bytes, profile.layer(i).optimizer_bytes);
    EXPECT_EQ(loaded.layer(i).bwd_input_ms, profile.layer(i).bwd_input_ms);
    EXPECT_EQ(loaded.layer(i).recompute_ms, profile.layer(i).recompute_ms);
    EXPECT_EQ(loaded.layer(i).recompute_bytes, profile.layer(i).recompute_bytes);
  }
  EXPECT_TRUE(loaded.layer(1).recompute_ms.has_value());
  EXPECT_EQ(loaded.name(), "llama2-7b-selective");
  EXPECT_EQ(loaded.batch_size(), 1);
}

// Korthikanti et al. 2022, Table 2, with tensor parallelism t = 8: sbh(10 + 24/t + 5as/(ht)) without
// recomputation, sbh(10 + 24/t) selective; with sequence parallelism sbh(34/t + 5as/(ht)) and 34sbh/t.
TEST(TransformerModel, TensorParallelActivationsAndFlopsMatchKorthikanti) {
  TransformerSpec gpt3 = transformer_preset("gpt3-175b");
  const double sbh = 2048.0 * 12288, as_over_h = 96.0 * 2048 / 12288, t = 8;
  const TransformerLayerCost whole = transformer_layer_costs(gpt3, Recomputation::none).at(1);
  gpt3.tensor_parallel = 8;
  const auto block = [&](Recomputation mode) { return transformer_layer_costs(gpt3, mode).at(1); };
  EXPECT_DOUBLE_EQ(block(Recomputation::none).stashed_bytes, sbh * (10 + 24 / t + 5 * as_over_h / t));
  EXPECT_DOUBLE_EQ(block(Recomputation::selective).stashed_bytes, sbh * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(block(Recomputation::full).stashed_bytes, 2 * sbh);
  gpt3.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(block(Recomputation::none).stashed_bytes, sbh * (34 / t + 5 * as_over_h / t));
  EXPECT_DOUBLE_EQ(block(Recomputation::selective).stashed_bytes, 34 * sbh / t);
  EXPECT_DOUBLE_EQ(block(Recomputation::full).stashed_bytes, 2 * sbh / t);
  // One rank does 1/t of the FLOPs and holds 1/t of the weight matrices (norms, row-parallel biases whole).
  EXPECT_DOUBLE_EQ(block(Recomputation::none).forward_flops, whole.forward_flops / t);
  const double h = 12288;
  EXPECT_DOUBLE_EQ(block(Recomputation::none).parameters, 12 * h * h / t + (3 * h + 4 * h) / t + h + h + 4 * h);
  EXPECT_EQ(block(Recomputation::none).tensor_allreduces_forward, 2);
  EXPECT_DOUBLE_EQ(block(Recomputation::none).output_bytes, 2 * sbh / t);
}

// The block's time adds two ring all-reduces of 2sbh bytes among t = 8 GPUs at 300 GB/s and 2 us per
// step forward, two more backward: 2 x 7/8 x 2sbh / 300e9 + 14 x 2e-6 s each.
TEST(TransformerModel, TensorParallelAllReducesAreFoldedIntoTheTimes) {
  TransformerSpec spec = transformer_preset("gpt3-175b");
  spec.layers = 2;
  const GemmRate rate{312e12, 0.6, 0.0};
  const Profile alone = transformer_profile(spec, Recomputation::none, rate);
  spec.tensor_parallel = 8;
  const TensorParallelLink link{300e9, 2e-6};
  const Profile split = transformer_profile(spec, Recomputation::none, rate, link);
  const double allreduce_ms = 1000 * (2 * 7.0 / 8 * 2 * 2048 * 12288 / 300e9 + 14 * 2e-6);
  EXPECT_NEAR(split.layer(1).fwd_ms, alone.layer(1).fwd_ms / 8 + 2 * allreduce_ms, 1e-9);
  EXPECT_NEAR(split.layer(1).bwd_ms, alone.layer(1).bwd_ms / 8 + 2 * allreduce_ms, 1e-9);
  EXPECT_NEAR(split.layer(0).fwd_ms, allreduce_ms, 1e-9);   // the vocabulary-parallel embedding
  EXPECT_NEAR(split.layer(3).bwd_ms, alone.layer(3).bwd_ms / 8 + allreduce_ms, 1e-9);  // the output layer
  EXPECT_EQ(split.name(), "gpt3-175b-tp8-none");
  EXPECT_THROW(transformer_profile(spec, Recomputation::none, rate), Error);  // no link given
  // The plan's cluster: one worker per group of 8 on each server.
  const Cluster selene = load_cluster(testing::platform("selene-dgx-a100"));
  EXPECT_EQ(tensor_parallel_groups(selene, 8).worker_count(), selene.worker_count() / 8);
  EXPECT_EQ(tensor_parallel_groups(selene, 2).levels().front().count, 4);
  EXPECT_THROW(tensor_parallel_groups(selene, 3), Error);
}

TEST(TransformerModel, ImpossibleShapesNameTheField) {
  const auto message = [](const TransformerSpec& spec) {
    try {
      check_transformer_spec(spec);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  TransformerSpec spec = transformer_preset("llama2-70b");
  spec.heads = 60;
  EXPECT_THAT(message(spec), HasSubstr("--heads"));
  spec = transformer_preset("llama2-70b");
  spec.kv_heads = 7;
  EXPECT_THAT(message(spec), HasSubstr("--kv-heads"));
  spec.kv_heads = 8, spec.layers = 0;
  EXPECT_THAT(message(spec), HasSubstr("--layers"));
  EXPECT_EQ(message(transformer_preset("llama3-405b")), "accepted");
  spec = transformer_preset("llama2-7b");
  spec.tensor_parallel = 3;  // 32 heads
  EXPECT_THAT(message(spec), HasSubstr("--tp"));
  spec = transformer_preset("llama3-70b");
  spec.tensor_parallel = 16;  // 8 kv heads, replicated two ways: fine
  EXPECT_EQ(message(spec), "accepted");
  EXPECT_THROW(transformer_preset("gpt5"), Error);
  EXPECT_THROW(recomputation_from_name("some", "--recompute"), Error);
  EXPECT_THROW(transformer_profile(transformer_preset("llama2-7b"), Recomputation::none, {0.0, 0.5, 0}), Error);
}

}  // namespace
}  // namespace pipetwin
