// Every zoo model: its synthetic task can be learned (the loss falls), it profiles into a chain the
// planner reads, and a 2-stage plan of it runs on two worker processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "exec/counting_allocator.h"
#include "exec/model_zoo.h"
#include "exec/probe.h"
#include "exec/profiler.h"
#include "exec/reference_training.h"
#include "exec/tensor_parallel.h"
#include "planner/error.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

class ZooModel : public ::testing::TestWithParam<std::string> {};

// VGG-16 (13 convolutions, no normalisation) does not learn in so few steps; see the issue note.
class LearningModel : public ::testing::TestWithParam<std::string> {};

TEST_P(LearningModel, LearnsItsSyntheticTask) {
  exec::ReferenceOptions options;
  options.model = GetParam();
  options.microbatch_size = 16;
  options.microbatches = 2;
  options.iterations = 25;
  options.learning_rate = GetParam() == "gpt" ? 0.02 : GetParam() == "resnet" ? 0.003 : 0.05;
  const auto result = exec::train_reference(options);
  const double first = (result.losses[0] + result.losses[1]) / 2;
  const double last = (result.losses[23] + result.losses[24]) / 2;
  EXPECT_LT(last, 0.8 * first) << GetParam() << ": " << first << " -> " << last;
}

TEST_P(ZooModel, ProfilesPlansAndRunsOnTwoWorkers) {
  testing::TempDir dir;
  exec::ProfilerOptions options;
  options.model = GetParam();
  options.batch = 8;
  options.repeats = 3;
  options.warmup = 1;
  const Profile profile = exec::profile_model(options);
  auto model = exec::make_model(GetParam());
  ASSERT_EQ(profile.layer_count(), model->layer_count());
  EXPECT_EQ(profile.edges().size(), profile.layer_count() - 1);
  double parameters = 0;
  for (std::size_t l = 0; l < model->layer_count(); ++l) {
    for (const auto& p : model->layer(l).ptr()->parameters()) parameters += p.numel() * 4.0;
  }
  EXPECT_DOUBLE_EQ(profile.total_param_bytes(), parameters);
  EXPECT_GT(profile.total_fwd_ms(), 0.0);
  write_profile_json(profile, dir.file("profile.json"));
  ASSERT_EQ(testing::run_pipetwin("plan -q --straight -p " + dir.file("profile.json") + " -c " +
                                  testing::platform("localhost-cpu") + " -o " + dir.file("plan.json")).exit_code, 0);
  const auto result = testing::run_pipetwin("run --plan " + dir.file("plan.json") + " --model " + GetParam() +
                                            " -s 1f1b -m 2 --iterations 2 -o " + dir.file("trace.jsonl"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("samples/s"));
}

// The last stage makes only the labels: they must be the very labels of the microbatch the first
// stage made (else the pipeline would train on a task of its own).
TEST_P(ZooModel, LabelsAloneAreTheBatchsLabels) {
  auto model = exec::make_model(GetParam());
  for (const std::int64_t index : {0, 1, 17}) {
    const torch::Tensor expected = model->batch(2026, index, 8).labels;
    const torch::Tensor labels = model->labels(2026, index, 8);
    ASSERT_EQ(labels.sizes(), expected.sizes()) << GetParam();
    EXPECT_TRUE(torch::equal(labels, expected)) << GetParam() << " microbatch " << index;
  }
  EXPECT_FALSE(torch::equal(model->labels(2026, 0, 8), model->labels(2026, 1, 8))) << "microbatches differ";
}

// The counting allocator sees exactly the bytes CPU tensors hold, and a tensor it made may be freed
// after its scope has ended.
TEST(CountingCpuAllocation, CountsWhatCpuTensorsHold) {
  torch::Tensor survivor;
  {
    const exec::CountingCpuAllocation counting;
    const std::int64_t start = counting.live_bytes();
    torch::Tensor floats = torch::empty({1000}, torch::kFloat32);
    EXPECT_EQ(counting.live_bytes() - start, 4000);
    survivor = torch::ones({10, 10}, torch::kFloat64);
    EXPECT_EQ(counting.live_bytes() - start, 4000 + 800);
    floats = torch::Tensor();
    EXPECT_EQ(counting.live_bytes() - start, 800);
  }
  EXPECT_DOUBLE_EQ(survivor.sum().item<double>(), 100.0);
  survivor = torch::Tensor();
}

// A layer whose forward takes 5 ms.
struct SleepImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return x * 1.0;
  }
};
TORCH_MODULE(Sleep);

// A three-layer model whose data takes 20 ms to make, whose middle layer's forward 5 ms and whose
// loss 10 ms to compute, far above its other layers' own microseconds.
class SlowDataAndLoss : public exec::Model {
 public:
  SlowDataAndLoss() : Model("slow") {
    add(torch::nn::AnyModule(torch::nn::Linear(4, 4)), "Linear");
    add(torch::nn::AnyModule(Sleep()), "Sleep");
    add(torch::nn::AnyModule(torch::nn::Linear(4, 4)), "Linear");
  }
  exec::Batch batch(std::uint64_t, std::int64_t, std::int64_t size) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return {torch::ones({size, 4}), labels(0, 0, size)};
  }
  torch::Tensor labels(std::uint64_t, std::int64_t, std::int64_t size) const override {
    return torch::zeros({size}, torch::kLong);
  }
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor&) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return output.sum();
  }
};

// Timed in sequence, each layer gets its own time; making the inputs is the first layer's (the first
// stage always holds it), the loss the last's.
TEST(Profiler, TheFirstLayerCountsMakingTheInputsAndTheLastTheLoss) {
  exec::ProfilerOptions options;
  options.batch = 8;
  options.repeats = 3;
  options.warmup = 1;
  SlowDataAndLoss model;
  const std::vector<Layer> layers = exec::measure_layers(options, model, torch::kCPU);
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_GE(layers[0].fwd_ms, 20.0);
  EXPECT_LT(layers[0].fwd_ms, 24.0) << "neither the sleep nor the loss is the first layer's";
  EXPECT_GE(layers[1].fwd_ms, 5.0);
  EXPECT_LT(layers[1].fwd_ms, 9.0);
  EXPECT_GE(layers[2].fwd_ms, 10.0);
  EXPECT_LT(layers[2].fwd_ms, 14.0) << "the inputs are not the last layer's";
  for (const Layer& layer : layers) EXPECT_LT(layer.bwd_ms, 4.0) << layer.id;
}

// What each layer keeps for its backward, per microbatch: a Linear or ReLU of the MLP keeps its
// output only (its input and weights were there before); a GPT block at least its softmax's output
// (b h s^2 floats), the MLP's hidden layer before and after GELU (2 b s 4d) and its output (b s d),
// b = 8, h = 2 heads, s = 16 tokens, d = 32 (exec/model_zoo.cpp).
TEST(Profiler, StashedBytesAreWhatEachLayerKeepsForItsBackward) {
  exec::ProfilerOptions options;
  options.batch = 8;
  options.repeats = 1;
  options.warmup = 0;
  options.model = "mlp";
  const Profile mlp = exec::profile_model(options);
  for (const Layer& layer : mlp.layers()) {
    ASSERT_TRUE(layer.stashed_bytes.has_value()) << layer.id;
    EXPECT_EQ(*layer.stashed_bytes, layer.activation_bytes) << layer.id << " " << layer.description;
  }
  options.model = "gpt";
  const double b = 8, h = 2, s = 16, d = 32;
  int blocks = 0;
  const Profile gpt = exec::profile_model(options);
  for (const Layer& layer : gpt.layers()) {
    if (layer.description.find("TransformerBlock") == std::string::npos) continue;
    ++blocks;
    EXPECT_EQ(layer.activation_bytes, b * s * d * 4);
    EXPECT_GE(*layer.stashed_bytes, (b * h * s * s + 2 * b * s * 4 * d + b * s * d) * 4) << layer.id;
  }
  EXPECT_EQ(blocks, 4);
}

INSTANTIATE_TEST_SUITE_P(All, ZooModel, ::testing::Values("mlp", "vgg16", "resnet", "gpt"));
INSTANTIATE_TEST_SUITE_P(Learning, LearningModel, ::testing::Values("mlp", "resnet", "gpt"));

// profile --tp 2: two processes measure their shards at once; each layer's parameter bytes are one
// rank's (a block's split projections halved, its norms and the row-parallel biases whole), and the
// profile is refused for a model without blocks or a degree that does not divide the heads.
TEST(TensorParallelProfile, MeasuresOneRanksShareOfEachLayer) {
  testing::TempDir dir;
  const auto result = testing::run_pipetwin("profile --model gpt --batch 4 --repeats 2 --warmup 1 --tp 2 -o " +
                                            dir.file("gpt-tp2.json"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const Profile profile = load_profile(dir.file("gpt-tp2.json"));
  auto parallel = exec::tensor_parallel_model(exec::make_model("gpt"), 0, 2,
                                              [](torch::Tensor&) {});
  auto whole = exec::make_model("gpt");
  ASSERT_EQ(profile.layer_count(), parallel->layer_count());
  for (std::size_t l = 0; l < parallel->layer_count(); ++l) {
    double held = 0, all = 0;
    for (const auto& p : parallel->layer(l).ptr()->parameters()) held += p.numel() * 4.0;
    for (const auto& p : whole->layer(l).ptr()->parameters()) all += p.numel() * 4.0;
    EXPECT_DOUBLE_EQ(profile.layers()[l].param_bytes, held) << "layer " << l;
    if (whole->description(l) == "TransformerBlock") {
      // 32 wide: norms 2 x 64 and biases 2 x 32 whole, the rest (12,512 floats) halved
      EXPECT_DOUBLE_EQ(held, 4.0 * (128 + 64 + (12704 - 128 - 64) / 2.0)) << "layer " << l;
      EXPECT_DOUBLE_EQ(all, 4.0 * 12704) << "layer " << l;
    }
    EXPECT_GT(profile.layers()[l].fwd_ms, 0.0);
  }
  for (const std::string bad : {"--model mlp --tp 2", "--model gpt --tp 3"}) {
    const auto refused = testing::run_pipetwin("profile " + bad + " -o " + dir.file("bad.json"));
    EXPECT_EQ(refused.exit_code, 1) << bad;
    EXPECT_THAT(refused.output, HasSubstr(bad.find("mlp") != std::string::npos ? "'--model'" : "'--tp'")) << refused.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("bad.json")));
  }
}

TEST(ZooModel, UnknownNamesAreErrors) { EXPECT_THROW(exec::make_model("alexnet"), Error); }

// A probe file reads back; a malformed one is refused naming the field.
TEST(Probe, ReadsBackAndRefusesMalformedFiles) {
  exec::ComputeProbe probe;
  probe.model = "mlp";
  probe.batch = 32;
  probe.process_rate = {10.0, 9.0};
  probe.machine_throughput = {1.0, 1.8};
  const exec::ComputeProbe back = exec::probe_from_json(exec::probe_to_json(probe), "p.json");
  EXPECT_EQ(back.machine_throughput, probe.machine_throughput);
  EXPECT_EQ(back.batch, 32);
  nlohmann::json bad = exec::probe_to_json(probe);
  bad["machine_throughput"] = {1.0, -2.0};
  try {
    exec::probe_from_json(bad, "p.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("machine_throughput"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
  }
  bad["machine_throughput"] = "fast";
  EXPECT_THROW(exec::probe_from_json(bad, "p.json"), Error);
  bad = exec::probe_to_json(probe);
  bad["format"] = "pipetwin.plan/1";
  EXPECT_THROW(exec::probe_from_json(bad, "p.json"), Error);
}

// The probe's own check, on figures matrices here measured: a count under 85% of the one below it
// (VGG-16's three processes at 1.19 and 1.55 where two gave 1.93 and 1.88), or any count over
// min(count, cores) ones' worth by 15% (GPT's two at 2.7 on two cores: one alone read slow) is taken
// again; the usual figures (three at 1.72 after two at 1.87, time-sliced on two cores) are not.
TEST(Probe, TakesAgainTheCountsNoIdleMachineGives) {
  using exec::implausible_counts;
  EXPECT_EQ(implausible_counts({1.0, 1.93, 1.19}, 2), (std::vector<int>{3}));
  EXPECT_EQ(implausible_counts({1.0, 1.88, 1.55}, 2), (std::vector<int>{3}));
  EXPECT_EQ(implausible_counts({1.0, 2.7, 2.73}, 2), (std::vector<int>{1}));
  EXPECT_EQ(implausible_counts({1.0, 2.7, 1.5}, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(implausible_counts({1.0, 0.498}, 2), (std::vector<int>{2}));
  EXPECT_TRUE(implausible_counts({1.0, 1.87, 1.72}, 2).empty());
  EXPECT_TRUE(implausible_counts({1.0}, 1).empty());
  // The bound is the cores': four processes at 3.6 ones' worth are plausible on eight cores, not on two.
  EXPECT_TRUE(implausible_counts({1.0, 1.9, 2.8, 3.6}, 8).empty());
  EXPECT_EQ(implausible_counts({1.0, 1.9, 2.8, 3.6}, 2), (std::vector<int>{1}));
}

}  // namespace
}  // namespace pipetwin
