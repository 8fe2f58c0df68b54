#include "exec/child_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "exec/process_setup.h"
#include "exec/transport.h"
#include "planner/error.h"

namespace pipetwin::exec {

std::vector<std::vector<double>> run_in_children(int count, std::size_t numbers,
                                                 const std::function<std::vector<double>(int rank)>& work,
                                                 const std::string& what, const std::string& fix) {
  std::fflush(nullptr);
  std::vector<std::pair<pid_t, int>> children;  // pid, read end
  const auto bytes = static_cast<ssize_t>(numbers * sizeof(double));
  for (int rank = 0; rank < count; ++rank) {
    int pipe_ends[2];
    if (::pipe(pipe_ends) != 0) throw Error({"", 0, "probe"}, "cannot open a pipe", "free file descriptors");
    const pid_t pid = ::fork();
    if (pid < 0) throw Error({"", 0, "probe"}, "cannot start " + what + " process " + std::to_string(rank), "free memory");
    if (pid == 0) {
      ::close(pipe_ends[0]);
      bool written = false;
      try {
        const std::vector<double> result = work(rank);
        written = result.size() == numbers && ::write(pipe_ends[1], result.data(), numbers * sizeof(double)) == bytes;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "pipetwin: error: %s process %d: %s\n", what.c_str(), rank, error.what());
      }
      std::fflush(nullptr);
      ::_exit(written ? 0 : 1);
    }
    ::close(pipe_ends[1]);
    children.emplace_back(pid, pipe_ends[0]);
  }
  std::vector<std::vector<double>> results;
  bool failed = false;
  for (const auto& [pid, read_end] : children) {
    std::vector<double> result(numbers, 0.0);
    failed = ::read(read_end, result.data(), numbers * sizeof(double)) != bytes || failed;
    ::close(read_end);
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed = failed || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    results.push_back(std::move(result));
  }
  if (failed) throw Error({"", 0, "probe"}, "a " + what + " process with " + std::to_string(count) + " running failed", fix);
  return results;
}

std::vector<std::vector<double>> run_connected_children(
    int count, std::size_t numbers, std::chrono::milliseconds timeout, const std::vector<std::vector<int>>& groups,
    const std::function<std::vector<double>(Transport& transport, int rank)>& work, const std::string& what,
    const std::string& fix) {
  const int port = free_local_port();
  return run_in_children(
      count, numbers,
      [&](int rank) {
        keep_freed_memory();
        torch::set_num_threads(1);
        Rendezvous rendezvous;
        rendezvous.master_port = port;
        rendezvous.rank = rank;
        rendezvous.world_size = count;
        rendezvous.timeout = timeout;
        Transport transport(rendezvous, groups);
        pin_to_own_core(rank, count);  // after the transport: its threads stay free to run on any core
        return work(transport, rank);
      },
      what, fix);
}

}  // namespace pipetwin::exec
