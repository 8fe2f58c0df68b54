// The slow-spell watch of validate --matrix (exec/slow_spell.h) with scripted core timings, and the
// per-core kernel it times on this machine (exec/core_speed.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <deque>

#include "exec/core_speed.h"
#include "exec/process_setup.h"
#include "exec/slow_spell.h"
#include "planner/error.h"

namespace pipetwin::exec {
namespace {

using ::testing::HasSubstr;

// A watch whose core timings come from a script (the last one repeats) and whose sleeps are summed.
struct Scripted {
  std::deque<std::vector<double>> timings;
  int measured = 0;
  double slept_s = 0.0;
  std::vector<std::string> lines;
  SlowSpellWatch watch(const SlowSpellOptions& options) {
    return SlowSpellWatch(
        options,
        [this] {
          ++measured;
          std::vector<double> now = timings.front();
          if (timings.size() > 1) timings.pop_front();
          return now;
        },
        [this](double seconds) { slept_s += seconds; });
  }
  SlowSpellWatch::Report report() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
  std::string said() const {
    std::string all;
    for (const std::string& line : lines) all += line + "\n";
    return all;
  }
};

TEST(SlowSpell, ARunInTheUsualStateIsTakenOnceWithoutWaiting) {
  Scripted machine{{{1.0, 1.2}}};  // 20% apart: within the default 30%
  SlowSpellWatch watch = machine.watch({});
  int runs = 0;
  const RunTakes takes = watch.take([&] { ++runs; }, [](int) { FAIL() << "nothing to set aside"; }, machine.report());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(takes.set_aside, 0);
  EXPECT_FALSE(takes.kept_in_spell);
  EXPECT_EQ(machine.measured, 2);  // before and after the run
  EXPECT_EQ(machine.slept_s, 0.0);
  EXPECT_TRUE(machine.lines.empty());
  EXPECT_DOUBLE_EQ(watch.usual_seconds(), 1.0);
}

// Core 1 at twice the usual before the run: polls every 2 s until it is back within 30% (1.25).
TEST(SlowSpell, ASpellBeforeTheRunIsWaitedOut) {
  Scripted machine{{{1.0, 2.0}, {1.0, 1.9}, {1.0, 1.25}}};
  SlowSpellWatch watch = machine.watch({});
  int runs = 0;
  const RunTakes takes = watch.take([&] { ++runs; }, [](int) { FAIL(); }, machine.report());
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(takes.set_aside, 0);
  EXPECT_DOUBLE_EQ(machine.slept_s, 4.0);
  EXPECT_THAT(machine.said(), HasSubstr("[core 1 runs 2.0x slower than usual: a slow spell of this machine; waiting up to 60 s"));
  EXPECT_THAT(machine.said(), HasSubstr("[passed after 4 s]"));
}

// A run that ends with core 0 at 1.5x is set aside and taken again; the second take ends usual.
TEST(SlowSpell, ARunEndingInASpellIsSetAsideAndTakenAgain) {
  Scripted machine{{{1.0, 1.0}, {1.5, 1.0}, {1.0, 1.0}}};
  SlowSpellWatch watch = machine.watch({});
  int runs = 0;
  std::vector<int> set_aside;
  const RunTakes takes = watch.take([&] { ++runs; }, [&](int take) { set_aside.push_back(take); }, machine.report());
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(set_aside, std::vector<int>{1});
  EXPECT_EQ(takes.set_aside, 1);
  EXPECT_FALSE(takes.kept_in_spell);
  EXPECT_THAT(machine.said(), HasSubstr("[core 0 ran 1.5x slower after the run: a slow spell; set aside, taking it again]"));
}

// A spell that does not pass: each wait ends after max_wait_s (polls of 2, 2 and the 1 s left), the
// run goes ahead, and after `retakes` more takes the last one is kept and said to be in a spell.
TEST(SlowSpell, AStubbornSpellIsWaitedForAtMostTheLimitAndTheLastTakeKept) {
  Scripted machine{{{1.0, 1.0}, {1.0, 3.0}}};  // usual 1.0 from the first check, then core 1 at 3x for good
  SlowSpellOptions options;
  options.max_wait_s = 5.0;
  options.retakes = 1;
  SlowSpellWatch watch = machine.watch(options);
  int runs = 0;
  std::vector<int> set_aside;
  const RunTakes takes = watch.take([&] { ++runs; }, [&](int take) { set_aside.push_back(take); }, machine.report());
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(set_aside, std::vector<int>{1});
  EXPECT_TRUE(takes.kept_in_spell);
  EXPECT_DOUBLE_EQ(machine.slept_s, 5.0);  // the first take started usual; the second waited 2 + 2 + 1
  EXPECT_THAT(machine.said(), HasSubstr("[still 3.0x slower after 5 s: running anyway]"));
  EXPECT_THAT(machine.said(), HasSubstr("[core 1 ran 3.0x slower after the run; kept, as the last of 2 takes]"));
}

// The usual is the fastest time any core has shown: a check made while both cores were slow does not
// become the usual once a quicker one is seen.
TEST(SlowSpell, TheUsualIsTheFastestTimeSeen) {
  Scripted machine{{{2.0, 2.0}, {1.0, 2.0}, {1.0, 1.0}}};
  SlowSpellWatch watch = machine.watch({});
  watch.wait_for_usual(machine.report());  // 2.0 is the usual so far: nothing to wait for
  EXPECT_DOUBLE_EQ(watch.usual_seconds(), 2.0);
  EXPECT_TRUE(machine.lines.empty());
  watch.wait_for_usual(machine.report());  // core 0 at 1.0: core 1 is twice the usual now
  EXPECT_DOUBLE_EQ(watch.usual_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(machine.slept_s, 2.0);
  EXPECT_THAT(machine.said(), HasSubstr("core 1 runs 2.0x slower"));
}

TEST(SlowSpell, ToleranceZeroMeasuresNothingAndNegativeOptionsAreRefused) {
  Scripted machine{{{1.0, 5.0}}};
  SlowSpellOptions off;
  off.tolerance = 0.0;
  SlowSpellWatch watch = machine.watch(off);
  int runs = 0;
  watch.wait_for_usual(machine.report());
  EXPECT_EQ(watch.take([&] { ++runs; }, [](int) { FAIL(); }, machine.report()).set_aside, 0);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(machine.measured, 0);
  for (const auto& [field, change] : std::vector<std::pair<std::string, std::function<void(SlowSpellOptions&)>>>{
           {"--spell-tolerance", [](SlowSpellOptions& o) { o.tolerance = -0.1; }},
           {"--spell-wait-s", [](SlowSpellOptions& o) { o.max_wait_s = -1; }},
           {"--spell-retakes", [](SlowSpellOptions& o) { o.retakes = -1; }}}) {
    SlowSpellOptions bad;
    change(bad);
    try {
      machine.watch(bad);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(field));
    }
  }
}

// On this machine: one time per core this process may use, each a few milliseconds at most, and the
// process's affinity as it was.
TEST(CoreSpeed, OneTimePerUsableCoreAndTheAffinityRestored) {
  cpu_set_t before, after;
  CPU_ZERO(&before);
  CPU_ZERO(&after);
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const std::vector<double> seconds = kernel_seconds_per_core();
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after));
  ASSERT_EQ(static_cast<int>(seconds.size()), usable_cores());
  for (double s : seconds) {
    EXPECT_GT(s, 0.0);
    EXPECT_LT(s, 1.0);  // ~2.5 ms on the machine here; a second would mean no kernel ran as written
  }
}

}  // namespace
}  // namespace pipetwin::exec
