// pipetwin-exec: the training commands of pipetwin (profile, run, worker, validate), the part that
// links libtorch. Users run them as `pipetwin <command>`, which hands over to this executable.
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"

int main(int argc, char** argv) {
  CLI::App app{"pipetwin's training commands (libtorch): profile a zoo model, run a schedule for real, run one\n"
               "worker, validate predicted against measured. Run them as `pipetwin <command>`."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetwin 0.1.0");
  pipetwin::cli::Dispatcher dispatcher(app);
  dispatcher.add(pipetwin::cli::add_profile_command);
  dispatcher.add(pipetwin::cli::add_run_command);
  dispatcher.add(pipetwin::cli::add_worker_command);
  dispatcher.add(pipetwin::cli::add_validate_command);
  return dispatcher.run(argc, argv);
}
