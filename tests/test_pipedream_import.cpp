#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "planner/error.h"
#include "planner/profile_io.h"
#include "test_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

// Sums of the file's own fields, read with regular expressions independently of the importer.
struct FileSums {
  int nodes = 0, edges = 0;
  double fwd_ms = 0, bwd_ms = 0, param_bytes = 0;
};

FileSums sums_of(const std::string& path) {
  std::ifstream in(path);
  FileSums sums;
  const std::regex fwd("forward_compute_time=([0-9.eE+-]+)");
  const std::regex bwd("backward_compute_time=([0-9.eE+-]+)");
  const std::regex params("parameter_size=([0-9.eE+-]+)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '\t') {
      ++sums.edges;
      continue;
    }
    ++sums.nodes;
    std::smatch match;
    if (std::regex_search(line, match, fwd)) sums.fwd_ms += std::stod(match[1]);
    if (std::regex_search(line, match, bwd)) sums.bwd_ms += std::stod(match[1]);
    if (std::regex_search(line, match, params)) sums.param_bytes += std::stod(match[1]);
  }
  return sums;
}

class PipeDreamProfiles : public ::testing::TestWithParam<std::string> {};

TEST_P(PipeDreamProfiles, ImportKeepsEveryNodeEdgeTimeAndParameter) {
  const std::string path = testing::pipedream_profile(GetParam());
  const FileSums expected = sums_of(path);
  ASSERT_GT(expected.nodes, 10);
  const Profile profile = load_profile(path);
  EXPECT_EQ(static_cast<int>(profile.layer_count()), expected.nodes);
  EXPECT_EQ(static_cast<int>(profile.edges().size()), expected.edges);
  EXPECT_NEAR(profile.total_fwd_ms(), expected.fwd_ms, 1e-9 * expected.fwd_ms);
  EXPECT_NEAR(profile.total_bwd_ms(), expected.bwd_ms, 1e-9 * expected.bwd_ms);
  EXPECT_NEAR(profile.total_param_bytes(), expected.param_bytes, 1e-9 * expected.param_bytes);
  EXPECT_EQ(profile.name(), GetParam());
  EXPECT_EQ(profile.batch_size(), kPipeDreamDefaultBatchSize);
}

TEST_P(PipeDreamProfiles, ConvertsToJsonAndBackUnchanged) {
  const Profile profile = load_profile(testing::pipedream_profile(GetParam()));
  testing::TempDir dir;
  write_profile_json(profile, dir.file("p.json"));
  EXPECT_EQ(profile_to_json(load_profile(dir.file("p.json"))), profile_to_json(profile));
}

INSTANTIATE_TEST_SUITE_P(AllThree, PipeDreamProfiles, ::testing::Values("vgg16", "resnet50", "gnmt"));

TEST(PipeDreamImport, SumsListActivationsAndMarksInputs) {
  const Profile profile = import_pipedream_graph(
      "node1 -- Input0 -- forward_compute_time=0.500, backward_compute_time=0.000, activation_size=8.0, "
      "parameter_size=0.000\n"
      "node2 -- LSTM(4, 4) -- forward_compute_time=1.000, backward_compute_time=2.000, activation_size=[6.0; 2.0; "
      "2.0], parameter_size=64.000\n"
      "\tnode1 -- node2\n",
      "tiny.txt", "tiny", 16);
  EXPECT_TRUE(profile.layer(0).is_input);
  EXPECT_FALSE(profile.layer(1).is_input);
  EXPECT_DOUBLE_EQ(profile.layer(1).activation_bytes, 10.0);
  EXPECT_EQ(profile.layer(1).output_bytes, (std::vector<double>{6.0, 2.0, 2.0}));
  EXPECT_EQ(profile.batch_size(), 16);
}

struct BadGraph {
  std::string text;
  int line;
  std::string mentions;
};

void PrintTo(const BadGraph& value, std::ostream* out) { *out << "error mentioning " << value.mentions; }

class BadGraphs : public ::testing::TestWithParam<BadGraph> {};

TEST_P(BadGraphs, NameFileLineAndProblem) {
  const std::string good =
      "node1 -- Conv -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0, "
      "parameter_size=8.0\n";
  try {
    import_pipedream_graph(good + GetParam().text, "bad.txt", "bad");
    FAIL() << "accepted: " << GetParam().text;
  } catch (const Error& error) {
    EXPECT_EQ(error.context().file, "bad.txt");
    EXPECT_EQ(error.context().line, GetParam().line) << error.what();
    EXPECT_THAT(error.what(), HasSubstr(GetParam().mentions));
    EXPECT_THAT(error.what(), HasSubstr("fix:"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadGraphs,
    ::testing::Values(
        BadGraph{"node2 -- Relu -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0\n", 2,
                 "4 comma-separated fields"},
        BadGraph{"node2 -- Relu -- forward_compute_time=-1.0, backward_compute_time=2.0, activation_size=4.0, "
                 "parameter_size=0.0\n",
                 2, "negative"},
        BadGraph{"node2 -- Relu -- forward_compute_time=abc, backward_compute_time=2.0, activation_size=4.0, "
                 "parameter_size=0.0\n",
                 2, "forward_compute_time"},
        BadGraph{"node2 -- Relu -- backward_compute_time=2.0, forward_compute_time=1.0, activation_size=4.0, "
                 "parameter_size=0.0\n",
                 2, "forward_compute_time"},
        BadGraph{"\tnode1 -- node9\n", 2, "unknown node 'node9'"},
        BadGraph{"node2 -- Relu -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0, "
                 "parameter_size=0.0\n\tnode1 -- node2\n\tnode2 -- node1\n",
                 3, "cycle"},
        BadGraph{"node1 -- Relu -- forward_compute_time=1.0, backward_compute_time=2.0, activation_size=4.0, "
                 "parameter_size=0.0\n",
                 2, "declared twice"}));

}  // namespace
}  // namespace pipetwin
