#include "exec/slow_spell.h"

#include <algorithm>
#include <cstdio>

#include "planner/error.h"

namespace pipetwin::exec {
namespace {

std::string times_text(double slowdown) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fx", slowdown);
  return text;
}

}  // namespace

SlowSpellWatch::SlowSpellWatch(const SlowSpellOptions& options, Measure measure, Sleep sleep)
    : options_(options), measure_(std::move(measure)), sleep_(std::move(sleep)) {
  auto refuse_negative = [](double value, const char* option, const char* fix) {
    if (value < 0) throw Error({"", 0, option}, std::string(option) + " must not be negative", fix);
  };
  refuse_negative(options.tolerance, "--spell-tolerance", "pass 0.3 (the default) or 0 to run without the watch");
  refuse_negative(options.max_wait_s, "--spell-wait-s", "pass 60 (the default)");
  refuse_negative(options.poll_s, "spell poll", "poll every 2 s (the default)");
  refuse_negative(options.retakes, "--spell-retakes", "pass 2 (the default)");
}

SlowSpellWatch::Check SlowSpellWatch::check() {
  const std::vector<double> seconds = measure_();
  Check result;
  if (seconds.empty()) return result;
  const auto fastest = std::min_element(seconds.begin(), seconds.end());
  const auto slowest = std::max_element(seconds.begin(), seconds.end());
  if (*fastest > 0 && (usual_s_ == 0.0 || *fastest < usual_s_)) usual_s_ = *fastest;
  if (usual_s_ > 0) result.slowdown = *slowest / usual_s_;
  result.core = static_cast<int>(slowest - seconds.begin());
  return result;
}

void SlowSpellWatch::wait_for_usual(const Report& report) {
  if (options_.tolerance <= 0.0) return;
  Check now = check();
  if (!in_spell(now)) return;
  report("  [core " + std::to_string(now.core) + " runs " + times_text(now.slowdown) +
         " slower than usual: a slow spell of this machine; waiting up to " +
         std::to_string(static_cast<int>(options_.max_wait_s)) + " s for it to pass]");
  double waited_s = 0.0;
  while (in_spell(now) && waited_s < options_.max_wait_s) {
    const double pause_s = std::min(options_.poll_s, options_.max_wait_s - waited_s);
    sleep_(pause_s);
    waited_s += pause_s;
    now = check();
  }
  report(in_spell(now) ? "  [still " + times_text(now.slowdown) + " slower after " +
                             std::to_string(static_cast<int>(waited_s)) + " s: running anyway]"
                       : "  [passed after " + std::to_string(static_cast<int>(waited_s)) + " s]");
}

RunTakes SlowSpellWatch::take(const std::function<void()>& run, const std::function<void(int)>& set_aside,
                              const Report& report) {
  RunTakes takes;
  if (options_.tolerance <= 0.0) {
    run();
    return takes;
  }
  for (;;) {
    wait_for_usual(report);
    run();
    const Check after = check();
    if (!in_spell(after)) return takes;
    if (takes.set_aside == options_.retakes) {
      takes.kept_in_spell = true;
      report("  [core " + std::to_string(after.core) + " ran " + times_text(after.slowdown) +
             " slower after the run; kept, as the last of " + std::to_string(options_.retakes + 1) + " takes]");
      return takes;
    }
    ++takes.set_aside;
    set_aside(takes.set_aside);
    report("  [core " + std::to_string(after.core) + " ran " + times_text(after.slowdown) +
           " slower after the run: a slow spell; set aside, taking it again]");
  }
}

}  // namespace pipetwin::exec
