#include "planner/cost_model.h"

#include <algorithm>

#include "planner/error.h"

namespace pipetwin {
namespace {

class PipeDreamCostModel final : public CostModel {
 public:
  std::string name() const override { return "pipedream"; }

  StageFormula stage_formula(int replicas, double bandwidth_bytes_per_s, bool first_stage_of_segment,
                             int inner_workers) const override {
    double per_byte = 4.0 * (replicas - 1) / (bandwidth_bytes_per_s * replicas);
    if (first_stage_of_segment) per_byte /= inner_workers;
    return {static_cast<double>(replicas), per_byte, false};
  }

  double activation_transfer_s(double bytes, int replicas, double bandwidth_bytes_per_s) const override {
    return 2.0 * bytes / (bandwidth_bytes_per_s * replicas);
  }
};

class OverlapCostModel final : public CostModel {
 public:
  std::string name() const override { return "overlap"; }

  StageFormula stage_formula(int replicas, double bandwidth_bytes_per_s, bool /*first_stage_of_segment*/,
                             int inner_workers) const override {
    const double ring_s_per_byte = 2.0 * (replicas - 1) / replicas / bandwidth_bytes_per_s;
    return {static_cast<double>(replicas), ring_s_per_byte / inner_workers, true};
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
