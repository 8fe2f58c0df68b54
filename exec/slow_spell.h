// Slow spells — keeping a shared machine's slow spells out of the runs `validate --matrix` measures.
//
// The twin predicts the machine in its usual state, the one its calibration measured. On the 2-core
// machine here one core at a time runs, in episodes of 1-15 s, about twice as slow (core_speed.h), and
// a run made then takes longer (VGG's 1F1B: 15% by the median, the worker on that core computing 24%
// slower; GPT's runs up to 1.7 times as long): such runs measured another machine. The watch times a kernel on
// every core before each run and waits while one is slower than the usual (the fastest any core has
// shown so far) by more than `tolerance`, at most `max_wait_s`; after the run it times them again,
// and a run that ends in a spell is set aside and taken again, at most `retakes` times (the last take
// is kept whatever it shows, and counted). What it measures and sleeps with are given, so the rule is
// tested without a machine in a spell.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace pipetwin::exec {

struct SlowSpellOptions {
  double tolerance = 0.3;   // a core this much slower than the usual is in a spell; 0: no watch at all
  double max_wait_s = 60.0; // the longest wait before a run for a spell to pass
  double poll_s = 2.0;      // seconds between checks while waiting
  int retakes = 2;          // more takes of a run that ended in a spell
};

// What one run took: how many takes were set aside, and whether the kept one ended in a spell too.
struct RunTakes {
  int set_aside = 0;
  bool kept_in_spell = false;
};

class SlowSpellWatch {
 public:
  using Measure = std::function<std::vector<double>()>;  // the kernel's seconds on each core, now
  using Sleep = std::function<void(double seconds)>;
  using Report = std::function<void(const std::string& line)>;

  // Throws pipetwin::Error naming the option for a negative tolerance, wait, poll or retake count.
  SlowSpellWatch(const SlowSpellOptions& options, Measure measure, Sleep sleep);

  // Takes `run` once, or again while it ends in a spell; before each take, waits for the usual state.
  // `set_aside(k)` is called with k = 1, 2, ... for each take found in a spell that is taken again.
  RunTakes take(const std::function<void()>& run, const std::function<void(int take)>& set_aside, const Report& report);

  // Waits while a core is in a spell, at most max_wait_s (nothing with tolerance 0), saying so.
  void wait_for_usual(const Report& report);

  double usual_seconds() const { return usual_s_; }

 private:
  struct Check {
    double slowdown = 1.0;  // the slowest core's time over the usual
    int core = 0;           // which one (its position among the cores this process may use)
  };
  Check check();
  bool in_spell(const Check& c) const { return c.slowdown > 1.0 + options_.tolerance; }

  SlowSpellOptions options_;
  Measure measure_;
  Sleep sleep_;
  double usual_s_ = 0.0;  // the fastest kernel time seen on any core (0: none yet)
};

}  // namespace pipetwin::exec
