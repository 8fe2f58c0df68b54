// Child processes — runs `count` forked copies of this process, child r computing work(r), a fixed
// number of numbers each, and collects them by rank: the probes' way of measuring several processes
// at once with the run's own process set-up. A child that throws prints one line naming itself and
// `what`; then (or when one dies, or sends too few numbers) the parent throws pipetwin::Error with `fix`.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace pipetwin::exec {

std::vector<std::vector<double>> run_in_children(int count, std::size_t numbers,
                                                 const std::function<std::vector<double>(int rank)>& work,
                                                 const std::string& what, const std::string& fix);

class Transport;

// run_in_children for processes that talk: each child, set up as a worker (memory kept, one intra-op
// thread), joins a rendezvous of `count` on a free local port with the all-reduce `groups`, pins its
// calling thread to its core after the transport has started, and computes work(transport, rank).
std::vector<std::vector<double>> run_connected_children(
    int count, std::size_t numbers, std::chrono::milliseconds timeout, const std::vector<std::vector<int>>& groups,
    const std::function<std::vector<double>(Transport& transport, int rank)>& work, const std::string& what,
    const std::string& fix);

}  // namespace pipetwin::exec
