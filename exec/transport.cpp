#include "exec/transport.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>

#include "exec/transport_nccl.h"
#include "planner/error.h"

namespace pipetwin::exec {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw Error({"", 0, name}, std::string("environment variable ") + name + " is not set",
                "set MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (pipetwin run does it for you)");
  }
  return value;
}

int environment_int(const char* name, int low, int high) {
  const std::string text = environment(name);
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + text.size() || value < low || value > high) {
    throw Error({"", 0, name}, std::string(name) + "='" + text + "' is not a number between " + std::to_string(low) +
                                   " and " + std::to_string(high),
                "fix the variable");
  }
  return static_cast<int>(value);
}

c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options(const Rendezvous& rendezvous) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
      rendezvous.master_address == "localhost" ? "127.0.0.1" : rendezvous.master_address));
  options->timeout = rendezvous.timeout;
  options->threads = 1;  // one pipeline worker per core: Gloo's default second thread only competes for it
  return options;
}

std::string group_key(const std::vector<int>& group) {
  std::string key = "group";
  for (int rank : group) {
    key += '_';
    key += std::to_string(rank);  // one append each: GCC 12's -Wrestrict misreads "_" + to_string here
  }
  return key;
}

// Gloo takes host tensors: a GPU tensor without NCCL travels through a host copy.
bool through_host(const torch::Tensor& tensor, const Rendezvous& rendezvous) {
  return tensor.is_cuda() && !rendezvous.nccl;
}

}  // namespace

Rendezvous Rendezvous::from_environment(std::chrono::milliseconds timeout) {
  Rendezvous rendezvous;
  rendezvous.master_address = environment("MASTER_ADDR");
  rendezvous.master_port = environment_int("MASTER_PORT", 1, 65535);
  rendezvous.world_size = environment_int("WORLD_SIZE", 1, 1 << 20);
  rendezvous.rank = environment_int("RANK", 0, rendezvous.world_size - 1);
  rendezvous.timeout = timeout;
  return rendezvous;
}

Transport::Transport(const Rendezvous& rendezvous, const std::vector<std::vector<int>>& groups) : rendezvous_(rendezvous) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(rendezvous.master_port);
    options.isServer = rendezvous.rank == 0;
    options.numWorkers = rendezvous.world_size;
    options.timeout = rendezvous.timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(rendezvous.master_address, options);
    auto make_group = [&](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
        -> c10::intrusive_ptr<CollectiveGroup> {
      if (rendezvous.nccl) return make_nccl_group(store, rank, size, rendezvous.timeout);
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, gloo_options(rendezvous));
    };
    world_ = make_group(store_, rendezvous.rank, rendezvous.world_size);
    for (const std::vector<int>& group : groups) {
      const int position = static_cast<int>(std::find(group.begin(), group.end(), rendezvous.rank) - group.begin());
      groups_[group] = make_group(c10::make_intrusive<c10d::PrefixStore>(group_key(group), store_), position,
                                  static_cast<int>(group.size()));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {
    throw Error({"", 0, "rendezvous"},
                "worker " + std::to_string(rendezvous.rank) + " could not meet the other " +
                    std::to_string(rendezvous.world_size - 1) + " workers at " + rendezvous.master_address + ":" +
                    std::to_string(rendezvous.master_port) + " within " +
                    std::to_string(rendezvous.timeout.count() / 1000.0) + " s: " + error.what(),
                "start every worker with the same MASTER_ADDR/MASTER_PORT/WORLD_SIZE, or raise --timeout");
  }
}

Transport::~Transport() = default;

std::string lost_peer_field(int peer) { return "peer worker " + std::to_string(peer); }

bool is_lost_peer(const pipetwin::Error& error) { return error.context().field.rfind("peer worker ", 0) == 0; }

void Transport::fail(const std::string& what, int peer, const std::exception& error) const {
  std::string reason = error.what();
  const auto newline = reason.find('\n');
  if (newline != std::string::npos) reason = reason.substr(0, newline);
  throw Error({"", 0, lost_peer_field(peer)},
              "peer worker " + std::to_string(peer) + " is dead or hung (" + what + " did not complete within " +
                  std::to_string(rendezvous_.timeout.count() / 1000.0) + " s: " + reason + ")",
              "see worker " + std::to_string(peer) + "'s own message; raise --timeout if it is only slow");
}

void Transport::send(const torch::Tensor& tensor, int peer, int tag, const std::string& what) {
  std::vector<at::Tensor> tensors{through_host(tensor, rendezvous_) ? tensor.to(torch::kCPU) : tensor.contiguous()};
  try {
    sends_.push_back({world_->send(tensors, peer, tag), tensors[0], peer, tag, what});
  } catch (const std::exception& error) {
    fail(what, peer, error);
  }
}

void Transport::receive(torch::Tensor& into, int peer, int tag, const std::string& what) {
  post_receive(into, peer, tag, what);
  into = take_receive(tag);
}

void Transport::post_receive(const torch::Tensor& into, int peer, int tag, const std::string& what) {
  if (receives_.count(tag) != 0) {  // before Gloo hears of it: a second receive of the tag would stay posted there
    throw Error({"", 0, "message " + std::to_string(tag)}, what + ": a receive with this tag is already posted",
                "report this: every message of a schedule has its own id");
  }
  PendingReceive pending{{}, into, through_host(into, rendezvous_) ? torch::empty_like(into, torch::TensorOptions().device(torch::kCPU)) : into, peer, what};
  if (!rendezvous_.nccl) {
    std::vector<at::Tensor> tensors{pending.buffer};
    try {
      pending.work = world_->recv(tensors, peer, tag);
    } catch (const std::exception& error) {
      fail(what, peer, error);
    }
  }
  receives_.emplace(tag, std::move(pending));
}

torch::Tensor Transport::take_receive(int tag) {
  const auto it = receives_.find(tag);
  if (it == receives_.end()) {
    throw Error({"", 0, "message " + std::to_string(tag)}, "no receive was posted for message " + std::to_string(tag),
                "report this: a receive is posted before it is taken");
  }
  PendingReceive pending = std::move(it->second);
  receives_.erase(it);
  try {
    if (!pending.work) {
      std::vector<at::Tensor> tensors{pending.buffer};
      pending.work = world_->recv(tensors, pending.peer, tag);
    }
    pending.work->wait(rendezvous_.timeout);
  } catch (const std::exception& error) {
    fail(pending.what, pending.peer, error);
  }
  if (pending.buffer.data_ptr() != pending.into.data_ptr()) pending.into.copy_(pending.buffer);
  return pending.into;
}

void Transport::all_reduce(torch::Tensor& tensor, const std::vector<int>& group, const std::string& what) {
  auto it = groups_.find(group);
  if (it == groups_.end()) throw Error({"", 0, "all-reduce"}, "no group for " + what, "report this: groups are made at start");
  const bool staged = through_host(tensor, rendezvous_);
  std::vector<at::Tensor> tensors{staged ? tensor.to(torch::kCPU) : tensor};
  try {
    it->second->allreduce(tensors)->wait(rendezvous_.timeout);
  } catch (const std::exception& error) {
    fail(what, group.front() == rendezvous_.rank ? group.back() : group.front(), error);
  }
  if (staged) tensor.copy_(tensors[0]);
}

void Transport::barrier() {
  try {
    world_->barrier()->wait(rendezvous_.timeout);
  } catch (const std::exception& error) {
    fail("the barrier", rendezvous_.rank == 0 ? 1 : 0, error);
  }
}

std::int64_t Transport::agree(const std::string& key, std::int64_t mine) {
  const std::string name = "pipetwin/" + key;
  if (rendezvous_.rank == 0) {
    const std::string text = std::to_string(mine);
    store_->set(name, std::vector<uint8_t>(text.begin(), text.end()));
    return mine;
  }
  const auto bytes = store_->get(name);
  return std::stoll(std::string(bytes.begin(), bytes.end()));
}

std::vector<std::int64_t> Transport::gather(const std::string& key, std::int64_t mine) {
  const std::string prefix = "pipetwin/" + key + "/";
  const std::string text = std::to_string(mine);
  store_->set(prefix + std::to_string(rendezvous_.rank), std::vector<uint8_t>(text.begin(), text.end()));
  std::vector<std::int64_t> values;
  for (int rank = 0; rank < rendezvous_.world_size; ++rank) {
    try {
      const auto bytes = store_->get(prefix + std::to_string(rank));
      values.push_back(std::stoll(std::string(bytes.begin(), bytes.end())));
    } catch (const std::exception& error) {
      fail("waiting for every worker's " + key, rank, error);
    }
  }
  return values;
}

void Transport::finish_sends() {
  for (PendingSend& send : sends_) wait_for(send);
  sends_.clear();
}

void Transport::release_sends(const std::vector<int>& tags) {
  for (const int tag : tags) {
    const auto it = std::find_if(sends_.begin(), sends_.end(), [tag](const PendingSend& send) { return send.tag == tag; });
    if (it == sends_.end()) continue;
    wait_for(*it);  // delivered: returns at once
    sends_.erase(it);
  }
}

void Transport::wait_for(PendingSend& send) const {
  try {
    send.work->wait(rendezvous_.timeout);
  } catch (const std::exception& error) {
    fail(send.what, send.peer, error);
  }
}

}  // namespace pipetwin::exec
