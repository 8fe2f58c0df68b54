#include "sim/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "planner/error.h"

namespace pipetwin::sim {

Child start_child(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error({"", 0, ""}, std::string("cannot create a pipe: ") + std::strerror(errno), "");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error({"", 0, ""}, std::string("cannot fork: ") + std::strerror(errno), "free some memory or use fewer --jobs");
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = work();
    } catch (const std::exception& error) {
      text = nlohmann::json{{"error", error.what()}}.dump();
    }
    std::size_t written = 0;
    while (written < text.size()) {
      const ssize_t n = ::write(fds[1], text.data() + written, text.size() - written);
      if (n <= 0) break;
      written += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

std::string finish_child(Child child) {
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = ::read(child.output_fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  ::close(child.output_fd);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (text.empty()) {
    throw Error({"", 0, "simulation"},
                "the simulation process died (" +
                    (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                         : "exit status " + std::to_string(WEXITSTATUS(status))) +
                    ")",
                "run pipetwin simulate with the same inputs to see SimGrid's message");
  }
  return text;
}

std::optional<std::string> child_error(const std::string& reply) {
  if (reply.rfind("{\"error\":", 0) != 0) return std::nullopt;
  const auto json = nlohmann::json::parse(reply, nullptr, false);
  if (!json.is_object() || !json.contains("error") || !json.at("error").is_string()) return std::nullopt;
  return json.at("error").get<std::string>();
}

}  // namespace pipetwin::sim
