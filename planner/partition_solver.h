// Partition solver — the dynamic program of PipeDream's optimizer, one level of the cluster at a time
// (internal to partition_optimizer.cpp; not part of the planner's interface).
//
// A[i][j][m] (a Table of Cells) is the best time of states i..j on m+1 units of a level: one stage
// replicated on all of them, or the best split after a state k, the last stage on m' units and A of
// the part before it on the rest. Each level sees as the compute of a segment the level below's best
// time on all its units (LevelCompute). Chains take a bound-pruned walk over split points that gives
// the same tables (ChainBounds); general DAGs split only after an ancestor. partition_optimizer.cpp
// solves the levels innermost first, then unwinds them outermost first into stages.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "planner/antichain_states.h"
#include "planner/cost_model.h"
#include "planner/partition_optimizer.h"

namespace pipetwin::partition_solver {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
inline bool is_none(double value) { return std::isnan(value); }

// One entry of A: the best time, and how it was reached (no split = one replicated stage).
struct Cell {
  double value = kNone;
  std::int32_t split_state = -1;   // k: the last stage is k+1..j; -1 when there is no split
  std::int16_t rest_machines = 0;  // m - m': index into A[i][k][.] for the part before the split
  std::int16_t replicas = 0;       // m' for a split, m+1 for one replicated stage
};

// A[i][j][m] for j >= i, stored row by row (and within a row, m-major so that a walk over j for
// fixed i and m is contiguous); rows beyond `rows` are not kept.
class Table {
 public:
  Table(std::size_t states, std::size_t rows, int machines) : states_(states), machines_(machines) {
    offsets_.resize(rows + 1, 0);
    for (std::size_t i = 0; i < rows; ++i) offsets_[i + 1] = offsets_[i] + (states - std::min(i, states)) * machines;
    cells_.resize(offsets_.back());
  }
  std::size_t rows() const { return offsets_.size() - 1; }
  int machines() const { return machines_; }
  Cell& at(std::size_t i, std::size_t j, int m) { return cells_[index(i, j, m)]; }
  const Cell& at(std::size_t i, std::size_t j, int m) const { return cells_[index(i, j, m)]; }

 private:
  std::size_t index(std::size_t i, std::size_t j, int m) const {
    return offsets_[i] + static_cast<std::size_t>(m) * (states_ - i) + (j - i);
  }

  std::size_t states_;
  int machines_;
  std::vector<std::size_t> offsets_;
  std::vector<Cell> cells_;
};

// Segment sums over states: a segment "from boundary i to state j" covers states i..j, where
// boundary 0 is the start of the model and boundary i > 0 is just after state i-1.
class SegmentSums {
 public:
  explicit SegmentSums(std::vector<double> cumulative) : cumulative_(std::move(cumulative)) {}
  double operator()(std::size_t i, std::size_t j) const {
    return i == 0 ? cumulative_[j] : cumulative_[j] - cumulative_[i - 1];
  }

 private:
  std::vector<double> cumulative_;
};

// The compute time a level sees for states i..j: summed fwd+bwd at the innermost level, the level
// below's best pipeline time on all its units further out.
class LevelCompute {
 public:
  // Copies the level below's full-width answers into a compact j-major triangle, so that the
  // optimizer's walks over split points (fixed j, neighbouring i) stay in cache.
  LevelCompute(const SegmentSums& raw, const Table* below, std::size_t states) : raw_(raw) {
    if (below == nullptr) return;
    by_end_.resize(states * (states + 1) / 2);
    for (std::size_t i = 0; i < states; ++i) {
      for (std::size_t j = i; j < states; ++j) by_end_[j * (j + 1) / 2 + i] = below->at(i, j, below->machines() - 1).value;
    }
  }
  double operator()(std::size_t i, std::size_t j) const {
    return by_end_.empty() ? raw_(i, j) : by_end_[j * (j + 1) / 2 + i];
  }

 private:
  const SegmentSums& raw_;
  std::vector<double> by_end_;  // [j][i] for i <= j; empty at the innermost level
};

struct LevelInputs {
  int machines = 1;         // W: units at this level
  double bandwidth = 0.0;   // B
  int inner_workers = 1;    // g: units of the level below inside one unit here (1 at the innermost)
  int workers_per_unit = 1; // G: workers inside one unit here (product of the counts below)
  bool final_level = false;
};

// Activation-and-gradient transfer time of each state's output on m' replicas at one level.
class TransferTimes {
 public:
  TransferTimes(const AntichainStates& states, const CostModel& cost, const LevelInputs& level)
      : stride_(static_cast<std::size_t>(level.machines) + 1), times_(states.states.size() * stride_, 0.0) {
    for (std::size_t k = 0; k < states.states.size(); ++k) {
      for (int replicas = 1; replicas <= level.machines; ++replicas) {
        times_[k * stride_ + replicas] =
            cost.activation_transfer_s(states.states[k].output_activation_bytes, replicas, level.bandwidth);
      }
    }
  }
  double operator()(std::size_t state, int replicas) const { return times_[state * stride_ + replicas]; }

 private:
  std::size_t stride_;
  std::vector<double> times_;
};

// What split_chain() needs beyond the table: the last stage's time for every (j, m', k), exact
// and as a running minimum over k' <= k (a lower bound for every split point left of k), and the
// running minimum of A[i][k'][mm] over k' >= k (a lower bound for every split point right of k).
// On levels that keep every row the last-stage times are tabulated once (they do not depend on i
// or m); on the outermost level, which keeps only row 0, they are computed when asked.
class ChainBounds {
 public:
  ChainBounds(std::size_t states, const LevelInputs& level, int max_last_replicas, const LevelCompute& compute,
              const SegmentSums& parameters, const CostModel& cost)
      : n_(states),
        compute_(compute),
        parameters_(parameters),
        first_part_min_(static_cast<std::size_t>(level.machines) * states),
        last_compute_min_(states * (states + 1) / 2),
        crossing(max_last_replicas + 1) {
    for (int r = 0; r <= max_last_replicas; ++r) {
      formulas_.push_back(cost.stage_formula(std::max(r, 1), level.bandwidth, false, level.inner_workers));
    }
    for (std::size_t j = 1; j < n_; ++j) {
      double running = INFINITY;
      for (std::size_t k = 0; k < j; ++k) {
        const double value = compute(k + 1, j);
        if (!is_none(value)) running = std::min(running, value);
        last_compute_min_[triangle(j) + k] = running;
      }
    }
  }

  // Time of the last stage k+1..j on r replicas (kNone when its compute is none).
  double last_stage(std::size_t j, int r, std::size_t k) const {
    return formulas_[r](compute_(k + 1, j), parameters_(k + 1, j));
  }
  // A lower bound on last_stage(j, r, k') for every k' <= k: the compute is at least the running
  // minimum and the parameters only grow as k' moves left.
  double last_stage_lower(std::size_t j, int r, std::size_t k) const {
    return formulas_[r](last_compute_min_[triangle(j) + k], parameters_(k + 1, j));
  }

  // Records min over k' >= k of A[i][k'][mm], once A[i][.][mm] is final.
  void fill_first_part(const Table& table, std::size_t i, int mm) {
    double running = INFINITY;
    for (std::size_t k = n_; k-- > i;) {
      const double value = table.at(i, k, mm).value;
      if (!is_none(value)) running = std::min(running, value);
      first_part_min_[static_cast<std::size_t>(mm) * n_ + k] = running;
    }
  }
  double first_part_lower(int mm, std::size_t k) const { return first_part_min_[static_cast<std::size_t>(mm) * n_ + k]; }

 private:
  static std::size_t triangle(std::size_t j) { return j * (j - 1) / 2; }

  std::size_t n_;
  const LevelCompute& compute_;
  const SegmentSums& parameters_;
  std::vector<StageFormula> formulas_;  // last stage (not first of its segment), by replicas
  std::vector<double> first_part_min_;
  std::vector<double> last_compute_min_;

 public:
  std::vector<std::size_t> crossing;  // per m': where the walk starts; moves right as j grows
};

class Solver {
 public:
  Solver(const AntichainStates& states, const OptimizerOptions& options, const CostModel& cost)
      : states_(states),
        options_(options),
        cost_(cost),
        n_(states.states.size()),
        activations_(cumulative([](const AntichainState& s) { return s.activation_bytes; })),
        parameters_(cumulative([](const AntichainState& s) { return s.param_bytes; })),
        raw_compute_(cumulative([](const AntichainState& s) { return s.compute_s; })) {
    const std::size_t words = (n_ + 63) / 64;
    ancestor_bits_.assign(n_ * words, 0);
    for (std::size_t j = 0; j < n_; ++j) {
      for (std::size_t k : states.predecessors[j]) ancestor_bits_[j * words + k / 64] |= std::uint64_t{1} << (k % 64);
    }
  }

  const SegmentSums& parameters() const { return parameters_; }
  const SegmentSums& activations() const { return activations_; }
  const SegmentSums& raw_compute() const { return raw_compute_; }

  // Fills one level's table. `compute(i, j)` is the time the level sees for states i..j (kNone if none).
  Table solve_level(const LevelInputs& level, const LevelCompute& compute) const {
    const std::size_t rows = level.final_level ? 1 : n_;
    Table table(n_, rows, level.machines);
    const int base_machines = options_.straight ? 1 : level.machines;
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = i; j < n_; ++j) {
        const double compute_s = compute(i, j);
        for (int m = 0; m < base_machines; ++m) {
          const double stash_copies = std::ceil(double(level.machines - (m + 1)) / (m + 1));
          if (!fits(stash_copies, activations_(i, j) + parameters_(i, j))) continue;
          Cell& cell = table.at(i, j, m);
          cell.replicas = static_cast<std::int16_t>(m + 1);
          if (!is_none(compute_s)) {
            cell.value = cost_.stage_time_s(compute_s, parameters_(i, j), m + 1, level.bandwidth, true,
                                            level.inner_workers);
          }
        }
      }
    }
    const TransferTimes transfer(states_, cost_, level);
    const bool chain = options_.use_chain_fast_path && states_.is_chain;
    if (!chain) {
      for (std::size_t i = 0; i < rows; ++i) {
        for (int m = 1; m < level.machines; ++m) {
          for (std::size_t j = i + 1; j < n_; ++j) split(table, level, compute, transfer, i, j, m);
        }
      }
      return table;
    }
    ChainBounds bounds(n_, level, options_.straight ? 1 : level.machines - 1, compute, parameters_, cost_);
    for (std::size_t i = 0; i < rows; ++i) {
      bounds.fill_first_part(table, i, 0);
      for (int m = 1; m < level.machines; ++m) {
        std::fill(bounds.crossing.begin(), bounds.crossing.end(), i);
        for (std::size_t j = i + 1; j < n_; ++j) split_chain(table, level, transfer, bounds, i, j, m);
        bounds.fill_first_part(table, i, m);
      }
    }
    return table;
  }

 private:
  template <typename Field>
  SegmentSums cumulative(Field field) const {
    std::vector<double> values;
    for (const AntichainState& state : states_.states) values.push_back(field(state));
    return SegmentSums(std::move(values));
  }

  bool is_ancestor(std::size_t k, std::size_t j) const {
    const std::size_t words = (n_ + 63) / 64;
    return (ancestor_bits_[j * words + k / 64] >> (k % 64)) & 1U;
  }

  bool fits(double copies, double bytes) const {
    if (!options_.memory_limit_bytes) return true;
    // PipeDream counts only the extra stashed copies; a worker holds at least one copy of its stage.
    return std::max(1.0, copies) * bytes <= *options_.memory_limit_bytes;
  }

  // A[i][j][m] = min(one replicated stage, best split after a predecessor k of j).
  // The time of splitting A[i][j][m] after state k with `last_replicas` for the last stage, or kNone
  // when that split is impossible (memory, or nothing before it).
  double split_time(const Table& table, const LevelInputs& level, const LevelCompute& compute,
                    const TransferTimes& transfer, std::size_t i, std::size_t j, int m, std::size_t k,
                    int last_replicas) const {
    const double last_compute_s = compute(k + 1, j);
    if (is_none(last_compute_s)) return kNone;
    const double last_params = parameters_(k + 1, j);
    if (options_.memory_limit_bytes) {
      const double stash_copies = std::ceil(double(level.machines - (m + 1)) / last_replicas);
      if (!fits(stash_copies, activations_(k + 1, j) + last_params)) return kNone;
    }
    const double before = table.at(i, k, m - last_replicas).value;
    if (is_none(before)) return kNone;
    double time = std::max(before, cost_.stage_time_s(last_compute_s, last_params, last_replicas, level.bandwidth,
                                                      false, level.inner_workers));
    if (options_.activation_transfer) {
      time = std::max(time, transfer(k, last_replicas));
      if (j + 1 < n_) time = std::max(time, transfer(j, last_replicas));
    }
    return time;
  }

  static void take(Cell& best, double time, std::size_t k, int m, int last_replicas) {
    best.value = time;
    best.split_state = static_cast<std::int32_t>(k);
    best.rest_machines = static_cast<std::int16_t>(m - last_replicas);
    best.replicas = static_cast<std::int16_t>(last_replicas);
  }

  // A[i][j][m] = min(one replicated stage, best split after a predecessor k of j). The first best in
  // the order (one stage; then k ascending, m' ascending) wins ties, as a strict `>` scan gives.
  void split(Table& table, const LevelInputs& level, const LevelCompute& compute, const TransferTimes& transfer,
             std::size_t i, std::size_t j, int m) const {
    Cell best = table.at(i, j, m);
    const int max_last_replicas = options_.straight ? 1 : m;
    for (std::size_t k : states_.predecessors[j]) {
      if (i > 0 && is_ancestor(k, i - 1)) continue;
      if (k < i) continue;  // A[i][k] is empty
      for (int last_replicas = 1; last_replicas <= max_last_replicas; ++last_replicas) {
        const double time = split_time(table, level, compute, transfer, i, j, m, k, last_replicas);
        if (!is_none(time) && (is_none(best.value) || best.value > time)) take(best, time, k, m, last_replicas);
      }
    }
    table.at(i, j, m) = best;
  }

  // The same answer as split() on a chain (predecessors of j are 0..j-1), without trying every k.
  // For the last stage m', a split after k costs at least A[i][k][m-m'] and at least the last
  // stage's time. Walking right from a start point, min over k' >= k of A[i][k'][m-m'] bounds every
  // split still ahead; walking left, the last stage only grows (its parameters grow and its compute
  // is bounded below by the running minimum), so the walk stops at the first k whose bound exceeds
  // the best so far. Ties are broken as split() does, so both give identical tables.
  void split_chain(Table& table, const LevelInputs& level, const TransferTimes& transfer, ChainBounds& bounds,
                   std::size_t i, std::size_t j, int m) const {
    Cell best = table.at(i, j, m);
    const int max_last_replicas = options_.straight ? 1 : m;
    auto consider = [&](std::size_t k, int last_replicas) {
      const double last = bounds.last_stage(j, last_replicas, k);
      if (is_none(last)) return;
      if (options_.memory_limit_bytes) {
        const double stash_copies = std::ceil(double(level.machines - (m + 1)) / last_replicas);
        if (!fits(stash_copies, activations_(k + 1, j) + parameters_(k + 1, j))) return;
      }
      const double before = table.at(i, k, m - last_replicas).value;
      if (is_none(before)) return;
      double time = std::max(before, last);
      if (options_.activation_transfer) {
        time = std::max(time, transfer(k, last_replicas));
        if (j + 1 < n_) time = std::max(time, transfer(j, last_replicas));
      }
      const bool earlier = best.split_state < 0 ? false
                           : k != static_cast<std::size_t>(best.split_state)
                               ? k < static_cast<std::size_t>(best.split_state)
                               : last_replicas < best.replicas;
      if (is_none(best.value) || time < best.value || (time == best.value && earlier)) {
        take(best, time, k, m, last_replicas);
      }
    };
    // A bound may only prune when it exceeds the best by more than rounding could explain.
    auto beyond_best = [&](double bound) { return !is_none(best.value) && bound > best.value * (1.0 + 1e-9) + 1e-300; };
    for (int last_replicas = 1; last_replicas <= max_last_replicas; ++last_replicas) {
      const int rest = m - last_replicas;
      // Start where the part before stops being the lighter one; that point only moves right as j
      // grows, so finding it is amortised constant time. (Any start gives the same answer.)
      std::size_t& start = bounds.crossing[last_replicas];
      if (start < i) start = i;
      if (start >= j) start = j - 1;
      while (start + 1 < j) {
        const double before = table.at(i, start + 1, rest).value;
        const double after = bounds.last_stage(j, last_replicas, start + 1);
        if (is_none(before) || is_none(after) || before > after) break;
        ++start;
      }
      consider(start, last_replicas);
      for (std::size_t k = start + 1; k < j; ++k) {
        if (beyond_best(bounds.first_part_lower(rest, k))) break;
        consider(k, last_replicas);
      }
      for (std::size_t k = start; k-- > i;) {
        if (beyond_best(bounds.last_stage_lower(j, last_replicas, k))) break;
        consider(k, last_replicas);
      }
    }
    table.at(i, j, m) = best;
  }

  const AntichainStates& states_;
  const OptimizerOptions& options_;
  const CostModel& cost_;
  std::size_t n_;
  SegmentSums activations_, parameters_, raw_compute_;
  std::vector<std::uint64_t> ancestor_bits_;
};

}  // namespace pipetwin::partition_solver
