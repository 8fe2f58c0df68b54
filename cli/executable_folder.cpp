#include "cli/executable_folder.h"

#include <filesystem>
#include <system_error>

namespace pipetwin::cli {

std::string executable_folder() {
  std::error_code code;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", code);
  return code ? std::string() : self.parent_path().string();
}

}  // namespace pipetwin::cli
