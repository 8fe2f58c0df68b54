// The commands that run in another executable, as subcommands of `pipetwin`: the simulation
// commands (simulate, platform, sweep) live in pipetwin-sim, which links SimGrid, and the training
// commands (profile, run, worker, validate, probe) in pipetwin-exec, which links libtorch and SimGrid, so
// that planning, schedules and analysis start without loading either. Each subcommand hands its
// arguments, unparsed (--help included), to the executable beside this one.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "cli/executable_folder.h"
#include "planner/error.h"

namespace pipetwin::cli {
namespace {

std::string beside_this_executable(const std::string& name) {
  const std::string folder = executable_folder();
  return (std::filesystem::path(folder.empty() ? "." : folder) / name).string();
}

Command forward(CLI::App& app, const std::string& name, const std::string& description, const std::string& executable) {
  CLI::App* command = app.add_subcommand(name, description + "\n(`pipetwin " + name + " --help` for its options)");
  command->allow_extras();
  command->prefix_command();
  command->set_help_flag();  // --help goes to pipetwin-exec, which knows the options
  return [command, name, executable]() -> int {  // execv returns only on failure
    const std::string binary = beside_this_executable(executable);
    if (::access(binary.c_str(), X_OK) != 0) {
      const bool training = executable == "pipetwin-exec";
      throw Error({binary, 0, ""}, "`pipetwin " + name + "` runs in " + executable + ", and this build has none",
                  training ? "build with libtorch (the default; -DPIPETWIN_WITH_TORCH=ON), or use a build that has it"
                           : "build it (make build), or use a complete build");
    }
    std::vector<std::string> arguments{"pipetwin", name};  // its usage lines read `pipetwin <command>`
    for (const std::string& argument : command->remaining()) arguments.push_back(argument);
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    throw Error({binary, 0, ""}, "cannot start " + executable + ": " + std::strerror(errno),
                "check that it is executable");
  };
}

}  // namespace

Command add_simulate_forwarder(CLI::App& app) { return forward(app, "simulate", kSimulateDescription, "pipetwin-sim"); }
Command add_platform_forwarder(CLI::App& app) { return forward(app, "platform", kPlatformDescription, "pipetwin-sim"); }
Command add_sweep_forwarder(CLI::App& app) { return forward(app, "sweep", kSweepDescription, "pipetwin-sim"); }
Command add_profile_forwarder(CLI::App& app) { return forward(app, "profile", kProfileDescription, "pipetwin-exec"); }
Command add_run_forwarder(CLI::App& app) { return forward(app, "run", kRunDescription, "pipetwin-exec"); }
Command add_worker_forwarder(CLI::App& app) { return forward(app, "worker", kWorkerDescription, "pipetwin-exec"); }
Command add_validate_forwarder(CLI::App& app) { return forward(app, "validate", kValidateDescription, "pipetwin-exec"); }
Command add_probe_forwarder(CLI::App& app) { return forward(app, "probe", kProbeDescription, "pipetwin-exec"); }

}  // namespace pipetwin::cli
