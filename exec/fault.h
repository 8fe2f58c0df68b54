// Fault injection for tests of the exec back end's failure handling, reachable only through the
// checked `--fault` option: a worker that dies or hangs after a number of actions, or dies while
// saving a checkpoint (its tensors written to the temporary file only).
//   die:<rank>:<actions>  hang:<rank>:<actions>  diesave:<rank>:<iteration>
// parse_fault throws pipetwin::Error naming --fault for anything else, so a typo never passes silently.
#pragma once

#include <string>

namespace pipetwin::exec {

struct FaultSpec {
  enum class Kind { None, Die, Hang, DieWhileSaving };
  Kind kind = Kind::None;
  int rank = -1;
  long long at = 0;  // actions executed (die, hang) or the iteration being saved (diesave)
};

FaultSpec parse_fault(const std::string& text);  // "" -> Kind::None

// Dies or hangs here if the fault is of this kind, for this rank, at this count; otherwise returns.
void inject_after_actions(const FaultSpec& fault, int rank, long long executed);
void inject_while_saving(const FaultSpec& fault, int rank, int iteration);

}  // namespace pipetwin::exec
