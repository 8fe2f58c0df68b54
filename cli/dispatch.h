// Dispatch — what each of the three executables' main() does: register its subcommands, parse, run
// the chosen one, and catch every error in one place (a pipetwin::Error as it is; any other exception
// as one line with what it was); exit status 1 on error, CLI11's own status on a usage error.
#pragma once

#include <CLI/CLI.hpp>
#include <initializer_list>
#include <string>

#include "cli/commands.h"

namespace pipetwin::cli {

using CommandAdder = Command (*)(CLI::App&);

int run_commands(int argc, char** argv, const std::string& description, std::initializer_list<CommandAdder> adders);

}  // namespace pipetwin::cli
