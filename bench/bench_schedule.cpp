// Schedule speed: generating, lowering and validating (with the unit-time deadlock run) a 64-stage,
// 512-microbatch interleaved schedule, and the other schedules at the same size.
#include <benchmark/benchmark.h>

#include "planner/schedule_generators.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_validator.h"

namespace pipetwin {
namespace {

// workers x chunks stages, looped (stage s on worker s mod p) or in a V (zb-v, dualpipe-v).
PipelineShape interleaved_shape(int workers, int chunks, Placement placement = Placement::Looped) {
  PipelineShape shape;
  for (int s = 0; s < workers * chunks; ++s) {
    const bool second_arm = placement == Placement::V && s >= workers;
    shape.stage_workers.push_back({second_arm ? 2 * workers - 1 - s : s % workers});
    shape.output_bytes.push_back(1e6);
    shape.param_bytes.push_back(1e7);
  }
  shape.workers = workers;
  shape.chunks = chunks;
  return shape;
}

void generate_lower_validate(benchmark::State& state, const std::string& name, int workers, int chunks,
                             int microbatches) {
  const PipelineShape shape = interleaved_shape(workers, chunks, schedule_placement(name));
  std::size_t actions = 0;
  for (auto _ : state) {
    const Schedule schedule = make_schedule(name, shape, microbatches);  // generate, lower, unroll
    const ValidationReport report = validate_schedule(schedule);
    actions = 0;
    for (const auto& list : schedule.workers) actions += list.size();
    benchmark::DoNotOptimize(report.unit_run.makespan_s);
  }
  state.counters["actions"] = static_cast<double>(actions);
  state.counters["actions/s"] = benchmark::Counter(static_cast<double>(actions) * state.iterations(),
                                                   benchmark::Counter::kIsRate);
}

// 64 stages as 32 workers x 2 chunks, 512 microbatches.
BENCHMARK_CAPTURE(generate_lower_validate, interleaved_64_stages_512_microbatches, "interleaved", 32, 2, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, interleaved_64_workers_x2_512_microbatches, "interleaved", 64, 2, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, one_f_one_b_64_stages_512_microbatches, "1f1b", 64, 1, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, zb_h1_64_stages_512_microbatches, "zb-h1", 64, 1, 512)
    ->Unit(benchmark::kMillisecond);
// Today's schedules at the same size (issue 14's target: within 2x of 1F1B): 64 stages, 512 microbatches.
BENCHMARK_CAPTURE(generate_lower_validate, zb_h2_64_stages_512_microbatches, "zb-h2", 64, 1, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, looped_bfs_64_stages_512_microbatches, "looped-bfs", 32, 2, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, interleaved_zb_64_stages_512_microbatches, "interleaved-zb", 32, 2, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, zb_v_64_stages_512_microbatches, "zb-v", 32, 2, 512)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(generate_lower_validate, dualpipe_v_64_stages_512_microbatches, "dualpipe-v", 32, 2, 512)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pipetwin

BENCHMARK_MAIN();
