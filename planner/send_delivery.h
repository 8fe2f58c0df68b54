// Send delivery — when a worker may let go of a tensor it sent. Sends are asynchronous and a send's
// tensor must live until the transport is done with it; receives block until their data is in. So
// once worker P has received message m from worker w, every message P sends to w afterwards (in P's
// list) proves m delivered: when w receives that later message, it may release m. Read off the built
// schedule, once, by each back end that keeps sent tensors; sends no later receipt proves delivered
// (the run's last) are released when the run waits for all its sends.
#pragma once

#include <map>
#include <vector>

#include "planner/schedule.h"

namespace pipetwin {

// For `worker`'s list: by the message id of each receive, the ids of the worker's own sends (in its
// list's order) that the receipt proves delivered. Receives that prove nothing are absent.
std::map<int, std::vector<int>> sends_delivered_by_receipt(const Schedule& schedule, int worker);

}  // namespace pipetwin
