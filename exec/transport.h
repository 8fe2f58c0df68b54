// Transport — tensors between worker processes through c10d: ProcessGroupGloo on CPU.
//
// Rendezvous through a TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 hosts it), torchrun style, so
// workers can run on several machines. Sends are asynchronous (the tensor is kept until the send is
// known delivered: release_sends(), or finish_sends() at the end); receives block, and may be posted
// ahead (post_receive) so a message's bytes go out the moment it is sent. Every wait has
// the configured timeout: a dead peer (its connection closes) or a hung one (nothing within the
// timeout) becomes a pipetwin::Error naming it.
// A replicated stage's all-reduce runs on a sub-group made of its replicas only.
// GPU tensors go through NCCL when every worker has its own GPU (Rendezvous::nccl); otherwise
// (several workers on one GPU, which NCCL refuses) through host memory and Gloo.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace c10d {
class Backend;
class ProcessGroup;
class Store;
}

namespace pipetwin {
class Error;
}

namespace pipetwin::exec {

// The communicator type of one group: libtorch 2 made Gloo and NCCL "backends" of a ProcessGroup.
#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// The field of the Error a transport raises when a peer is dead or hung ("peer worker 3"), and the
// test for it: a worker that fails only because a peer did is not the one to blame.
std::string lost_peer_field(int peer);
bool is_lost_peer(const Error& error);

struct Rendezvous {
  std::string master_address = "127.0.0.1";
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds timeout{30000};
  bool nccl = false;  // GPUs: NCCL process groups (needs a PIPETWIN_WITH_NCCL build)

  // From MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; throws Error naming a missing or bad variable.
  static Rendezvous from_environment(std::chrono::milliseconds timeout);
};

class Transport {
 public:
  // Connects to every worker; `groups` lists the all-reduce groups this worker belongs to (sorted
  // ranks; every member must pass the same groups in the same order).
  Transport(const Rendezvous& rendezvous, const std::vector<std::vector<int>>& groups);
  ~Transport();

  int rank() const { return rendezvous_.rank; }

  void send(const torch::Tensor& tensor, int peer, int tag, const std::string& what);
  void receive(torch::Tensor& into, int peer, int tag, const std::string& what);
  // A receive posted now and taken later (take_receive with the same tag). Gloo holds a message's
  // bytes on the sender until the receiver has posted its receive: taking a message that was sent
  // long before then needs the sender's Gloo thread to wake, which on a busy machine waits for a
  // core (0.1 to 5 ms measured here). Posted ahead, the bytes travel when sent. Under NCCL the
  // receive is only remembered and posted when taken: an early NCCL receive would hold up the sends
  // queued behind it on the pair's stream.
  void post_receive(const torch::Tensor& into, int peer, int tag, const std::string& what);
  // The tensor of the receive posted with `tag`, once the message is here.
  torch::Tensor take_receive(int tag);
  // Sums `tensor` over the group's members, in place.
  void all_reduce(torch::Tensor& tensor, const std::vector<int>& group, const std::string& what);
  void barrier();
  void finish_sends();
  // Lets go of the sends with these tags, known delivered (send_delivery.h): waits for each (at once,
  // or an error naming the peer) and drops its tensor. Kept to the end of the run, every sent tensor
  // stayed in memory: 4 MB more per iteration for ResNet's first stage, each page a fresh fault.
  void release_sends(const std::vector<int>& tags);
  // Rank 0's value of `mine` (through the store), so workers on one machine share a time origin.
  std::int64_t agree(const std::string& key, std::int64_t mine);
  // Every rank's value of `mine`, by rank (through the store; each key used once per run).
  std::vector<std::int64_t> gather(const std::string& key, std::int64_t mine);

 private:
  [[noreturn]] void fail(const std::string& what, int peer, const std::exception& error) const;

  Rendezvous rendezvous_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<CollectiveGroup> world_;
  std::map<std::vector<int>, c10::intrusive_ptr<CollectiveGroup>> groups_;
  struct PendingSend {
    c10::intrusive_ptr<c10d::Work> work;
    torch::Tensor tensor;
    int peer;
    int tag;
    std::string what;
  };
  // Sends posted and not yet released: each keeps its tensor alive until Gloo is done with it.
  std::vector<PendingSend> sends_;
  void wait_for(PendingSend& send) const;
  struct PendingReceive {
    c10::intrusive_ptr<c10d::Work> work;  // null until posted (NCCL: posted when taken)
    torch::Tensor into;                   // where the caller wants the message
    torch::Tensor buffer;                 // what the transport receives into (a host copy for Gloo under a GPU)
    int peer;
    std::string what;
  };
  std::map<int, PendingReceive> receives_;  // by tag
};

}  // namespace pipetwin::exec
