// `pipetwin compare` (predicted vs measured trace), `pipetwin calibrate` (fit a cluster spec to a
// measured trace) and `pipetwin import-trace` (a PyTorch profiler trace as a measured trace).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "traces/calibration.h"
#include "traces/calibration_report.h"
#include "traces/kineto_import.h"
#include "traces/trace_compare.h"

namespace pipetwin::cli {
namespace {

void write_json(const std::string& path, const nlohmann::json& json) {
  json_fields::write_text_atomically(path, json.dump(2) + "\n");
}

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto predicted = std::make_shared<std::string>(), measured = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "compare", "Line up a predicted and a measured trace action by action: iteration time error, per-kind duration\n"
                 "errors, start-time drift along the pipeline, the worst operations and a verdict.");
  command->add_option("predicted", *predicted, "trace from pipetwin simulate -o")->required()->check(CLI::ExistingFile);
  command->add_option("measured", *measured, "trace from pipetwin run -o")->required()->check(CLI::ExistingFile);
  command->add_option("--json", *json, "also write the report as JSON");
  return [predicted, measured, json] {
    const Comparison comparison = compare_traces(load_trace(*predicted), load_trace(*measured));
    std::cout << comparison_text(comparison);
    if (!json->empty()) write_json(*json, comparison_to_json(comparison));
    return 0;
  };
}

Command add_calibrate_command(CLI::App& app) {
  auto trace = std::make_shared<std::string>(), plan = std::make_shared<std::string>();
  auto cluster = std::make_shared<std::string>(), output = std::make_shared<std::string>();
  auto plan_output = std::make_shared<std::string>(), probe = std::make_shared<std::string>();
  auto fit_efficiency = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "calibrate", "Fit a cluster spec to a measured trace (least squares on the trace's own events): compute scale\n"
                   "(overall and per worker), time between actions, to post a send (those that crossed one the other\n"
                   "way, which Gloo stalls, counted apart and reported) and to take an arrived message,\n"
                   "per-message overhead, link bandwidth; write the calibrated cluster file, and with --plan-output\n"
                   "the plan with each stage's forward/backward split as measured. With --probe the link is the one\n"
                   "`pipetwin probe --messages` measured over 1 KB .. 64 MB: its bandwidth is kept and the trace fits\n"
                   "only the per-message overhead, and where the probe timed all-reduces (--all-reduce) the device gets\n"
                   "their cost beyond the ring. With --fit-efficiency the compute scale goes into the GEMM efficiency.");
  command->add_option("--trace", *trace, "measured trace (pipetwin run -o)")->required()->check(CLI::ExistingFile);
  command->add_option("--plan", *plan, "the plan that run used")->required()->check(CLI::ExistingFile);
  command->add_option("--cluster,-c", *cluster, "the cluster spec to calibrate")->required()->check(CLI::ExistingFile);
  command->add_option("--output,-o", *output, "calibrated cluster spec to write")->required();
  command->add_option("--plan-output", *plan_output, "also write the plan with the measured forward/backward split");
  command->add_flag("--fit-efficiency", *fit_efficiency,
                    "put the fitted compute scale into the device's matmul_efficiency (over its peak_flops) instead of "
                    "its speed: for a plan of a profile pipetwin model wrote; write the profile again from the calibrated "
                    "cluster");
  command->add_option("--probe", *probe, "probe JSON with a 'messages' section (pipetwin probe --messages): its link")
      ->check(CLI::ExistingFile);
  return [trace, plan, cluster, output, plan_output, probe, fit_efficiency] {
    const Cluster given = load_cluster(*cluster);
    const Cluster base = probe->empty() ? given : with_probe(given, json_fields::read_file(*probe), *probe);
    const Plan measured_plan = load_plan(*plan);
    Calibration calibration;
    try {
      calibration = calibrate(load_trace(*trace), measured_plan, base,
                              probe->empty() ? LinkTerms::kOverheadAndBandwidth : LinkTerms::kOverheadOnly);
    } catch (const Error& error) {  // name the files the user gave
      if (!error.context().file.empty()) throw;
      throw Error({*trace, 0, error.context().field}, error.problem() + " (plan " + *plan + ")", error.fix());
    }
    const Cluster calibrated =
        *fit_efficiency ? calibrated_efficiency_cluster(base, calibration) : calibrated_cluster(base, calibration);
    write_json(*output, cluster_to_json(calibrated));
    std::cout << calibration_text(calibration);
    if (*fit_efficiency) {
      std::printf("GEMM efficiency: %.4g -> %.4g of the peak (matmul_efficiency; speed kept)\n",
                  base.device().matmul_efficiency, calibrated.device().matmul_efficiency);
    }
    std::cout << "Calibrated cluster written to " << *output << "\n";
    if (!plan_output->empty()) {
      write_plan(calibrated_plan(measured_plan, calibration), *plan_output);
      std::cout << "Calibrated plan written to " << *plan_output << "\n";
    }
    return 0;
  };
}

Command add_import_trace_command(CLI::App& app) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto output = std::make_shared<std::string>(), profile = std::make_shared<std::string>();
  auto cluster = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "import-trace",
      "Turn PyTorch profiler (Kineto) Chrome traces of a torch.distributed.pipelining job into a measured\n"
      "pipetwin trace, for `compare` and `calibrate`: every \"PP:<action>\" event (torch labels each pipeline\n"
      "action so) becomes one event of its rank. One file per rank (the rank from distributedInfo, else the\n"
      "file's position) or one merged file (ranks by pid).");
  command->add_option("traces", *inputs, "Chrome trace JSON files written by torch.profiler's export_chrome_trace")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--output,-o", *output, "measured trace to write (JSON lines, or CSV for .csv)")->required();
  command->add_option("--profile", *profile, "the profile (model) the job ran, recorded in the header");
  command->add_option("--cluster,-c", *cluster, "the cluster it ran on, recorded in the header");
  return [inputs, output, profile, cluster] {
    std::vector<KinetoFile> files;
    for (const std::string& path : *inputs) files.push_back({path, json_fields::read_text(path, "profiler trace")});
    const Trace trace = trace_from_kineto(files, *profile, *cluster);
    write_trace(trace, *output);
    std::cout << "Imported " << trace.events.size() << " actions of " << trace.header.workers << " rank(s), "
              << trace.header.stages << " stage(s), " << trace.header.microbatches << " microbatch(es) x "
              << trace.header.iterations << " iteration(s) to " << *output << "\n";
    return 0;
  };
}

}  // namespace pipetwin::cli
