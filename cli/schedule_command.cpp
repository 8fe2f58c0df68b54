// `pipetwin schedule`: generate a schedule for a plan, lower and validate it, print a summary (and the
// grid with --print), write it as CSV; or load a CSV back and validate it.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_evaluator.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_validator.h"
#include "planner/torch_schedule_csv.h"

namespace pipetwin::cli {
namespace {

struct ScheduleArguments {
  std::string plan_path;
  ScheduleRequest schedule{"1f1b", 0, 1, 1};  // microbatches 0: the plan's; file: a CSV to load instead
  bool print = false;
  std::string output_path;
  std::string torch_path;       // --export-torch
  bool torch_communication = false;
  double bandwidth_bytes_per_s = 0.0;
  double latency_s = 0.0;
};

// One row per worker, one column per unit-time slot; each compute action in the slot it starts.
std::string grid(const Schedule& schedule, const Evaluation& unit_run) {
  const bool show_stage = schedule.shape.chunks > 1;
  std::vector<std::vector<std::string>> cells(schedule.workers.size());
  std::size_t width = 2, slots = static_cast<std::size_t>(unit_run.makespan_s + 0.5);
  for (std::size_t w = 0; w < schedule.workers.size(); ++w) {
    cells[w].assign(slots, "");
    for (std::size_t i = 0; i < schedule.workers[w].size(); ++i) {
      const Action& action = schedule.workers[w][i];
      if (!is_pass(action.kind)) continue;
      std::string text = to_text(action);
      if (!show_stage) text = text.substr(text.find_first_not_of("0123456789"));
      const auto slot = static_cast<std::size_t>(unit_run.timings[w][i].start_s + 0.5);
      if (slot < slots) cells[w][slot] = text;
      width = std::max(width, text.size());
    }
  }
  std::ostringstream out;
  out << "worker |";
  for (std::size_t t = 0; t < slots; ++t) {
    std::string label = std::to_string(t);
    out << ' ' << std::string(width - std::min(width, label.size()), ' ') << label;
  }
  out << "\n";
  for (std::size_t w = 0; w < cells.size(); ++w) {
    char label[32];
    std::snprintf(label, sizeof label, "%6zu |", w);
    out << label;
    for (const std::string& cell : cells[w]) {
      const std::string shown = cell.empty() ? "." : cell;
      out << ' ' << std::string(width - shown.size(), ' ') << shown;
    }
    out << "\n";
  }
  return out.str();
}

std::string stages_of(const Schedule& schedule, int worker) {
  std::string text;
  for (int s = 0; s < schedule.shape.stages(); ++s) {
    for (int holder : schedule.shape.stage_workers[s]) {
      if (holder != worker) continue;
      if (!text.empty()) text += ',';
      text += std::to_string(s);
    }
  }
  return text.empty() ? "-" : text;
}

int run_schedule(const ScheduleArguments& arguments) {
  const Plan plan = load_plan(arguments.plan_path);
  const BuiltSchedule built = build_schedule(plan, arguments.schedule);
  const Schedule& schedule = built.schedule;
  const PipelineShape& shape = schedule.shape;
  const ValidationReport& report = built.report;
  CommunicationCost communication;
  if (arguments.bandwidth_bytes_per_s > 0) communication.bandwidth_bytes_per_s = arguments.bandwidth_bytes_per_s;
  communication.latency_s = arguments.latency_s;
  const Evaluation timed = evaluate_schedule(schedule, stage_times_from_plan(plan), communication);

  std::cout << "Schedule " << schedule.name << ": " << shape.stages() << " stages on " << shape.workers << " workers, "
            << schedule.microbatches << " microbatches x " << schedule.iterations << " iteration(s)"
            << (arguments.schedule.file.empty() ? "" : ", loaded from " + arguments.schedule.file) << "\n";
  std::cout << "Valid: every receive has its send, every backward its forward, per-stage counts right, no deadlock.\n";
  char line[256];
  std::snprintf(line, sizeof line, "Predicted time for the schedule (plan's stage times, %s): %.6f s\n",
                arguments.bandwidth_bytes_per_s > 0 ? "given link" : "free communication", timed.makespan_s);
  std::cout << line;
  std::cout << "  worker  stage(s)  actions  peak in flight  weight versions  peak memory  bubble (time not computing "
               "F/B/I/W/R/OPT)\n";
  for (int w = 0; w < shape.workers; ++w) {
    const double memory_bytes = report.memory[w].total_bytes();
    const bool over = plan.device_memory_bytes > 0 && memory_bytes > plan.device_memory_bytes;
    std::snprintf(line, sizeof line, "  %-6d  %-8s  %-7zu  %-14d  %-15d  %8.3f GB  %5.1f%%%s\n", w,
                  stages_of(schedule, w).c_str(), schedule.workers[w].size(), report.memory[w].peak_in_flight,
                  report.memory[w].weight_versions, memory_bytes / 1e9, 100.0 * timed.bubble_fraction(w),
                  over ? "  (more than the device's memory)" : "");
    std::cout << line;
  }
  const std::string shortfall = memory_shortfall(report.memory, plan.device_memory_bytes);
  if (!shortfall.empty()) {
    std::cout << "Memory: " << shortfall << " (of " << plan.cluster_name
              << "'s devices): `pipetwin simulate` refuses this plan with this schedule unless --ignore-memory.\n";
  }
  if (arguments.print) std::cout << "\n" << grid(schedule, report.unit_run);
  if (!arguments.output_path.empty()) {
    json_fields::write_text_atomically(arguments.output_path, schedule_to_csv(schedule));
    std::cout << "\nSchedule written to " << arguments.output_path << "\n";
  }
  if (!arguments.torch_path.empty()) {
    json_fields::write_text_atomically(arguments.torch_path,
                                       schedule_to_torch_csv(schedule, arguments.torch_communication, report.unit_run));
    std::cout << "\nFirst iteration written in torch.distributed.pipelining's CSV form ("
              << (arguments.torch_communication ? "with communication" : "compute only") << ") to " << arguments.torch_path << "\n";
  }
  return 0;
}

}  // namespace

Command add_schedule_command(CLI::App& app) {
  auto arguments = std::make_shared<ScheduleArguments>();
  CLI::App* command = app.add_subcommand(
      "schedule",
      "Make the per-worker action lists for a plan (the schedules below),\n"
      "add sends/receives/all-reduces, prove them sound (matching messages, no deadlock) and show them.\n"
      "Text form of an action: <stage><kind><microbatch>, e.g. 2F0, 1SEND_F3, 0RECV_B5, 1I4, 1W4, 1OPT.");
  command->footer("Schedules:\n" + schedule_catalogue());
  command->add_option("--plan", arguments->plan_path, "plan JSON written by `pipetwin plan -o`")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--schedule,-s", arguments->schedule.name,
                      schedule_names_text(" | ") + " (each below)")
      ->capture_default_str()
      ->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches,-m", arguments->schedule.microbatches, "microbatches per iteration (default: the plan's)")
      ->check(CLI::PositiveNumber);
  command->add_option("--chunks,-v", arguments->schedule.chunks,
                      "stages per worker for interleaved, looped-bfs, interleaved-zb (the plan must have workers x chunks "
                      "unreplicated stages; zb-v and dualpipe-v always place 2 in a V)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--iterations", arguments->schedule.iterations, "iterations to lay out (every one unrolled, for every schedule)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag("--print", arguments->print, "print the grid: one row per worker, one column per time slot");
  command->add_option("--output,-o", arguments->output_path,
                      "write the schedule as CSV (pipetwin.schedule/3: one row per action with its iteration, peer, bytes "
                      "and message id; `simulate` and `run` take it with --schedule-file)");
  command->add_option("--export-torch", arguments->torch_path,
                      "also write the first iteration in torch.distributed.pipelining's schedule CSV (row r = rank r; "
                      "compute only, empty cells where a rank idles, unless --torch-comms)");
  command->add_flag("--torch-comms", arguments->torch_communication,
                    "with --export-torch: write every send, receive and REDUCE_GRAD too, in order");
  command->add_option("--schedule-file,--load", arguments->schedule.file,
                      "load a schedule CSV (from -o, perhaps edited by hand, or torch's form: detected) instead of "
                      "generating one, and validate it against the plan; a pipetwin CSV's first line gives the schedule, "
                      "counts and chunks, a torch CSV gives the placement and microbatches (--iterations repeats it)")
      ->check(CLI::ExistingFile);
  command->add_option("--bandwidth", arguments->bandwidth_bytes_per_s,
                      "bytes/s of every link for the predicted time (default: free communication)")
      ->check(CLI::PositiveNumber);
  command->add_option("--latency", arguments->latency_s, "seconds per message for the predicted time")
      ->check(CLI::NonNegativeNumber);
  return [arguments] { return run_schedule(*arguments); };
}

}  // namespace pipetwin::cli
