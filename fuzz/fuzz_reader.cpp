// libFuzzer entry point for one reader (PIPETWIN_FUZZ_READER, set per executable by CMake): a bad
// file must end in pipetwin::Error; any other exception escapes and libFuzzer reports it as a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/readers.h"
#include "planner/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    pipetwin::fuzz::read_as(PIPETWIN_FUZZ_READER, std::string(reinterpret_cast<const char*>(data), size));
  } catch (const pipetwin::Error&) {
    // A clear error is the right answer to a bad file.
  }
  return 0;
}
