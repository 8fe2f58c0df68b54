// pipetwin-exec: the training commands of pipetwin (profile, run, worker, validate, probe), the part that
// links libtorch. Users run them as `pipetwin <command>`, which hands over to this executable.
#include <CLI/CLI.hpp>

#include "cli/dispatch.h"
#include "exec/process_setup.h"

int main(int argc, char** argv) {
  using namespace pipetwin::cli;
  pipetwin::exec::report_fatal_signals();
  return run_commands(
      argc, argv,
      "pipetwin's training commands (libtorch): profile a zoo model, run a schedule for real, run one\n"
      "worker, validate predicted against measured. Run them as `pipetwin <command>`.",
      {add_profile_command, add_run_command, add_worker_command, add_validate_command, add_probe_command});
}
