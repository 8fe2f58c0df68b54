#include "exec/worker.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "exec/checkpoint.h"
#include "exec/compute_device.h"
#include "exec/cpu_time.h"
#include "exec/fault.h"
#include "exec/model_zoo.h"
#include "exec/peak_memory.h"
#include "exec/process_setup.h"
#include "exec/stage_state.h"
#include "exec/tensor_parallel.h"
#include "exec/transport.h"
#include "exec/transport_nccl.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_builder.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_interpreter.h"
#include "planner/send_delivery.h"
#include "traces/trace.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::size_t> layer_indices(const PlanStage& stage, std::size_t layer_count, int index) {
  std::vector<std::size_t> indices;
  for (const std::string& id : stage.layer_ids) {
    std::size_t layer = 0;
    if (id.rfind("layer", 0) != 0 || std::sscanf(id.c_str() + 5, "%zu", &layer) != 1 || layer >= layer_count) {
      throw Error({"", 0, "stages[" + std::to_string(index) + "].layers"},
                  "layer '" + id + "' is not a layer of the model (it has layer0..layer" + std::to_string(layer_count - 1) + ")",
                  "plan from a profile made by pipetwin profile --model of the same model");
    }
    indices.push_back(layer);
  }
  std::sort(indices.begin(), indices.end());
  for (std::size_t i = 1; i < indices.size(); ++i) {
    if (indices[i] != indices[i - 1] + 1) {
      throw Error({"", 0, "stages[" + std::to_string(index) + "].layers"}, "the stage's layers are not contiguous",
                  "the exec back end runs models as layer sequences; plan a chain profile");
    }
  }
  return indices;
}

// The libtorch side of the interpreter for one worker: stages of a zoo model with weight stashing,
// messages through c10d tagged with their message ids, checkpoints at iteration boundaries.
class TorchRuntime final : public ScheduleRuntime {
 public:
  explicit TorchRuntime(const WorkerOptions& options) : options_(options), fault_(parse_fault(options.fault)) {}

  void run() {
    const Plan plan = load_plan(options_.plan_path);
    schedule_ = options_.built ? *options_.built : build_schedule(plan, options_.schedule).schedule;
    const PipelineShape& shape = schedule_.shape;
    microbatches_ = schedule_.microbatches;
    Rendezvous rendezvous = Rendezvous::from_environment(options_.timeout);
    device_ = device_for_rank(options_.device, rendezvous.rank);
    rendezvous.nccl = nccl_available() && one_gpu_per_worker(options_.device, rendezvous.world_size);
    if (rendezvous.world_size != shape.workers * options_.tensor_parallel) {
      throw Error({options_.plan_path, 0, "workers"},
                  "the schedule needs " + std::to_string(shape.workers) + " workers x " +
                      std::to_string(options_.tensor_parallel) + " tensor-parallel ranks, WORLD_SIZE is " +
                      std::to_string(rendezvous.world_size),
                  "start that many processes (pipetwin run --workers " + std::to_string(shape.workers) + ")");
    }
    rank_ = rendezvous.rank % shape.workers;
    lane_ = rendezvous.rank / shape.workers;
    process_rank_ = rendezvous.rank;
    lane_offset_ = lane_ * shape.workers;
    for (const Action& a : schedule_.workers[rank_]) split_backward_ = split_backward_ || a.kind == ActionKind::BACKWARD_INPUT;
    delivered_ = sends_delivered_by_receipt(schedule_, rank_);
    find_next_receives();
    microbatch_size_ = plan.microbatch_size;
    model_ = make_model(options_.model, options_.small);
    const auto shapes = boundary_shapes();
    for (int k = 0; k < options_.tensor_parallel; ++k) tensor_group_.push_back(rank_ + k * shape.workers);
    if (options_.tensor_parallel > 1) {
      model_ = tensor_parallel_model(std::move(model_), lane_, options_.tensor_parallel, [this](torch::Tensor& tensor) {
        transport_->all_reduce(tensor, tensor_group_, "worker " + std::to_string(rank_) + " tensor-parallel sum");
      });
    }
    build_stages(plan, shape, shapes);
    std::vector<std::vector<int>> groups;  // in one order on every process, so no two wait on each other
    if (options_.tensor_parallel > 1) groups.push_back(tensor_group_);
    for (auto& [s, state] : stages_) {
      if (!state.group.empty() && std::find(groups.begin(), groups.end(), state.group) == groups.end()) {
        groups.push_back(state.group);
      }
    }
    std::sort(groups.begin(), groups.end());
    Transport transport(rendezvous, groups);
    transport_ = &transport;
    pin_to_own_core(rendezvous.rank, rendezvous.world_size);  // after the transport: its threads stay free (process_setup.h)
    if (!options_.checkpoint_dir.empty()) {
      checkpoints_ = std::make_unique<CheckpointStore>(options_.checkpoint_dir, rendezvous.rank, options_.model, fault_);
    }
    if (options_.resume) resume();
    transport.barrier();
    // One time origin for every worker on this machine (steady_clock is machine-wide); a worker on
    // another machine, whose clock is unrelated, keeps its own.
    const auto now = Clock::now().time_since_epoch().count();
    const auto shared = transport.agree("epoch", now);
    epoch_ = Clock::time_point(Clock::duration(std::llabs(shared - now) < 10'000'000'000LL ? shared : now));
    memory_.start(stage_state_bytes());
    events_.reserve(schedule_.workers[rank_].size());  // grown while activations live, it would split the heap
    for (const Action* first : first_receives_) post_receive(*first);
    interpret(schedule_.workers[rank_], *this, [this](const Action& a, double start_s, double end_s) {
      events_.push_back({rank_, a.stage, a.kind, a.microbatch, a.iteration, start_s, end_s, a.bytes,
                         a.peer, a.message});
    });
    if (process_cpu_from_s_ >= 0.0) process_cpu_used_s_ = process_cpu_s() - process_cpu_from_s_;
    transport.finish_sends();
    if (!schedule_has_flush(schedule_.name)) checkpoint(first_iteration_ + schedule_.iterations);
    transport.barrier();
    write_outputs(plan);
    transport_ = nullptr;
  }

 private:
  // Shapes of the model's input and of every layer's output for one microbatch (of the whole model:
  // a tensor-parallel one's are the same, and it could not run before the transport exists).
  std::vector<std::vector<std::int64_t>> boundary_shapes() const {
    torch::NoGradGuard no_grad;
    torch::Tensor x = model_->batch(options_.data_seed, 0, microbatch_size_).inputs;
    std::vector<std::vector<std::int64_t>> shapes = {x.sizes().vec()};
    for (std::size_t l = 0; l < model_->layer_count(); ++l) {
      x = model_->layer(l).forward(x);
      shapes.push_back(x.sizes().vec());
    }
    return shapes;
  }

  // `shapes`: boundary_shapes().
  void build_stages(const Plan& plan, const PipelineShape& shape, const std::vector<std::vector<std::int64_t>>& shapes) {
    for (int s = 0; s < shape.stages(); ++s) {
      const auto& holders = shape.stage_workers[s];
      if (std::find(holders.begin(), holders.end(), rank_) == holders.end()) continue;
      const auto indices = layer_indices(plan.stages[s], model_->layer_count(), s);
      StageState state;
      state.stage = s;
      state.first = s == 0;
      state.last = s == shape.stages() - 1;
      if (holders.size() > 1) {  // the replicas' processes of this lane
        for (int holder : holders) state.group.push_back(holder + lane_offset_);
        std::sort(state.group.begin(), state.group.end());
      }
      state.input_shape = shapes[indices.front()];
      state.output_shape = shapes[indices.back() + 1];
      state.versions[0] = model_->stage(indices.front(), indices.back());
      state.versions[0]->to(device_);
      for (const auto& parameter : state.versions[0]->parameters()) state.momentum.push_back(torch::zeros_like(parameter));
      stages_[s] = std::move(state);
    }
  }

  // A microbatch's number over the whole training run (resumed runs included): picks its samples.
  int global_microbatch(const Action& action) const {
    return (first_iteration_ + action.iteration) * microbatches_ + action.microbatch;
  }
  // Its number within this run: the key of everything kept for it between actions.
  int run_microbatch(const Action& action) const { return action.iteration * microbatches_ + action.microbatch; }

  double now_s() override { return std::chrono::duration<double>(Clock::now() - epoch_).count(); }

  void before_action(const Action& action) override {
    inject_after_actions(fault_, process_rank_, executed_++);
    if (measured(action) && process_cpu_from_s_ < 0.0) process_cpu_from_s_ = process_cpu_s();
  }

  void receive(const Action& action) override {
    StageState& state = stages_.at(action.stage);
    torch::Tensor received = transport_->take_receive(action.message);
    if (const auto next = next_receive_.find(action.message); next != next_receive_.end()) post_receive(*next->second);
    if (const auto proven = delivered_.find(action.message); proven != delivered_.end()) transport_->release_sends(proven->second);
    wait_for(device_);
    (action.kind == ActionKind::RECV_ACT ? state.activations : state.gradients)[run_microbatch(action)] = received;
  }

  void send(const Action& action) override {
    StageState& state = stages_.at(action.stage);
    const int b = run_microbatch(action);
    if (action.kind == ActionKind::SEND_ACT) {
      transport_->send(state.in_flight.at(b).output.detach(), action.peer + lane_offset_, action.message, describe(action));
    } else {
      transport_->send(state.input_gradients.at(b), action.peer + lane_offset_, action.message, describe(action));
      state.input_gradients.erase(b);
    }
  }

  void compute(const Action& action) override {
    const double cpu_from_s = thread_cpu_s();
    run_compute(action);
    if (measured(action)) compute_cpu_s_ += thread_cpu_s() - cpu_from_s;
  }

  void run_compute(const Action& action) {
    StageState& state = stages_.at(action.stage);
    if (action.kind == ActionKind::FORWARD) {
      forward(state, action);
    } else if (action.kind == ActionKind::RECOMPUTE) {
      recompute(state, action);
    } else if (action.kind == ActionKind::BACKWARD_WEIGHT) {
      backward_weight(state, action);
    } else {
      backward(state, action);
    }
    wait_for(device_);
  }

  void all_reduce(const Action& action) override {
    StageState& state = stages_.at(action.stage);
    state.reduced = flat_gradients(state);
    transport_->all_reduce(state.reduced, state.group, describe(action));
    wait_for(device_);
  }

  void optimizer_step(const Action& action) override {
    const double cpu_from_s = thread_cpu_s();
    apply_sgd(stages_.at(action.stage), options_.learning_rate, options_.momentum);
    wait_for(device_);
    if (measured(action)) compute_cpu_s_ += thread_cpu_s() - cpu_from_s;
  }

  // A plan of a modelled tensor-parallel profile (pipetwin model --tp): its sums are actions for the
  // simulator; here a tensor-parallel model sums inside its blocks (run --tp, profiled with profile --tp).
  void tensor_all_reduce(const Action& action, ActionKind) override {
    throw Error({options_.plan_path, 0, "stages[" + std::to_string(action.stage) + "].tensor_sums"},
                describe(action) + ": the plan's tensor-parallel sums come from a modelled profile, which no zoo model runs",
                "run a plan of a measured profile (pipetwin profile --tp T, then pipetwin run --tp T)");
  }

  void end_of_iteration(int iteration) override {
    if (schedule_has_flush(schedule_.name)) checkpoint(first_iteration_ + iteration + 1);
  }

 private:
  std::string describe(const Action& action) const {
    std::string text = "worker " + std::to_string(rank_) + " " + to_text(action);
    if (options_.tensor_parallel > 1) text += " (tensor-parallel rank " + std::to_string(lane_) + ")";
    if (is_send(action.kind)) text += " to worker " + std::to_string(action.peer);
    if (is_receive(action.kind)) text += " from worker " + std::to_string(action.peer);
    return text;
  }

  // Each receive is posted one receive ahead on its channel (the same stage, kind and peer): when
  // the one before it is taken, or at the start for the first. The sender's bytes then go out as
  // it sends (Transport::post_receive), for one extra buffer per channel.
  void find_next_receives() {
    std::map<std::tuple<int, ActionKind, int>, const Action*> last_on_channel;
    for (const Action& action : schedule_.workers[rank_]) {
      if (!is_receive(action.kind)) continue;
      const auto channel = std::make_tuple(action.stage, action.kind, action.peer);
      const auto it = last_on_channel.find(channel);
      if (it == last_on_channel.end()) {
        first_receives_.push_back(&action);
      } else {
        next_receive_[it->second->message] = &action;
      }
      last_on_channel[channel] = &action;
    }
  }

  void post_receive(const Action& action) {
    const StageState& state = stages_.at(action.stage);
    const auto& shape = action.kind == ActionKind::RECV_ACT ? state.input_shape : state.output_shape;
    transport_->post_receive(torch::empty(shape, torch::TensorOptions().device(device_)), action.peer + lane_offset_,
                             action.message, describe(action));
  }

  // The microbatch's inputs (the first stage's) and labels (the last stage's loss), each made only where
  // it is used: a middle stage makes neither.
  torch::Tensor microbatch_inputs(const Action& action) const {
    return model_->batch(options_.data_seed, global_microbatch(action), microbatch_size_).inputs.to(device_);
  }
  torch::Tensor microbatch_labels(const StageState& state, const Action& action) const {
    if (!state.last) return {};
    return model_->labels(options_.data_seed, global_microbatch(action), microbatch_size_).to(device_);
  }

  // The stage's layers of f's weight version on f.input, building the graph the backward needs unless
  // grad mode is off; the last stage ends with the loss.
  void run_layers(StageState& state, InFlight& f, const torch::Tensor& labels) {
    f.layer_outputs.clear();
    auto& layers = state.versions.at(f.version);
    if (split_backward_) {
      // Layer by layer, keeping each layer's output, so BACKWARD_WEIGHT can take each layer alone.
      torch::Tensor x = f.input;
      for (auto layer = layers->begin(); layer != layers->end(); ++layer) {
        if (layer != layers->begin()) f.layer_outputs.push_back(x);
        x = layer->forward(x);
      }
      f.output = x;
    } else {
      f.output = layers->forward(f.input);
    }
    if (state.last) f.output = model_->loss(f.output, labels) / microbatches_;
  }

  // A recomputing stage (the plan's) keeps only the input: the forward runs without a graph, and
  // RECOMPUTE runs it again with one, on the same weight version and data, before the backward.
  void forward(StageState& state, const Action& action) {
    const int b = run_microbatch(action);
    const torch::Tensor labels = microbatch_labels(state, action);
    InFlight f;
    f.version = state.version;
    if (state.first) {
      f.input = microbatch_inputs(action);
    } else {
      f.input = state.activations.at(b).requires_grad_(true);
      state.activations.erase(b);
    }
    if (schedule_.shape.recomputes(action.stage)) {
      torch::NoGradGuard no_graph;
      run_layers(state, f, labels);
      f.layer_outputs.clear();
    } else {
      run_layers(state, f, labels);
    }
    ++state.uses[f.version];
    if (!options_.versions_log_path.empty()) state.version_log[global_microbatch(action)].first = f.version;
    state.in_flight[b] = f;
    // The next stage on this same worker (interleaved on one worker) takes the output directly.
    if (!state.last && schedule_.shape.worker_of(action.stage + 1, action.microbatch) == rank_) {
      stages_.at(action.stage + 1).activations[b] = f.output.detach();
    }
  }

  void recompute(StageState& state, const Action& action) {
    InFlight& f = state.in_flight.at(run_microbatch(action));
    run_layers(state, f, microbatch_labels(state, action));
  }

  // BACKWARD (input and weights) or BACKWARD_INPUT (input only).
  void backward(StageState& state, const Action& action) {
    const int b = run_microbatch(action);
    InFlight& f = state.in_flight.at(b);
    f.output_gradient = state.last ? torch::ones_like(f.output) : state.gradients.at(b);
    state.gradients.erase(b);
    if (action.kind == ActionKind::BACKWARD) {
      torch::autograd::backward({f.output}, {f.output_gradient});
      if (!state.first) state.input_gradients[b] = f.input.grad();
      finish_microbatch(state, action);
      hand_back(state, action);
    } else {
      // Gradients of the stage's input and of every inner layer output; weights wait for BACKWARD_WEIGHT.
      std::vector<torch::Tensor> wrt = f.layer_outputs;
      if (!state.first) wrt.push_back(f.input);
      if (!wrt.empty()) {
        auto gradients = torch::autograd::grad({f.output}, wrt, {f.output_gradient}, true);
        if (!state.first) {
          state.input_gradients[b] = gradients.back();
          gradients.pop_back();
        }
        f.layer_output_gradients = gradients;
      }
      if (!state.first) hand_back(state, action);
    }
  }

  // Each layer's weight gradients from its own output gradient (kept by BACKWARD_INPUT), so the work
  // is the weight part alone, as the profiler measures it.
  void backward_weight(StageState& state, const Action& action) {
    InFlight& f = state.in_flight.at(run_microbatch(action));
    auto& layers = state.versions.at(f.version);
    std::size_t l = 0;
    for (auto layer = layers->begin(); layer != layers->end(); ++layer, ++l) {
      auto parameters = layer->ptr()->parameters();
      if (parameters.empty()) continue;
      const bool last = l == f.layer_outputs.size();
      const torch::Tensor& output = last ? f.output : f.layer_outputs[l];
      const torch::Tensor& gradient = last ? f.output_gradient : f.layer_output_gradients[l];
      if (!output.requires_grad()) continue;
      auto gradients = torch::autograd::grad({output}, parameters, {gradient}, true, false, true);
      torch::NoGradGuard no_grad;
      for (std::size_t p = 0; p < parameters.size(); ++p) {
        if (!gradients[p].defined()) continue;
        if (parameters[p].grad().defined()) {
          parameters[p].mutable_grad() = parameters[p].grad() + gradients[p];
        } else {
          parameters[p].mutable_grad() = gradients[p];
        }
      }
    }
    finish_microbatch(state, action);
  }

  // The previous stage on this same worker takes the input gradient directly.
  void hand_back(StageState& state, const Action& action) {
    const int b = run_microbatch(action);
    if (state.first || schedule_.shape.worker_of(state.stage - 1, action.microbatch) != rank_) return;
    stages_.at(state.stage - 1).gradients[b] = state.input_gradients.at(b);
    state.input_gradients.erase(b);
  }

  void finish_microbatch(StageState& state, const Action& action) {
    const int b = run_microbatch(action);
    const int version = state.in_flight.at(b).version;
    if (!options_.versions_log_path.empty()) state.version_log[global_microbatch(action)].second = version;
    state.in_flight.erase(b);
    --state.uses[version];
  }

  // Bytes of what every stage holds before the first action: its weights and momentum buffers.
  double stage_state_bytes() {
    double bytes = 0.0;
    for (auto& [s, state] : stages_) {
      for (const auto& p : state.current()->parameters()) bytes += static_cast<double>(p.nbytes());
      for (const auto& m : state.momentum) bytes += static_cast<double>(m.nbytes());
    }
    return bytes;
  }

  // Every stage's parameters, then its momentum buffers, in stage order.
  void checkpoint(int iteration) {
    if (!checkpoints_) return;
    std::vector<torch::Tensor> tensors;
    nlohmann::json stages = nlohmann::json::array();
    for (auto& [s, state] : stages_) {
      auto parameters = state.current()->parameters();
      stages.push_back({{"stage", s}, {"parameters", parameters.size()}});
      for (auto& p : parameters) tensors.push_back(p.detach().to(torch::kCPU).clone());
      for (auto& m : state.momentum) tensors.push_back(m.to(torch::kCPU).clone());
    }
    checkpoints_->save(iteration, tensors, stages);
  }

  // Resumes every worker from the newest iteration all of them hold intact (agreed through the store).
  void resume() {
    if (!checkpoints_) throw Error({"", 0, "--resume"}, "--resume needs --checkpoint-dir", "pass the directory of the run");
    std::vector<torch::Tensor> tensors;
    first_iteration_ = checkpoints_->resume(tensors, [this](std::int64_t offer) {
      const std::vector<std::int64_t> everyone = transport_->gather("resume-iteration", offer);
      return *std::min_element(everyone.begin(), everyone.end());
    });
    std::size_t next = 0;
    for (auto& [s, state] : stages_) {
      auto parameters = state.current()->parameters();
      if (next + parameters.size() + state.momentum.size() > tensors.size()) {
        throw Error({options_.checkpoint_dir, 0, "tensors"}, "the checkpoint does not match the plan's stages",
                    "resume with the same plan");
      }
      torch::NoGradGuard no_grad;
      for (auto& p : parameters) p.copy_(tensors[next++]);
      for (auto& m : state.momentum) m.copy_(tensors[next++]);
    }
  }

  void write_outputs(const Plan& plan) {
    if (!options_.trace_part_path.empty()) {
      Trace trace;
      trace.header = trace_header(schedule_, "measured", tensor_parallel_profile_name(options_.model, options_.tensor_parallel), plan.cluster_name, microbatch_size_,
                                  measured_from_iteration());
      if (lane_ == 0) trace.events = events_;  // the other lanes ran the same actions
      trace.header.extra["peak_memory_bytes"] = memory_.peak_bytes();
      // The process's CPU over the measured iterations (every thread: the transport's, the runtime's)
      // and its compute actions' (forward, backward, optimizer steps) within it; -1 when none ran.
      trace.header.extra["process_cpu_s"] = process_cpu_used_s_;
      trace.header.extra["compute_cpu_s"] = process_cpu_used_s_ >= 0.0 ? compute_cpu_s_ : -1.0;
      // Events count this run's iterations from 0 (as the header's iterations and warm-up do); a
      // resumed run says where in the training they are.
      if (first_iteration_ > 0) trace.header.extra["first_iteration"] = first_iteration_;
      write_trace(trace, options_.trace_part_path);
    }
    if (!options_.versions_log_path.empty()) {
      nlohmann::json log = nlohmann::json::array();
      for (auto& [s, state] : stages_) {
        for (const auto& [microbatch, versions] : state.version_log) {
          log.push_back({{"stage", s}, {"microbatch", microbatch}, {"forward", versions.first}, {"backward", versions.second}});
        }
      }
      json_fields::write_text_atomically(options_.versions_log_path, log.dump());
    }
  }

  const WorkerOptions& options_;
  const FaultSpec fault_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  Schedule schedule_;
  int microbatches_ = 1, microbatch_size_ = 1, rank_ = 0, first_iteration_ = 0;
  int process_rank_ = 0, lane_ = 0, lane_offset_ = 0;  // this process's tensor-parallel rank; the first process rank of its lane
  std::vector<int> tensor_group_;   // the processes of this plan worker (its lanes), by rank
  bool split_backward_ = false;  // the schedule splits backward into input and weight parts
  std::map<int, std::vector<int>> delivered_;  // received message -> own sends it proves delivered
  std::vector<const Action*> first_receives_;        // the first receive of each channel (find_next_receives)
  std::map<int, const Action*> next_receive_;        // received message -> the next receive on its channel
  PeakMemory memory_;
  long long executed_ = 0;
  double process_cpu_from_s_ = -1.0;  // the process's CPU time when the first measured action began
  double process_cpu_used_s_ = -1.0;  // over the measured iterations
  double compute_cpu_s_ = 0.0;        // the compute actions' of the measured iterations

  int measured_from_iteration() const { return std::min(options_.warmup_iterations, std::max(0, schedule_.iterations - 1)); }
  bool measured(const Action& action) const { return action.iteration >= measured_from_iteration(); }
  std::unique_ptr<Model> model_;
  std::map<int, StageState> stages_;
  Transport* transport_ = nullptr;
  Clock::time_point epoch_;
  torch::Device device_{torch::kCPU};
  std::vector<TraceEvent> events_;
};

}  // namespace

void run_worker(const WorkerOptions& options) {
  keep_freed_memory();
  torch::set_num_threads(1);
  TorchRuntime runtime(options);
  runtime.run();
}

}  // namespace pipetwin::exec
