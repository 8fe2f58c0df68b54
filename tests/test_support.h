// Helpers shared by the tests: where the inputs are, small synthetic profiles, temp folders and
// running the pipetwin binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "planner/cluster.h"
#include "planner/profile.h"

namespace pipetwin::testing {

inline std::string source_dir() { return PIPETWIN_SOURCE_DIR; }
inline std::string profiles_dir() { return PIPETWIN_PROFILES_DIR; }
inline std::string pipedream_profile(const std::string& model) { return profiles_dir() + "/" + model + ".txt"; }
inline std::string platform(const std::string& name) { return source_dir() + "/platforms/" + name + ".json"; }

// A chain of layers l0 -> l1 -> ... with the given (fwd+bwd split evenly) times in ms, parameter
// and activation bytes.
inline Profile chain_profile(const std::vector<double>& time_ms, const std::vector<double>& param_bytes,
                             const std::vector<double>& activation_bytes) {
  std::vector<Layer> layers;
  std::vector<Profile::Edge> edges;
  for (std::size_t i = 0; i < time_ms.size(); ++i) {
    Layer layer;
    layer.id = "l" + std::to_string(i);
    layer.description = "Linear";
    layer.fwd_ms = time_ms[i] / 3.0;
    layer.bwd_ms = time_ms[i] - layer.fwd_ms;
    layer.param_bytes = param_bytes[i];
    layer.activation_bytes = activation_bytes[i];
    layers.push_back(layer);
    if (i > 0) edges.emplace_back(i - 1, i);
  }
  return Profile("chain", 32, layers, edges, "chain.json");
}

// One cluster level per (count, bandwidth) pair, innermost first.
inline Cluster simple_cluster(const std::vector<std::pair<int, double>>& levels) {
  std::vector<ClusterLevel> out;
  for (std::size_t l = 0; l < levels.size(); ++l) {
    out.push_back({"level" + std::to_string(l), levels[l].first, "link", levels[l].second, 0.0});
  }
  return Cluster("test", "", DeviceSpec{"dev", 1.0, 0.0, 16e9}, out, "test-cluster.json");
}

// A fresh folder under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("pipetwin-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t read;
  while ((read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, read);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline CommandResult run_pipetwin(const std::string& arguments) {
  return run_command(std::string(PIPETWIN_BINARY) + " " + arguments);
}

inline void write_file(const std::string& path, const std::string& text) {
  FILE* file = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), file);
  std::fclose(file);
}

}  // namespace pipetwin::testing
