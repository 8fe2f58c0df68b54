// The fuzzers' findings as tests: every input that once crashed a reader (fuzz/regressions/<reader>/)
// must now end in one pipetwin::Error, and every corpus input (fuzz/corpus/<reader>/) must end in
// success or pipetwin::Error. Seeds (corpus files named seed-*) are valid files and must load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/readers.h"
#include "planner/error.h"
#include "test_support.h"

namespace pipetwin {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> files_in(const fs::path& folder) {
  std::vector<fs::path> files;
  if (!fs::exists(folder)) return files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class Reader : public ::testing::TestWithParam<std::string> {};

TEST_P(Reader, CorpusInputsEndInSuccessOrOneClearError) {
  const fs::path folder = fs::path(testing::source_dir()) / "fuzz" / "corpus" / GetParam();
  const auto files = files_in(folder);
  int seeds = 0;
  for (const fs::path& file : files) {
    const bool seed = file.filename().string().rfind("seed-", 0) == 0;
    seeds += seed;
    try {
      fuzz::read_as(GetParam(), read_bytes(file));
    } catch (const Error& error) {
      EXPECT_FALSE(seed) << file << ": a seed is a valid file, but: " << error.what();
      EXPECT_NE(std::string(error.what()), "") << file;
    } catch (const std::exception& other) {
      ADD_FAILURE() << file << ": not a pipetwin::Error: " << other.what();
    }
  }
  EXPECT_GE(seeds, 1) << "no seed-* file in " << folder;
  EXPECT_GT(files.size(), static_cast<std::size_t>(seeds)) << "only seeds in " << folder;
}

TEST_P(Reader, InputsThatOnceCrashedNowGiveOneClearError) {
  const fs::path folder = fs::path(testing::source_dir()) / "fuzz" / "regressions" / GetParam();
  const auto files = files_in(folder);
  EXPECT_FALSE(files.empty()) << "no regression input in " << folder << ": every reader keeps at least one";
  for (const fs::path& file : files) {
    try {
      fuzz::read_as(GetParam(), read_bytes(file));
      ADD_FAILURE() << file << ": a bad file was accepted";
    } catch (const Error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr("fuzz.")) << file << ": the error should name the file";
    } catch (const std::exception& other) {
      ADD_FAILURE() << file << ": not a pipetwin::Error: " << other.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Readers, Reader, ::testing::ValuesIn(fuzz::reader_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(Readers, AnUnknownReaderIsRefused) { EXPECT_THROW(fuzz::read_as("xml", "<a/>"), std::invalid_argument); }

}  // namespace
}  // namespace pipetwin
