// Profile — a model as a DAG of profiled layers, the planner's view of "what is being trained".
//
// A Profile owns its layers (times in ms per minibatch of `batch_size` samples, sizes in bytes) and the
// edges between them, held as a Boost.Graph bidirectional adjacency list. Construction validates the
// whole model (unique ids, finite non-negative numbers, edges between known layers, no cycle) and
// stores layers in a deterministic topological order: among ready layers, the one given first goes
// first. Any violation throws pipetwin::Error naming the file, the line (when known) and the field.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <optional>
#include <string>
#include <vector>

#include "planner/tensor_sums.h"

namespace pipetwin {

struct Layer {
  std::string id;           // unique name, e.g. "node4"
  std::string description;  // what the layer is, e.g. "Conv2d(3, 64, kernel_size=(3, 3))"
  double fwd_ms = 0.0;      // forward time per minibatch
  double bwd_ms = 0.0;      // full backward time per minibatch
  std::optional<double> bwd_input_ms;   // backward w.r.t. the input only (zero-bubble schedules)
  std::optional<double> bwd_weight_ms;  // backward w.r.t. the weights only
  double activation_bytes = 0.0;        // size of the layer's output(s), summed
  std::vector<double> output_bytes;     // one entry per output when the layer has several
  double param_bytes = 0.0;
  std::optional<double> flops;          // forward FLOPs per minibatch, when profiled
  std::optional<double> stashed_bytes;  // activations kept for its backward per minibatch (absent: activation_bytes)
  std::optional<double> optimizer_bytes;  // per replica beside one copy of the weights: gradients and optimizer
                                          // state (absent: param_bytes, PipeDream's one extra copy)
  std::optional<double> recompute_ms;   // recomputation: its forward (or part of it) run again before its backward,
                                        // besides bwd_ms; absent: the layer keeps what its backward needs
  double recompute_bytes = 0.0;         // recomputation: bytes rebuilt by it and held until its backward ends
  std::optional<double> compute_share;  // its weight when workers share one machine's compute (calibrated; 1 if absent)
  TensorSums tensor_sums;               // its all-reduces among a tensor-parallel group, included in its times
                                        // (tensor_sums.h); ranks 1: none
  bool is_input = false;                // a data-loading node (PipeDream's "Input"): its time is loading
};

// The one place the defaults of the two optional memory fields are applied.
inline double stashed_bytes(const Layer& layer) { return layer.stashed_bytes.value_or(layer.activation_bytes); }
inline double optimizer_bytes(const Layer& layer) { return layer.optimizer_bytes.value_or(layer.param_bytes); }
// The one place a layer's compute per minibatch is summed: forward, backward and any recomputation.
inline double compute_ms(const Layer& layer) { return layer.fwd_ms + layer.bwd_ms + layer.recompute_ms.value_or(0.0); }

// Where a layer or an edge came from, so validation errors can point at a line. Optional.
struct ProfileSourceLines {
  std::vector<int> layer_lines;  // same order as the layers given to the constructor
  std::vector<int> edge_lines;   // same order as the edges given to the constructor
};

class Profile {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  using Edge = std::pair<std::size_t, std::size_t>;  // (from, to) as indices into the given layers

  // Validates and builds. `source_path` is used only in error messages and in plan files.
  Profile(std::string name, int batch_size, std::vector<Layer> layers, std::vector<Edge> edges,
          std::string source_path = "", const ProfileSourceLines& lines = {});

  const std::string& name() const { return name_; }
  const std::string& source_path() const { return source_path_; }
  int batch_size() const { return batch_size_; }

  std::size_t layer_count() const { return layers_.size(); }
  const std::vector<Layer>& layers() const { return layers_; }  // topological order
  const Layer& layer(std::size_t index) const { return layers_.at(index); }
  std::size_t index_of(const std::string& id) const;  // throws Error for an unknown id

  const Graph& graph() const { return graph_; }
  std::vector<Edge> edges() const;  // (from, to) in topological indices, sorted
  std::vector<std::size_t> predecessors(std::size_t index) const;  // direct, ascending
  std::vector<std::size_t> successors(std::size_t index) const;    // direct, ascending

  double total_fwd_ms() const;
  double total_bwd_ms() const;
  double total_param_bytes() const;

 private:
  std::string name_;
  std::string source_path_;
  int batch_size_;
  std::vector<Layer> layers_;
  Graph graph_;
};

// The profile at `microbatch_size` samples per minibatch instead of its own batch size, assuming every
// layer's times, FLOPs and activations scale in proportion to the samples (a GPU or CPU that is not
// saturated at the smaller size runs it faster than that); parameters and optimizer state unchanged.
// Throws Error naming "--microbatch-sizes" for a size < 1.
Profile profile_at_microbatch(const Profile& profile, int microbatch_size);

}  // namespace pipetwin
