// pipetwin: plan, schedule, simulate and run pipeline-parallel DNN training.
// The one place where errors are caught: a pipetwin::Error is printed as it is; any other exception
// (a filesystem error, a torch error, bad_alloc) as one line with what it was; the exit code is 1.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "planner/error.h"

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
  std::map<CLI::App*, pipetwin::cli::Command> commands;
  auto add = [&](pipetwin::cli::Command (*adder)(CLI::App&)) {
    const std::size_t before = app.get_subcommands({}).size();
    pipetwin::cli::Command command = adder(app);
    commands[app.get_subcommands({})[before]] = std::move(command);
  };
  add(pipetwin::cli::add_plan_command);
  add(pipetwin::cli::add_convert_command);
  add(pipetwin::cli::add_schedule_command);
  add(pipetwin::cli::add_simulate_command);
  add(pipetwin::cli::add_platform_command);
  add(pipetwin::cli::add_sweep_command);
  add(pipetwin::cli::add_profile_command);
  add(pipetwin::cli::add_run_command);
  add(pipetwin::cli::add_worker_command);
  add(pipetwin::cli::add_plot_command);
  add(pipetwin::cli::add_compare_command);
  add(pipetwin::cli::add_calibrate_command);
  add(pipetwin::cli::add_validate_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    for (auto& [subcommand, command] : commands) {
      if (subcommand->parsed()) return command();
    }
  } catch (const pipetwin::Error& error) {
    std::cerr << "pipetwin: error: " << error.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& error) {
    std::cerr << "pipetwin: error: " << error.path1().string() << ": " << error.code().message()
              << " (fix: check that the path exists and is writable)\n";
    return 1;
  } catch (const std::exception& error) {
    std::string what = error.what();
    what = what.substr(0, what.find('\n'));  // one line: no C++ backtrace
    std::cerr << "pipetwin: error: " << what << " (fix: check the paths and inputs given; report this if they are right)\n";
    return 1;
  }
  return 1;
}
