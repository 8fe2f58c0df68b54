#include "planner/error.h"

namespace pipetwin {
namespace {

std::string compose(const ErrorContext& context, const std::string& problem, const std::string& fix) {
  std::string where;
  if (!context.file.empty()) {
    where = context.file;
    if (context.line > 0) {
      where += ':';
      where += std::to_string(context.line);
    }
  }
  if (!context.field.empty()) where += (where.empty() ? "" : ": ") + std::string("field '") + context.field + "'";
  std::string text = where.empty() ? problem : where + ": " + problem;
  if (!fix.empty()) text += " (fix: " + fix + ")";
  return text;
}

}  // namespace

Error::Error(ErrorContext context, const std::string& problem, const std::string& fix)
    : std::runtime_error(compose(context, problem, fix)),
      context_(std::move(context)),
      problem_(problem),
      fix_(fix) {}

}  // namespace pipetwin
