// pipetwin: plan, schedule, simulate and run pipeline-parallel DNN training. This executable links
// neither SimGrid nor libtorch (it starts in milliseconds); the commands that need them are handed to
// pipetwin-sim and pipetwin-exec (forwarding.cpp).
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"

int main(int argc, char** argv) {
  using namespace pipetwin::cli;
  return run_commands(
      argc, argv,
      "pipetwin: plan how to split a DNN over a cluster for pipeline-parallel training (PipeDream style),\n"
      "build the schedule, predict what it costs on a SimGrid model of the cluster, run it for real on\n"
      "libtorch, and compare the two.\n\n"
      "Example:\n"
      "  pipetwin plan --profile ../shared/profiles/pipedream/vgg16.txt \\\n"
      "                --cluster platforms/pipedream-cluster-a.json -o plan.json\n"
      "  pipetwin schedule --plan plan.json -s 1f1b -m 8 -o schedule.csv\n"
      "  pipetwin simulate --cluster platforms/pipedream-cluster-a.json --plan plan.json \\\n"
      "                    --schedule-file schedule.csv -o trace.jsonl\n"
      "  pipetwin validate --model mlp -o validation/\n",
      {add_plan_command, add_model_command, add_search_command, add_convert_command, add_schedule_command, add_simulate_forwarder, add_platform_forwarder,
       add_sweep_forwarder, add_profile_forwarder, add_run_forwarder, add_worker_forwarder, add_plot_command,
       add_compare_command, add_calibrate_command, add_import_trace_command, add_validate_forwarder,
       add_probe_forwarder});
}
