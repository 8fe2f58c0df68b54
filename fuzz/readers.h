// Readers under fuzzing — one entry point per file format pipetwin reads, taking the file's bytes.
//
// Each reader parses the text exactly as loading a file would and checks what the loader checks
// (a schedule CSV is also validated against a fixed pipeline, so the validator and the deadlock
// check see arbitrary action lists). A reader either returns or throws pipetwin::Error; anything
// else (another exception, a crash, a hang) is a bug the fuzzers and the regression test look for.
#pragma once

#include <string>
#include <vector>

namespace pipetwin::fuzz {

// "profile-json", "pipedream-graph", "cluster", "plan", "schedule-csv", "trace", "torch-schedule-csv",
// "kineto-trace".
const std::vector<std::string>& reader_names();

// Runs the named reader on `text`; throws pipetwin::Error for a bad file, std::invalid_argument
// for an unknown reader name.
void read_as(const std::string& reader, const std::string& text);

}  // namespace pipetwin::fuzz
