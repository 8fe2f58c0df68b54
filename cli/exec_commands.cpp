// `pipetwin profile` (measure a zoo model), `pipetwin probe` (how k processes share this machine), `pipetwin run` (launch all workers of a plan here) and
// `pipetwin worker` (one worker, rendezvous from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE).
#include <optional>
#include <cstdio>
#include <iostream>

#include "cli/command_descriptions.h"
#include "cli/commands.h"
#include "exec/all_reduce_probe.h"
#include "exec/fault.h"
#include "exec/launcher.h"
#include "exec/message_probe.h"
#include "exec/model_zoo.h"
#include "exec/probe.h"
#include "exec/profiler.h"
#include "exec/tensor_parallel.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/profile_io.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_generators.h"
#include "traces/calibration.h"
#include "traces/trace_metrics.h"

namespace pipetwin::cli {
namespace {

// A worker whose computes ran on a core less than this share of their time is said to have waited for
// one (two workers on this machine's two cores: 0.95-0.99; three: 0.6-0.85; bench/README.md).
constexpr double kMostlyOnACore = 0.9;

void add_worker_options(CLI::App* command, exec::WorkerOptions& options, double& timeout_s) {
  command->add_option("--plan", options.plan_path, "plan JSON (planned from a `pipetwin profile` of the same model)")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "mlp | vgg16 | resnet | gpt")
      ->capture_default_str()
      ->check(CLI::IsMember(exec::model_names()));
  command->add_option("--schedule,-s", options.schedule.name, schedule_names_text(" | "))
      ->capture_default_str()
      ->check(CLI::IsMember(schedule_names()));
  command->add_option("--microbatches,-m", options.schedule.microbatches, "microbatches per iteration (default: the plan's)")
      ->check(CLI::PositiveNumber);
  command->add_option("--schedule-file", options.schedule.file,
                      "run this schedule CSV (from `pipetwin schedule -o`, perhaps edited by hand) as it is: nothing is "
                      "generated; its first line gives the schedule, microbatches, iterations and chunks")
      ->check(CLI::ExistingFile);
  command->add_option("--chunks,-v", options.schedule.chunks, "stages per worker for interleaved, looped-bfs, interleaved-zb (zb-v and dualpipe-v: 2)")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--iterations", options.schedule.iterations, "iterations to train")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--lr", options.learning_rate, "SGD learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--momentum", options.momentum, "SGD momentum")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  command->add_option("--timeout", timeout_s, "seconds a worker waits for a peer before declaring it dead or hung")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--checkpoint-dir", options.checkpoint_dir,
                      "write every stage's weights and optimizer state here after each iteration (atomically)");
  command->add_flag("--resume", options.resume, "start from the checkpoint in --checkpoint-dir");
  command->add_flag("!--full-size", options.small, "vgg16 at 224x224 with full widths (default: the CPU-sized variant)");
  command->add_option("--device", options.device, "cpu (Gloo) or cuda (worker r on GPU r mod GPUs; NCCL when each has its own GPU and the build has it, else Gloo through host memory)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--tp", options.tensor_parallel,
                      "tensor-parallel degree (gpt only): every plan worker runs as this many processes, each with its "
                      "share of every block's heads and MLP, summing inside each block (Megatron-LM style); the trace "
                      "is the first rank's")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--fault", options.fault, "testing only: die:<rank>:<actions>, hang:<rank>:<actions>, or diesave:<rank>:<iteration> (die while saving that checkpoint)");
  command->add_option("--versions-log", options.versions_log_path,
                      "testing: write, per microbatch, the weight version its forward and its backward used");
}

}  // namespace

Command add_profile_command(CLI::App& app) {
  auto options = std::make_shared<exec::ProfilerOptions>();
  auto output = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("profile", kProfileDescription);
  command->add_option("--model", options->model, "mlp | vgg16 | resnet | gpt")
      ->required()
      ->check(CLI::IsMember(exec::model_names()));
  command->add_option("--batch", options->batch, "samples per minibatch")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--repeats", options->repeats, "timed runs per layer (median)")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--warmup", options->warmup, "untimed runs first")->capture_default_str()->check(CLI::NonNegativeNumber);
  command->add_flag("!--full-size", options->small, "vgg16 at 224x224 with full widths");
  command->add_option("--device", options->device, "cpu or cuda (GPU 0; each timed piece waits for the GPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--tp", options->tensor_parallel,
                      "tensor-parallel degree (gpt only): this many processes measure their share of each layer at "
                      "once, summing inside each block as `run --tp` does; times and parameter bytes per rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--output,-o", *output, "profile JSON to write")->required();
  return [options, output] {
    const Profile profile = exec::profile_model(*options);
    write_profile_json(profile, *output);
    std::printf("Profiled %s (batch %d): %zu layers, forward %.3f ms, backward %.3f ms, %.0f parameter bytes -> %s\n",
                options->model.c_str(), options->batch, profile.layer_count(), profile.total_fwd_ms(),
                profile.total_bwd_ms(), profile.total_param_bytes(), output->c_str());
    return 0;
  };
}

Command add_probe_command(CLI::App& app) {
  auto options = std::make_shared<exec::ProbeOptions>();
  auto output = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("probe", kProbeDescription);
  command->add_option("--model", options->model, "mlp | vgg16 | resnet | gpt")
      ->capture_default_str()
      ->check(CLI::IsMember(exec::model_names()));
  command->add_option("--batch", options->batch, "samples per microbatch")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--max-processes", options->max_processes, "probe 1 .. this many processes at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--seconds", options->seconds, "seconds measured per process count")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--device", options->device, "cpu or cuda (process k on GPU k mod GPUs, as workers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  command->add_option("--output,-o", *output, "probe JSON to write (pipetwin.probe/1)")->required();
  auto messages = std::make_shared<bool>(false);
  auto message_options = std::make_shared<exec::MessageProbeOptions>();
  command->add_flag("--messages", *messages,
                    "also time messages of 1 KB to 64 MB between two processes (ping-pong through the run's transport) "
                    "and fit the link they amount to: latency + bytes / bandwidth; and what each message costs both "
                    "processes' CPU, fitted as a fixed part and one per byte");
  command->add_option("--message-sizes", message_options->bytes, "message sizes in bytes (with --messages)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command->add_option("--message-repeats", message_options->repeats, "timed round trips per size (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  auto all_reduce = std::make_shared<bool>(false);
  auto all_reduce_options = std::make_shared<exec::AllReduceProbeOptions>();
  command->add_flag("--all-reduce", *all_reduce,
                    "also time all-reduces of 4 KB to 16 MB among 2 .. --max-processes processes (the transport's, as "
                    "replicas use) beside the simulator's ring on the --messages link");
  command->add_option("--all-reduce-sizes", all_reduce_options->bytes, "all-reduce sizes in bytes (with --all-reduce)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  return [options, output, messages, message_options, all_reduce, all_reduce_options] {
    const auto report = [](const std::string& step) { std::cout << step << "\n" << std::flush; };
    if (*all_reduce && options->max_processes < 2) {
      throw Error({"", 0, "--max-processes"}, "an all-reduce needs two processes", "give --max-processes 2 or more");
    }
    const exec::ComputeProbe probe = exec::probe_shared_compute(*options, report);
    nlohmann::json document = exec::probe_to_json(probe);
    std::optional<exec::MessageProbe> timed;
    if (*messages) {
      timed = exec::probe_messages(*message_options, report);
      document["messages"] = exec::message_probe_to_json(*timed);
    }
    std::optional<exec::AllReduceProbe> reduced;
    if (*all_reduce) {
      all_reduce_options->max_processes = options->max_processes;
      reduced = exec::probe_all_reduce(*all_reduce_options, timed ? std::optional<LinkFit>(timed->link) : std::nullopt, report);
      document["all_reduce"] = exec::all_reduce_probe_to_json(*reduced);
    }
    json_fields::write_text_atomically(*output, document.dump(2) + "\n");
    std::printf("processes  iterations/s per process  machine throughput (x one process alone)\n");
    for (std::size_t k = 0; k < probe.process_rate.size(); ++k) {
      std::printf("%9zu  %24.2f  %10.2f\n", k + 1, probe.process_rate[k], probe.machine_throughput[k]);
    }
    if (timed) {
      std::printf("message bytes  one-way s    post s       take s (an arrived message)  CPU s (both processes)\n");
      for (std::size_t i = 0; i < timed->bytes.size(); ++i) {
        std::printf("%13.0f  %-11.6g  %-11.6g  %-27.6g  %.6g\n", timed->bytes[i], timed->one_way_s[i], timed->post_s[i],
                    timed->take_s[i], timed->cpu_s[i]);
      }
      std::printf("link: latency %.3g s, bandwidth %.3g B/s (rms error of the line %.1f%%): a cluster level's "
                  "latency_s and bandwidth_bytes_per_s\n",
                  timed->link.latency_s, timed->link.bandwidth_bytes_per_s, 100 * timed->link.rms_relative_error);
      std::printf("overheads (up to 64 KB): posting %.3g s, taking an arrived message %.3g s: a device's send_overhead_s "
                  "and recv_overhead_s (calibrate --probe writes them, the latency less the posting)\n",
                  timed->link.send_overhead_s, timed->link.recv_overhead_s);
      std::printf("CPU per message: %.3g s + %.3g s per byte: a device's message_cpu_s and message_cpu_s_per_byte (what a "
                  "message costs the machine's cores where its workers share them)\n",
                  timed->link.message_cpu_s, timed->link.message_cpu_s_per_byte);
    }
    if (reduced) {
      std::printf("all-reduce processes  bytes  measured s  ring on the link s  measured / ring\n");
      for (const exec::AllReduceGroup& group : reduced->groups) {
        for (std::size_t i = 0; i < reduced->bytes.size(); ++i) {
          std::printf("%20d  %5.0f  %10.6g", group.processes, reduced->bytes[i], group.seconds[i]);
          if (group.ring_s.empty()) {
            std::printf("  %18s  %15s\n", "-", "-");
          } else {
            std::printf("  %18.6g  %15.2f\n", group.ring_s[i], group.seconds[i] / group.ring_s[i]);
          }
        }
        if (group.fit) {
          std::printf("  %d processes: latency %.3g s, bandwidth %.3g B/s (rms error of the line %.1f%%)\n", group.processes,
                      group.fit->latency_s, group.fit->bandwidth_bytes_per_s, 100 * group.fit->rms_relative_error);
        } else {
          std::printf("  %d processes: no line (the times do not grow with the size: a noisy spell; probe again)\n",
                      group.processes);
        }
      }
      if (reduced->beyond_ring) {
        std::printf("beyond the ring: %.3g s per all-reduce + %.3g s per byte: a cluster device's all_reduce_overhead_s "
                    "and all_reduce_s_per_byte (calibrate --probe writes them)\n",
                    reduced->beyond_ring->overhead_s, reduced->beyond_ring->s_per_byte);
      }
    }
    std::printf("Written to %s\n", output->c_str());
    return 0;
  };
}

Command add_run_command(CLI::App& app) {
  auto options = std::make_shared<exec::LaunchOptions>();
  auto timeout_s = std::make_shared<double>(30.0);
  auto output = std::make_shared<std::string>();
  auto workers = std::make_shared<std::optional<int>>();
  auto chrome = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("run", kRunDescription);
  add_worker_options(command, options->worker, *timeout_s);
  command->add_option("--workers,-n", *workers, "worker processes (default: the plan's workers)")->check(CLI::PositiveNumber);
  command->add_option("--warmup", options->worker.warmup_iterations, "first iterations left out of the reported time")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  command->add_option("--output,-o", *output, "measured trace: JSON lines (pipetwin.trace/1), or CSV for *.csv");
  command->add_option("--chrome", *chrome, "Chrome trace JSON, for Perfetto");
  return [options, timeout_s, output, workers, chrome] {
    options->worker.timeout = std::chrono::milliseconds(static_cast<long long>(*timeout_s * 1000));
    exec::parse_fault(options->worker.fault);  // a malformed --fault stops here
    exec::check_tensor_parallel(options->worker.model, options->worker.tensor_parallel);
    const Plan plan = load_plan(options->worker.plan_path);
    // Built once, here, for all workers.
    options->worker.built = std::make_shared<const Schedule>(build_schedule(plan, options->worker.schedule).schedule);
    const int needed = options->worker.built->shape.workers;
    options->workers = workers->value_or(needed);
    if (options->workers != needed) {
      throw pipetwin::Error({options->worker.plan_path, 0, "--workers"},
                  "the schedule runs on " + std::to_string(needed) + " workers, not " + std::to_string(options->workers),
                  "pass --workers " + std::to_string(needed) + " or plan for " + std::to_string(options->workers));
    }
    const Trace trace = exec::launch_local(*options);
    if (!output->empty()) write_trace(trace, *output);
    if (!chrome->empty()) write_chrome_trace(trace, *chrome);
    const TraceMetrics metrics = trace_metrics(trace);
    const std::string tensor_parallel =
        options->worker.tensor_parallel > 1 ? " x " + std::to_string(options->worker.tensor_parallel) + " tensor-parallel ranks" : "";
    std::printf("Ran %s with %s on %d workers%s: %d microbatches of %d x %d iterations (%d warm-up)\n",
                options->worker.model.c_str(), trace.header.schedule.c_str(), options->workers, tensor_parallel.c_str(),
                trace.header.microbatches, trace.header.microbatch_size, trace.header.iterations,
                trace.header.warmup_iterations);
    std::printf("Time per iteration:   %.6f s (median %.6f s)\nThroughput:           %.1f samples/s\n",
                metrics.mean_iteration_s, metrics.median_iteration_s, metrics.samples_per_s);
    // Bubble: time not computing F/B/I/W/R/OPT. On a core: the share of the computing time the
    // worker's thread ran (compute CPU over compute wall time); the rest it waited for a core. On a GPU
    // the thread waits for the device instead: its CPU says nothing of the cores, and is not shown.
    const std::vector<double> on_core = options->worker.device == "cpu" ? compute_core_share(trace) : std::vector<double>{};
    std::printf("  worker  bubble   on a core while computing\n");
    int waited = 0;
    for (std::size_t w = 0; w < metrics.bubble_fraction.size(); ++w) {
      if (w < on_core.size() && on_core[w] >= 0.0) {
        std::printf("  %-6zu  %5.1f%%   %5.1f%%\n", w, 100.0 * metrics.bubble_fraction[w], 100.0 * on_core[w]);
        waited += on_core[w] < kMostlyOnACore ? 1 : 0;
      } else {
        std::printf("  %-6zu  %5.1f%%       -\n", w, 100.0 * metrics.bubble_fraction[w]);
      }
    }
    if (waited > 0) {
      const int cores = recorded_cores(trace);
      std::printf("%d worker%s computed on a core less than %.0f%% of the time: %s; this run's times include "
                  "waiting for a core.\n",
                  waited, waited > 1 ? "s" : "", 100 * kMostlyOnACore,
                  cores > 0 && static_cast<int>(on_core.size()) > cores
                      ? (std::to_string(on_core.size()) + " worker processes took turns on " + std::to_string(cores) + " cores").c_str()
                      : "other processes took the cores");
    }
    if (!output->empty()) std::printf("Trace written to %s\n", output->c_str());
    return 0;
  };
}

Command add_worker_command(CLI::App& app) {
  auto options = std::make_shared<exec::WorkerOptions>();
  auto timeout_s = std::make_shared<double>(30.0);
  CLI::App* command = app.add_subcommand("worker", kWorkerDescription);
  add_worker_options(command, *options, *timeout_s);
  command->add_option("--trace-part", options->trace_part_path, "where this worker writes its events");
  return [options, timeout_s] {
    options->timeout = std::chrono::milliseconds(static_cast<long long>(*timeout_s * 1000));
    exec::run_worker(*options);  // refuses a malformed --fault and a bad --tp before joining the others
    return 0;
  };
}

}  // namespace pipetwin::cli
