// pipetwin::Error — the one exception type of the project.
//
// Every failure a user can cause (a malformed file, an impossible plan, a bad flag) is reported as an
// Error that names where the problem is (file, line, field), what is wrong and how to fix it. The CLI
// catches it once, prints what() and exits non-zero. Library code never prints and never exits.
#pragma once

#include <stdexcept>
#include <string>

namespace pipetwin {

// Where an error was found. Every member is optional; what() prints the ones that are set.
struct ErrorContext {
  std::string file;   // path of the offending input, e.g. "profiles/vgg16.txt"
  int line = 0;       // 1-based line number, 0 when not known or not meaningful (JSON)
  std::string field;  // offending field or JSON pointer, e.g. "levels[1].bandwidth_bytes_per_s"
};

class Error : public std::runtime_error {
 public:
  Error(ErrorContext context, const std::string& problem, const std::string& fix = "");

  const ErrorContext& context() const { return context_; }
  const std::string& problem() const { return problem_; }
  const std::string& fix() const { return fix_; }

 private:
  ErrorContext context_;
  std::string problem_;
  std::string fix_;
};

}  // namespace pipetwin
