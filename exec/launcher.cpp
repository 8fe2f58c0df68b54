#include "exec/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "exec/process_setup.h"
#include "exec/transport.h"
#include "planner/error.h"

namespace pipetwin::exec {
namespace {

// A worker's exit status when it stopped only because a peer was dead or hung: the launcher blames
// another worker when there is one that failed of its own accord.
constexpr int kLostPeerStatus = 2;

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

Trace launch_local(const LaunchOptions& options) {
  if (options.workers < 1) throw Error({"", 0, "--workers"}, "workers must be >= 1", "e.g. --workers 2");
  const std::filesystem::path parts =
      std::filesystem::temp_directory_path() / ("pipetwin-run-" + std::to_string(::getpid()));
  std::error_code code;
  std::filesystem::create_directories(parts, code);
  if (code) {
    throw Error({parts.string(), 0, "TMPDIR"}, "cannot create the folder for the workers' traces: " + code.message(),
                "set TMPDIR to a writable folder");
  }
  const int port = free_local_port();
  const int processes = options.workers * options.worker.tensor_parallel;
  // "worker 3", and with tensor parallelism which plan worker and rank that process is.
  auto process_name = [&](int rank) {
    std::string name = "worker " + std::to_string(rank);
    if (options.worker.tensor_parallel == 1) return name;
    return name + " (plan worker " + std::to_string(rank % options.workers) + ", tensor-parallel rank " +
           std::to_string(rank / options.workers) + ")";
  };
  std::vector<pid_t> children;
  std::fflush(nullptr);
  for (int rank = 0; rank < processes; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) throw Error({"", 0, ""}, "cannot start worker " + std::to_string(rank), "free memory");
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(processes).c_str(), 1);
      WorkerOptions worker = options.worker;
      worker.trace_part_path = (parts / ("worker" + std::to_string(rank) + ".jsonl")).string();
      if (!worker.versions_log_path.empty()) worker.versions_log_path += "." + std::to_string(rank);
      int status = 0;
      try {
        run_worker(worker);
      } catch (const Error& error) {
        std::fprintf(stderr, "pipetwin: error: %s: %s\n", process_name(rank).c_str(), error.what());
        status = is_lost_peer(error) ? kLostPeerStatus : 1;
      } catch (const std::exception& error) {
        std::string what = error.what();
        std::fprintf(stderr, "pipetwin: error: %s: %s\n", process_name(rank).c_str(), what.substr(0, what.find('\n')).c_str());
        status = 1;
      }
      std::fflush(nullptr);
      ::_exit(status);
    }
    children.push_back(pid);
  }
  // Watch: the first failure starts the grace period; after it, whoever is left is killed.
  std::vector<bool> done(children.size(), false);
  int first_failed = -1, blamed = -1, remaining = static_cast<int>(children.size());
  bool blamed_lost_peer = false;
  std::string failure;
  std::chrono::steady_clock::time_point deadline{};
  while (remaining > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const auto it = std::find(children.begin(), children.end(), pid);
      if (it == children.end()) continue;
      const int rank = static_cast<int>(it - children.begin());
      done[rank] = true;
      --remaining;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      const bool lost_peer = WIFEXITED(status) && WEXITSTATUS(status) == kLostPeerStatus;
      if (!ok && first_failed < 0) {
        first_failed = rank;
        deadline = std::chrono::steady_clock::now() + options.grace + options.worker.timeout;
      }
      if (!ok && (blamed < 0 || (!lost_peer && blamed_lost_peer))) {  // the first to fail of its own accord
        blamed = rank;
        blamed_lost_peer = lost_peer;
        failure = describe_status(status);
      }
      continue;
    }
    if (first_failed >= 0 && std::chrono::steady_clock::now() > deadline) {
      for (std::size_t r = 0; r < children.size(); ++r) {
        if (!done[r]) ::kill(children[r], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (blamed >= 0) {
    std::filesystem::remove_all(parts, code);
    throw Error({"", 0, "worker " + std::to_string(blamed)},
                process_name(blamed) + " " + failure + "; the run was stopped",
                "read that worker's message above");
  }
  Trace merged;
  for (int rank = 0; rank < processes; ++rank) {
    Trace part = load_trace((parts / ("worker" + std::to_string(rank) + ".jsonl")).string());
    if (rank == 0) {
      merged.header = part.header;
      for (const char* key : {"peak_memory_bytes", "process_cpu_s", "compute_cpu_s"}) merged.header.extra.erase(key);
    }
    // Each process's peak memory and CPU, gathered by rank (-1 when it could not read them): with
    // tensor parallelism t, workers x t of them, lane by lane.
    for (const char* key : {"peak_memory_bytes", "process_cpu_s", "compute_cpu_s"}) {
      merged.header.extra[key].push_back(part.header.extra.value(key, -1.0));
    }
    merged.events.insert(merged.events.end(), part.events.begin(), part.events.end());
  }
  // The cores these processes had between them: more processes than cores take turns on them, and
  // came out slower than predicted here (validate --matrix names such runs).
  merged.header.extra["cores"] = usable_cores();
  std::filesystem::remove_all(parts, code);
  sort_events(merged);
  return merged;
}

}  // namespace pipetwin::exec
