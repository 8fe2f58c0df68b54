// The pipetwin command's subcommands. Each add_*_command registers its options on `app` and
// returns a callback that runs it (returning the exit code); main() runs the one the user chose.
// `pipetwin` (neither SimGrid nor libtorch) has the planning, schedule and analysis commands and
// hands the simulation ones (simulate, platform, sweep) to `pipetwin-sim` and the training ones
// (profile, run, worker, validate, probe) to `pipetwin-exec` (forwarding.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace pipetwin::cli {

using Command = std::function<int()>;

// In pipetwin:
Command add_plan_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_model_command(CLI::App& app);
Command add_search_command(CLI::App& app);
Command add_schedule_command(CLI::App& app);
Command add_plot_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_import_trace_command(CLI::App& app);
// In pipetwin-sim:
Command add_simulate_command(CLI::App& app);
Command add_platform_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
// In pipetwin-exec:
Command add_profile_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_worker_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
Command add_probe_command(CLI::App& app);
// In pipetwin: hand the command line to pipetwin-sim or pipetwin-exec.
Command add_simulate_forwarder(CLI::App& app);
Command add_platform_forwarder(CLI::App& app);
Command add_sweep_forwarder(CLI::App& app);
Command add_profile_forwarder(CLI::App& app);
Command add_run_forwarder(CLI::App& app);
Command add_worker_forwarder(CLI::App& app);
Command add_validate_forwarder(CLI::App& app);
Command add_probe_forwarder(CLI::App& app);

}  // namespace pipetwin::cli
