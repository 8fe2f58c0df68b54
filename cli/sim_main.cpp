// pipetwin-sim: the simulation commands of pipetwin (simulate, platform, sweep), the part that links
// SimGrid. Users run them as `pipetwin <command>`, which hands over to this executable.
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"

int main(int argc, char** argv) {
  CLI::App app{"pipetwin's simulation commands (SimGrid): simulate a plan's schedule on a cluster, write a cluster\n"
               "as SimGrid XML, sweep configurations. Run them as `pipetwin <command>`."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetwin 0.1.0");
  pipetwin::cli::Dispatcher dispatcher(app);
  dispatcher.add(pipetwin::cli::add_simulate_command);
  dispatcher.add(pipetwin::cli::add_platform_command);
  dispatcher.add(pipetwin::cli::add_sweep_command);
  return dispatcher.run(argc, argv);
}
