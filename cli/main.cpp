// pipetwin: plan, schedule, simulate and run pipeline-parallel DNN training. This executable links
// neither SimGrid nor libtorch (it starts in milliseconds); the commands that need them are handed to
// pipetwin-sim and pipetwin-exec (forwarding.cpp).
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"

int main(int argc, char** argv) {
  CLI::App app{
      "pipetwin: plan how to split a DNN over a cluster for pipeline-parallel training (PipeDream style),\n"
      "build the schedule, predict what it costs on a SimGrid model of the cluster, run it for real on\n"
      "libtorch, and compare the two.\n\n"
      "Example:\n"
      "  pipetwin plan --profile ../shared/profiles/pipedream/vgg16.txt \\\n"
      "                --cluster platforms/pipedream-cluster-a.json -o plan.json\n"
      "  pipetwin simulate --cluster platforms/pipedream-cluster-a.json --plan plan.json -o trace.jsonl\n"
      "  pipetwin validate --model mlp -o validation/\n"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetwin 0.1.0");
  pipetwin::cli::Dispatcher dispatcher(app);
  dispatcher.add(pipetwin::cli::add_plan_command);
  dispatcher.add(pipetwin::cli::add_convert_command);
  dispatcher.add(pipetwin::cli::add_schedule_command);
  dispatcher.add(pipetwin::cli::add_simulate_forwarder);
  dispatcher.add(pipetwin::cli::add_platform_forwarder);
  dispatcher.add(pipetwin::cli::add_sweep_forwarder);
  dispatcher.add(pipetwin::cli::add_profile_forwarder);
  dispatcher.add(pipetwin::cli::add_run_forwarder);
  dispatcher.add(pipetwin::cli::add_worker_forwarder);
  dispatcher.add(pipetwin::cli::add_plot_command);
  dispatcher.add(pipetwin::cli::add_compare_command);
  dispatcher.add(pipetwin::cli::add_calibrate_command);
  dispatcher.add(pipetwin::cli::add_validate_forwarder);
  return dispatcher.run(argc, argv);
}
