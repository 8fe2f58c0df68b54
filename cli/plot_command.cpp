// `pipetwin plot TRACE -o PNG`: the schedule timeline of a trace as a picture, drawn by
// notebooks/pipetwin_plots.py with Debian's python3 (matplotlib), the same code the notebooks use.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "planner/error.h"

namespace pipetwin::cli {

Command add_plot_command(CLI::App& app) {
  auto trace = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto all = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "plot", "Draw a trace (simulated or measured) as a timeline PNG: one row per worker, a colour per action kind,\n"
              "microbatch numbers on the boxes. Needs /usr/bin/python3 with matplotlib and pandas (make deps).");
  command->add_option("trace", *trace, "trace JSON lines (pipetwin simulate/run -o)")->required()->check(CLI::ExistingFile);
  command->add_option("--output,-o", *output, "PNG to write")->required();
  command->add_flag("--all-actions", *all, "draw sends, receives and all-reduces too");
  return [trace, output, all] {
    const std::string python = "/usr/bin/python3";
    const std::string script = std::string(PIPETWIN_NOTEBOOKS_DIR) + "/pipetwin_plots.py";
    if (!std::filesystem::exists(python) || !std::filesystem::exists(script)) {
      throw Error({script, 0, ""}, "cannot find " + python + " or the plotting script",
                  "run make deps; plot from a source checkout");
    }
    std::vector<std::string> arguments{python, script, "timeline", *trace, "-o", *output};
    if (*all) arguments.push_back("--all-actions");
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::cout.flush();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execv(python.c_str(), argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw Error({*trace, 0, ""}, "drawing failed (see the message above)", "check the trace with pipetwin's readers");
    }
    std::cout << "Timeline written to " << *output << "\n";
    return 0;
  };
}

}  // namespace pipetwin::cli
