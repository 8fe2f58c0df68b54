// Tensor-parallel sums — the all-reduces a layer's (or a stage's) pass makes among the t GPUs of its
// tensor-parallel group (Megatron: two per transformer block forward, two backward; transformer_model.h).
//
// A profile's layer says how many each pass makes and their bytes, and what one costs on paper (the
// ring on the innermost level), which its pass times already include: the planner and the evaluator
// read the times as they are. The lowering puts a TENSOR_ALLREDUCE after every pass of a stage that
// sums (schedule_lowering.h); the simulator takes the paper time out of the pass and runs the sums as
// rings among the group's GPUs on the platform's links instead, where they contend with the pipeline's
// and the data-parallel traffic (sim/simulation.h). The exec back end sums inside its model
// (exec/tensor_parallel.h): its measured profiles carry no sums here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace pipetwin {

enum class ActionKind : std::uint8_t;

// The sums of one pass kind, over the layers of a stage.
struct PassSums {
  int count = 0;       // all-reduces
  double bytes = 0.0;  // all of them together
  double paper_s = 0.0;  // their time on paper, included in the pass's time
  bool operator==(const PassSums&) const = default;
};

struct TensorSums {
  int ranks = 1;  // t: the GPUs of the group (1: no tensor parallelism, no sums)
  PassSums forward, backward, recompute;  // backward: the input gradient's (B or I; W sums nothing)
  // The sums after a pass of `kind`: F, B or I, R; none for the others.
  const PassSums& of(ActionKind kind) const;
  bool any() const { return ranks > 1 && (forward.count > 0 || backward.count > 0 || recompute.count > 0); }
  void add(const TensorSums& other);  // a stage's sums from its layers' (ranks: the larger)
  bool operator==(const TensorSums&) const = default;
};

// JSON form, in profiles (per layer) and plans (per stage), written only where ranks > 1:
// {"ranks": 2, "forward": {"count": 2, "bytes": 8192, "paper_s": 1e-5}, "backward": {...}, "recompute": {...}}.
nlohmann::json tensor_sums_to_json(const TensorSums& sums);
// Reads `object[key]` when present (else no sums); throws Error naming the file and the field.
TensorSums tensor_sums_from_json(const nlohmann::json& object, const char* key, const std::string& where,
                                 const std::string& path);

}  // namespace pipetwin
