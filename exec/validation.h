// Validation on this machine — the `validate` workflow: profile a zoo model, plan it, predict the
// run, run it for real, compare; then calibrate on the measured trace, predict again and compare
// again. Every file goes to one folder: profile.json, plan.json, predicted.jsonl, measured.jsonl,
// report.json, calibrated-cluster.json, calibrated-plan.json, predicted-calibrated.jsonl,
// report-calibrated.json.
//
// The prediction is given as a function (exec/ never depends on sim/; the CLI passes SimGrid's), which
// builds its schedule from the same plan and request as the run (build_schedule is deterministic).
// Throws pipetwin::Error.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/plan.h"
#include "planner/schedule_builder.h"
#include "traces/calibration.h"
#include "traces/trace.h"
#include "traces/trace_compare.h"

namespace pipetwin::exec {

struct ValidationRequest {
  std::string model = "mlp";
  std::string cluster_path = "platforms/localhost-cpu.json";
  std::vector<int> stage_replicas;  // a balanced plan with these replicas per stage; empty: the optimizer's straight plan
  std::string schedule = "1f1b";
  int microbatches = 8;
  int iterations = 6;
  int warmup = 1;
  int batch = 32;
  double timeout_s = 60.0;
  std::string device = "cpu";  // where the profile, the runs and the probe compute (compute_device.h)
  int tensor_parallel = 1;     // profile and run with this tensor-parallel degree (gpt; exec/tensor_parallel.h)
  std::string output_dir;
};

struct ValidationResult {
  Comparison before, after;  // predicted against measured, before and after calibration
  Calibration calibration;
};

// Predicts the trace of `request`'s schedule for a plan on a cluster.
using Predictor = std::function<Trace(const Plan& plan, const Cluster& cluster, const ValidationRequest& request)>;
// Told each step as it starts ("[3/6] simulating").
using StepReporter = std::function<void(const std::string& step)>;

// The steps validate and validate --matrix share.
void create_output_folder(const std::string& folder);
// The cluster file to load: `path` when it exists; a relative one (the default,
// platforms/localhost-cpu.json, is the repository's) is also looked for in the folder above
// `executable_dir` (the build folder's parent: the repository), so validate runs from any folder.
// Throws Error naming --cluster when neither is there.
std::string resolve_cluster_path(const std::string& path, const std::string& executable_dir);
// The zoo model at the request's batch, on the request's device (on a GPU in a child process, so
// the workers forked later can use CUDA).
Profile profile_for_validation(const ValidationRequest& request);
// A balanced plan with these replicas per stage, or (empty) the optimizer's straight plan.
Plan plan_for_validation(const Profile& profile, const Cluster& cluster, const std::vector<int>& stage_replicas,
                         const std::string& schedule, int microbatches);
// The request's schedule of the plan, checked against the cluster's device memory.
BuiltSchedule schedule_for_validation(const Plan& plan, const Cluster& cluster, const ValidationRequest& request);
// One run of the built schedule on this machine (one worker process per plan worker).
Trace run_for_validation(const std::string& plan_path, const ValidationRequest& request,
                         const std::shared_ptr<const Schedule>& built);

ValidationResult validate_on_this_machine(const ValidationRequest& request, const Predictor& predict,
                                          const StepReporter& report_step);

}  // namespace pipetwin::exec
