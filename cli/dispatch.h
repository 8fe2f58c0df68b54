// Dispatch — what both executables' main() do: register subcommands, parse, run the chosen one, and
// catch every error in one place (a pipetwin::Error as it is; any other exception as one line with
// what it was); exit status 1 on error.
#pragma once

#include <CLI/CLI.hpp>
#include <map>

#include "cli/commands.h"

namespace pipetwin::cli {

class Dispatcher {
 public:
  explicit Dispatcher(CLI::App& app) : app_(app) {}
  void add(Command (*adder)(CLI::App&));
  void add(Command command);  // for the subcommand most recently added to the app
  int run(int argc, char** argv);

 private:
  CLI::App& app_;
  std::map<CLI::App*, Command> commands_;
};

}  // namespace pipetwin::cli
