// The folder of the running executable (pipetwin, pipetwin-sim or pipetwin-exec): where `pipetwin`
// finds the executables it hands commands to, and where validate looks for the repository's
// default cluster (the build folder's parent).
#pragma once

#include <string>

namespace pipetwin::cli {

// "" when the system does not say (no /proc).
std::string executable_folder();

}  // namespace pipetwin::cli
