#include "cli/dispatch.h"

#include <filesystem>
#include <iostream>
#include <string>

#include "planner/error.h"

namespace pipetwin::cli {

void Dispatcher::add(Command (*adder)(CLI::App&)) { add(adder(app_)); }

void Dispatcher::add(Command command) { commands_[app_.get_subcommands({}).back()] = std::move(command); }

int Dispatcher::run(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app_.exit(error);
  }
  try {
    for (auto& [subcommand, command] : commands_) {
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
