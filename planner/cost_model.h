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

#include <memory>
#include <string>
#include <vector>

namespace pipetwin {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;

  // Time per minibatch slot of a stage with `compute_s` (summed fwd+bwd, or the level below's
  // pipeline time), `param_bytes`, on `replicas` units of a level with `bandwidth_bytes_per_s`.
  // `first_stage_of_segment` with `inner_workers` g: PipeDream's base case divides the all-reduce by g.
  virtual double stage_time_s(double compute_s, double param_bytes, int replicas, double bandwidth_bytes_per_s,
                              bool first_stage_of_segment, int inner_workers) const = 0;

  // Time to move an activation of `bytes` forward and its gradient back, per replica.
  virtual double activation_transfer_s(double bytes, int replicas, double bandwidth_bytes_per_s) const = 0;
};

// Throws Error (field "--cost-model") for an unknown name.
std::unique_ptr<CostModel> make_cost_model(const std::string& name);
std::vector<std::string> cost_model_names();

}  // namespace pipetwin
