// pipetwin-sim: the simulation commands of pipetwin (simulate, platform, sweep), the part that links
// SimGrid. Users run them as `pipetwin <command>`, which hands over to this executable.
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"

int main(int argc, char** argv) {
  using namespace pipetwin::cli;
  return run_commands(
      argc, argv,
      "pipetwin's simulation commands (SimGrid): simulate a plan's schedule on a cluster, write a cluster\n"
      "as SimGrid XML, sweep configurations. Run them as `pipetwin <command>`.",
      {add_simulate_command, add_platform_command, add_sweep_command});
}
