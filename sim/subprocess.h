// Child processes for simulations: SimGrid's engine runs once per process, so anything that runs
// several simulations (tests, sweeps) runs each in a forked child that hands back a string.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

namespace pipetwin::sim {

struct Child {
  pid_t pid = -1;
  int output_fd = -1;
};

// Forks; the child runs `work` and writes what it returns (or, if it throws, a JSON object
// {"error": message}) to the parent, then exits.
Child start_child(const std::function<std::string()>& work);

// Reads everything the child wrote and reaps it. Throws Error if it died without a word.
std::string finish_child(Child child);

// The message of a child whose work threw (the {"error": message} reply start_child writes), or
// nullopt for any other reply; only a reply in that form is parsed.
std::optional<std::string> child_error(const std::string& reply);

}  // namespace pipetwin::sim
