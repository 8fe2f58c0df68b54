#include "planner/cost_model.h"

#include <algorithm>

#include "planner/error.h"

namespace pipetwin {
namespace {

class PipeDreamCostModel final : public CostModel {
 public:
  std::string name() const override { return "pipedream"; }

  double stage_time_s(double compute_s, double param_bytes, int replicas, double bandwidth_bytes_per_s,
                      bool first_stage_of_segment, int inner_workers) const override {
    double all_reduce_s = 4.0 * (replicas - 1) * param_bytes / (bandwidth_bytes_per_s * replicas);
    if (first_stage_of_segment) all_reduce_s /= inner_workers;
    return (compute_s + all_reduce_s) / replicas;
  }

  double activation_transfer_s(double bytes, int replicas, double bandwidth_bytes_per_s) const override {
    return 2.0 * bytes / (bandwidth_bytes_per_s * replicas);
  }
};

class OverlapCostModel final : public CostModel {
 public:
  std::string name() const override { return "overlap"; }

  double stage_time_s(double compute_s, double param_bytes, int replicas, double bandwidth_bytes_per_s,
                      bool /*first_stage_of_segment*/, int inner_workers) const override {
    const double ring_all_reduce_s = 2.0 * (replicas - 1) / replicas * param_bytes / bandwidth_bytes_per_s;
    return std::max(compute_s, ring_all_reduce_s / inner_workers) / replicas;
  }

  double activation_transfer_s(double bytes, int replicas, double bandwidth_bytes_per_s) const override {
    return 2.0 * bytes / (bandwidth_bytes_per_s * replicas);
  }
};

}  // namespace

std::vector<std::string> cost_model_names() { return {"pipedream", "overlap"}; }

std::unique_ptr<CostModel> make_cost_model(const std::string& name) {
  if (name == "pipedream") return std::make_unique<PipeDreamCostModel>();
  if (name == "overlap") return std::make_unique<OverlapCostModel>();
  throw Error({"", 0, "--cost-model"}, "unknown cost model '" + name + "'", "use 'pipedream' or 'overlap'");
}

}  // namespace pipetwin
