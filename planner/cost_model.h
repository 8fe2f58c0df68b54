// CostModel — how long one pipeline stage takes, as the partition optimizer sees it.
//
// Two models, chosen by name, never silently:
//  - "pipedream": PipeDream's optimizer (optimizer_graph_hierarchical.py) exactly. A stage of compute
//    T seconds and P parameter bytes on r replicas at a level of bandwidth B takes
//    (T + 4(r-1)P/(B r)) / r — the all-reduce is added to compute, not overlapped — and the first
//    stage of a segment further divides its all-reduce by g, the workers inside one unit of the level.
//    Moving an activation of a bytes in and its gradient back costs 2a/(B r).
//  - "overlap": the all-reduce is a ring, 2(r-1)/r * P/B (DESIGN.md), overlapped with the backward
//    pass, so a stage takes max(T, all-reduce / g) / r; activations as in "pipedream".
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace pipetwin {

// A stage's time per minibatch slot as a function of its compute and its parameters, for one
// replica count: (compute_s (+ or max) param_bytes * all_reduce_s_per_byte) / replicas. Both models
// have this shape; the optimizer evaluates it in its inner loop.
struct StageFormula {
  double replicas = 1.0;
  double all_reduce_s_per_byte = 0.0;
  bool overlapped = false;  // all-reduce hidden behind compute (max) instead of added to it

  double operator()(double compute_s, double param_bytes) const {
    const double all_reduce_s = param_bytes * all_reduce_s_per_byte;
    return (overlapped ? std::max(compute_s, all_reduce_s) : compute_s + all_reduce_s) / replicas;
  }
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;

  // The formula for a stage on `replicas` units of a level with `bandwidth_bytes_per_s`. Its
  // compute is summed fwd+bwd (or the level below's pipeline time). `first_stage_of_segment` with
  // `inner_workers` g: PipeDream's base case divides the all-reduce by g.
  virtual StageFormula stage_formula(int replicas, double bandwidth_bytes_per_s, bool first_stage_of_segment,
                                     int inner_workers) const = 0;

  double stage_time_s(double compute_s, double param_bytes, int replicas, double bandwidth_bytes_per_s,
                      bool first_stage_of_segment, int inner_workers) const {
    return stage_formula(replicas, bandwidth_bytes_per_s, first_stage_of_segment, inner_workers)(compute_s,
                                                                                                 param_bytes);
  }

  // Time to move an activation of `bytes` forward and its gradient back, per replica.
  virtual double activation_transfer_s(double bytes, int replicas, double bandwidth_bytes_per_s) const = 0;
};

// Throws Error (field "--cost-model") for an unknown name.
std::unique_ptr<CostModel> make_cost_model(const std::string& name);
std::vector<std::string> cost_model_names();

}  // namespace pipetwin
