#include "exec/fault.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "planner/error.h"

namespace pipetwin::exec {

FaultSpec parse_fault(const std::string& text) {
  FaultSpec fault;
  if (text.empty()) return fault;
  char kind[16] = {0};
  int rank = -1, consumed = 0;
  long long at = -1;
  const bool parsed = std::sscanf(text.c_str(), "%15[a-z]:%d:%lld%n", kind, &rank, &at, &consumed) == 3 &&
                      consumed == static_cast<int>(text.size());
  const std::string name = kind;
  if (parsed && rank >= 0 && at >= 0) {
    if (name == "die") fault.kind = FaultSpec::Kind::Die;
    if (name == "hang") fault.kind = FaultSpec::Kind::Hang;
    if (name == "diesave") fault.kind = FaultSpec::Kind::DieWhileSaving;
  }
  if (fault.kind == FaultSpec::Kind::None) {
    throw Error({"", 0, "--fault"}, "'" + text + "' is not a fault",
                "write die:<rank>:<actions>, hang:<rank>:<actions> or diesave:<rank>:<iteration> (testing only)");
  }
  fault.rank = rank;
  fault.at = at;
  return fault;
}

void inject_after_actions(const FaultSpec& fault, int rank, long long executed) {
  if (fault.rank != rank || fault.at != executed) return;
  if (fault.kind == FaultSpec::Kind::Die) {
    std::fprintf(stderr, "worker %d: dying on purpose after %lld actions (--fault)\n", rank, executed);
    std::fflush(stderr);
    ::_exit(3);
  }
  if (fault.kind == FaultSpec::Kind::Hang) {
    std::fprintf(stderr, "worker %d: hanging on purpose after %lld actions (--fault)\n", rank, executed);
    std::fflush(stderr);
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

void inject_while_saving(const FaultSpec& fault, int rank, int iteration) {
  if (fault.kind != FaultSpec::Kind::DieWhileSaving || fault.rank != rank || fault.at != iteration) return;
  std::fprintf(stderr, "worker %d: dying on purpose while saving iteration %d (--fault)\n", rank, iteration);
  std::fflush(stderr);
  ::_exit(3);
}

}  // namespace pipetwin::exec
