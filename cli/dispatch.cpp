#include "cli/dispatch.h"

#include <filesystem>
#include <iostream>
#include <map>

#include "planner/error.h"

namespace pipetwin::cli {

int run_commands(int argc, char** argv, const std::string& description, std::initializer_list<CommandAdder> adders) {
  CLI::App app{description};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetwin 0.1.0");
  std::map<CLI::App*, Command> commands;
  for (CommandAdder add : adders) {
    Command command = add(app);
    commands[app.get_subcommands({}).back()] = std::move(command);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    // A bad command line is bad input like any other: one line, the fix, exit status 1.
    const auto chosen = app.get_subcommands();
    const std::string command = chosen.empty() ? "" : chosen.front()->get_name() + " ";
    std::string what = error.what();
    what = what.substr(0, what.find('\n'));
    std::cerr << "pipetwin: error: " << what << " (fix: see pipetwin " << command << "--help)\n";
    return 1;
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

}  // namespace pipetwin::cli
