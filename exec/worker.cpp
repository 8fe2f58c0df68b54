#include "exec/worker.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "exec/model_zoo.h"
#include "exec/transport.h"
#include "planner/error.h"
#include "planner/json_fields.h"
#include "planner/schedule_generators.h"
#include "planner/schedule_lowering.h"
#include "planner/schedule_validator.h"
#include "traces/trace.h"

namespace pipetwin::exec {
namespace {

using Clock = std::chrono::steady_clock;

struct InFlight {
  torch::Tensor input, output, output_gradient;
  int version = 0;
};

struct StageState {
  int stage = 0;
  bool first = false, last = false;
  std::vector<int> group;  // replicas, sorted, when more than one
  std::vector<std::int64_t> input_shape, output_shape;
  std::map<int, torch::nn::Sequential> versions;  // version -> weights; the largest is current
  std::map<int, int> uses;                        // version -> in-flight microbatches
  int version = 0;
  std::map<int, InFlight> in_flight;
  std::map<int, torch::Tensor> activations, gradients, input_gradients;
  std::vector<torch::Tensor> momentum;
  torch::Tensor reduced;  // gradient summed over versions (and replicas), waiting for the update
  std::map<int, std::pair<int, int>> version_log;  // microbatch -> (forward version, backward version)

  torch::nn::Sequential& current() { return versions.rbegin()->second; }
};

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

int message_tag(int repetition, bool gradient, int producer_stage, int microbatch) {
  return ((repetition & 0x3f) << 24) | (gradient ? 1 << 23 : 0) | ((producer_stage & 0x1ff) << 14) | (microbatch & 0x3fff);
}

torch::Tensor flat_gradients(StageState& state) {
  std::vector<torch::Tensor> sums;
  const auto reference = state.current()->parameters();
  for (std::size_t p = 0; p < reference.size(); ++p) {
    torch::Tensor sum = torch::zeros_like(reference[p]);
    for (auto& [version, module] : state.versions) {
      auto parameter = module->parameters()[p];
      if (parameter.grad().defined()) {
        sum += parameter.grad();
        parameter.mutable_grad() = torch::Tensor();
      }
    }
    sums.push_back(sum.reshape({-1}));
  }
  return sums.empty() ? torch::zeros({0}) : torch::cat(sums);
}

class Interpreter {
 public:
  Interpreter(const WorkerOptions& options) : options_(options) {}

  void run() {
    const Plan plan = load_plan(options_.plan_path);
    const PipelineShape shape = pipeline_shape(plan, options_.chunks);
    microbatches_ = options_.microbatches.value_or(plan.microbatches);
    schedule_ = lower_schedule(generate_schedule(options_.schedule, shape, microbatches_, options_.iterations));
    ValidationOptions validation;
    validation.source = options_.schedule + " schedule";
    validate_schedule(schedule_, validation);
    Rendezvous rendezvous = Rendezvous::from_environment(options_.timeout);
    rendezvous.nccl = options_.device == "cuda";
    device_ = torch::Device(torch::kCPU);
    if (options_.device == "cuda") {
      if (!torch::cuda::is_available()) {
        throw Error({"", 0, "--device"}, "no CUDA device is visible to this libtorch", "use --device cpu");
      }
      device_ = torch::Device(torch::kCUDA, static_cast<int>(rendezvous.rank % torch::cuda::device_count()));
    } else if (options_.device != "cpu") {
      throw Error({"", 0, "--device"}, "unknown device '" + options_.device + "'", "use cpu or cuda");
    }
    if (rendezvous.world_size != shape.workers) {
      throw Error({options_.plan_path, 0, "workers"},
                  "the schedule needs " + std::to_string(shape.workers) + " workers, WORLD_SIZE is " +
                      std::to_string(rendezvous.world_size),
                  "start one worker per plan worker (pipetwin run --workers " + std::to_string(shape.workers) + ")");
    }
    rank_ = rendezvous.rank;
    microbatch_size_ = plan.microbatch_size;
    model_ = make_model(options_.model, options_.small);
    build_stages(plan, shape);
    std::vector<std::vector<int>> groups;
    for (int s = 0; s < shape.stages(); ++s) {
      std::vector<int> group = shape.stage_workers[s];
      std::sort(group.begin(), group.end());
      if (group.size() > 1 && std::find(group.begin(), group.end(), rank_) != group.end()) groups.push_back(group);
    }
    Transport transport(rendezvous, groups);
    transport_ = &transport;
    if (options_.resume) load_checkpoint();
    transport.barrier();
    // One time origin for every worker on this machine (steady_clock is machine-wide); a worker on
    // another machine, whose clock is unrelated, keeps its own.
    const auto now = Clock::now().time_since_epoch().count();
    const auto shared = transport.agree("epoch", now);
    epoch_ = Clock::time_point(Clock::duration(std::llabs(shared - now) < 10'000'000'000LL ? shared : now));
    const int repetitions = schedule_has_flush(options_.schedule) ? options_.iterations : 1;
    for (int repetition = 0; repetition < repetitions; ++repetition) {
      for (const Action& action : schedule_.workers[rank_]) execute(action, repetition);
      if (repetitions > 1) checkpoint(first_iteration_ + repetition + 1);
    }
    transport.finish_sends();
    if (repetitions == 1) checkpoint(first_iteration_ + options_.iterations);
    transport.barrier();
    write_outputs(plan);
    transport_ = nullptr;
  }

 private:
  void build_stages(const Plan& plan, const PipelineShape& shape) {
    // Shapes of every stage's input and output for one microbatch.
    const Batch sample = model_->batch(options_.data_seed, 0, microbatch_size_);
    std::vector<std::vector<std::int64_t>> boundary_shapes;  // after each layer
    {
      torch::NoGradGuard no_grad;
      torch::Tensor x = sample.inputs;
      for (std::size_t l = 0; l < model_->layer_count(); ++l) {
        x = model_->layer(l).forward(x);
        boundary_shapes.push_back(x.sizes().vec());
      }
    }
    for (int s = 0; s < shape.stages(); ++s) {
      const auto& holders = shape.stage_workers[s];
      if (std::find(holders.begin(), holders.end(), rank_) == holders.end()) continue;
      const auto indices = layer_indices(plan.stages[s], model_->layer_count(), s);
      StageState state;
      state.stage = s;
      state.first = s == 0;
      state.last = s == shape.stages() - 1;
      if (holders.size() > 1) {
        state.group = holders;
        std::sort(state.group.begin(), state.group.end());
      }
      state.input_shape = indices.front() == 0 ? sample.inputs.sizes().vec() : boundary_shapes[indices.front() - 1];
      state.output_shape = boundary_shapes[indices.back()];
      state.versions[0] = model_->stage(indices.front(), indices.back());
      state.versions[0]->to(device_);
      for (const auto& parameter : state.versions[0]->parameters()) state.momentum.push_back(torch::zeros_like(parameter));
      stages_[s] = std::move(state);
    }
  }

  int global_microbatch(const Action& action, int repetition) const {
    const int iteration = first_iteration_ + (schedule_has_flush(options_.schedule) ? repetition : 0);
    return iteration * microbatches_ + action.microbatch;
  }

  void maybe_fault() {
    if (options_.fault.empty()) return;
    char kind[8] = {0};
    int rank = -1, after = 0;
    if (std::sscanf(options_.fault.c_str(), "%7[a-z]:%d:%d", kind, &rank, &after) != 3 || rank != rank_ || executed_ != after) return;
    if (std::string(kind) == "diesave") return;  // maybe_fault_while_saving
    if (std::string(kind) == "die") {
      std::fprintf(stderr, "worker %d: dying on purpose after %d actions (--fault)\n", rank_, after);
      std::fflush(stderr);
      ::_exit(3);
    }
    std::fprintf(stderr, "worker %d: hanging on purpose after %d actions (--fault)\n", rank_, after);
    std::fflush(stderr);
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  // "diesave:<rank>:<iteration>": die with the iteration's tensors written to the temporary file only.
  void maybe_fault_while_saving(int iteration) const {
    int rank = -1, at = 0;
    if (std::sscanf(options_.fault.c_str(), "diesave:%d:%d", &rank, &at) != 2 || rank != rank_ || iteration != at) return;
    std::fprintf(stderr, "worker %d: dying on purpose while saving iteration %d (--fault)\n", rank_, iteration);
    std::fflush(stderr);
    ::_exit(3);
  }

  void execute(const Action& action, int repetition) {
    maybe_fault();
    ++executed_;
    StageState& state = stages_.at(action.stage);
    const std::string what = "worker " + std::to_string(rank_) + " " + to_text(action) +
                             (action.peer >= 0 ? (action.kind == ActionKind::SEND_ACT || action.kind == ActionKind::SEND_GRAD
                                                      ? " to worker "
                                                      : " from worker ") +
                                                     std::to_string(action.peer)
                                               : "");
    const double start = seconds_since_epoch();
    const int b = action.microbatch;
    switch (action.kind) {
      case ActionKind::RECV_ACT: {
        torch::Tensor received = torch::empty(state.input_shape, torch::TensorOptions().device(device_));
        transport_->receive(received, action.peer, message_tag(repetition, false, action.stage - 1, b), what);
        state.activations[b] = received;
        break;
      }
      case ActionKind::FORWARD: {
        Batch data = model_->batch(options_.data_seed, global_microbatch(action, repetition), microbatch_size_);
        data.inputs = data.inputs.to(device_);
        data.labels = data.labels.to(device_);
        InFlight f;
        f.version = state.version;
        if (state.first) {
          f.input = data.inputs;
        } else {
          f.input = state.activations.at(b).requires_grad_(true);
          state.activations.erase(b);
        }
        f.output = state.current()->forward(f.input);
        if (state.last) f.output = model_->loss(f.output, data.labels) / microbatches_;
        ++state.uses[f.version];
        state.version_log[global_microbatch(action, repetition)].first = f.version;
        state.in_flight[b] = f;
        // The next stage on this same worker (interleaved on one worker) takes the output directly.
        if (!state.last && schedule_.shape.worker_of(action.stage + 1, b) == rank_) {
          stages_.at(action.stage + 1).activations[b] = f.output.detach();
        }
        break;
      }
      case ActionKind::SEND_ACT:
        transport_->send(state.in_flight.at(b).output.detach(), action.peer, message_tag(repetition, false, action.stage, b), what);
        break;
      case ActionKind::RECV_GRAD: {
        torch::Tensor received = torch::empty(state.output_shape, torch::TensorOptions().device(device_));
        transport_->receive(received, action.peer, message_tag(repetition, true, action.stage + 1, b), what);
        state.gradients[b] = received;
        break;
      }
      case ActionKind::BACKWARD:
      case ActionKind::BACKWARD_INPUT: {
        InFlight& f = state.in_flight.at(b);
        f.output_gradient = state.last ? torch::ones_like(f.output) : state.gradients.at(b);
        state.gradients.erase(b);
        if (action.kind == ActionKind::BACKWARD) {
          torch::autograd::backward({f.output}, {f.output_gradient});
          if (!state.first) state.input_gradients[b] = f.input.grad();
          finish_microbatch(state, b, repetition, action);
          hand_back(state, b);
        } else if (!state.first) {
          state.input_gradients[b] = torch::autograd::grad({f.output}, {f.input}, {f.output_gradient}, true)[0];
          hand_back(state, b);
        }
        break;
      }
      case ActionKind::BACKWARD_WEIGHT: {
        InFlight& f = state.in_flight.at(b);
        auto parameters = state.versions.at(f.version)->parameters();
        auto gradients = torch::autograd::grad({f.output}, parameters, {f.output_gradient}, false, false, true);
        torch::NoGradGuard no_grad;
        for (std::size_t p = 0; p < parameters.size(); ++p) {
          if (!gradients[p].defined()) continue;
          if (parameters[p].grad().defined()) {
            parameters[p].mutable_grad() = parameters[p].grad() + gradients[p];
          } else {
            parameters[p].mutable_grad() = gradients[p];
          }
        }
        finish_microbatch(state, b, repetition, action);
        break;
      }
      case ActionKind::SEND_GRAD:
        transport_->send(state.input_gradients.at(b), action.peer, message_tag(repetition, true, action.stage, b), what);
        state.input_gradients.erase(b);
        break;
      case ActionKind::ALLREDUCE:
        state.reduced = flat_gradients(state);
        transport_->all_reduce(state.reduced, state.group, what);
        break;
      case ActionKind::OPTIMIZER_STEP:
        update(state);
        break;
    }
    const int iteration = action.microbatch >= 0 && !schedule_has_flush(options_.schedule)
                              ? first_iteration_ + action.microbatch / microbatches_
                              : first_iteration_ + repetition;
    events_.push_back({rank_, action.stage, kind_name(action.kind), action.microbatch, iteration, start,
                       seconds_since_epoch(), action.bytes, action.peer});
  }

  // The previous stage on this same worker takes the input gradient directly.
  void hand_back(StageState& state, int b) {
    if (state.first || schedule_.shape.worker_of(state.stage - 1, b) != rank_) return;
    stages_.at(state.stage - 1).gradients[b] = state.input_gradients.at(b);
    state.input_gradients.erase(b);
  }

  void finish_microbatch(StageState& state, int b, int repetition, const Action& action) {
    const int version = state.in_flight.at(b).version;
    state.version_log[global_microbatch(action, repetition)].second = version;
    state.in_flight.erase(b);
    --state.uses[version];
  }

  // SGD with momentum on a new version made from the newest; versions no microbatch needs are dropped.
  void update(StageState& state) {
    torch::Tensor gradient = state.reduced.defined() ? state.reduced : flat_gradients(state);
    state.reduced = torch::Tensor();
    auto next = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(state.current()->clone());
    {
      torch::NoGradGuard no_grad;
      std::int64_t offset = 0;
      auto parameters = next->parameters();
      for (std::size_t p = 0; p < parameters.size(); ++p) {
        const auto count = parameters[p].numel();
        const torch::Tensor g = gradient.narrow(0, offset, count).view_as(parameters[p]);
        offset += count;
        state.momentum[p].mul_(options_.momentum).add_(g);
        parameters[p].sub_(options_.learning_rate * state.momentum[p]);
        parameters[p].mutable_grad() = torch::Tensor();
      }
    }
    state.versions[++state.version] = torch::nn::Sequential(next);
    for (auto it = state.versions.begin(); it != state.versions.end();) {
      if (it->first != state.version && state.uses[it->first] == 0) {
        it = state.versions.erase(it);
      } else {
        ++it;
      }
    }
  }

  double seconds_since_epoch() const { return std::chrono::duration<double>(Clock::now() - epoch_).count(); }

  std::string checkpoint_file(const std::string& extension) const {
    return options_.checkpoint_dir + "/worker" + std::to_string(rank_) + extension;
  }

  // Tensors first (temp + rename), then the small JSON naming them (temp + rename): a crash at any
  // point leaves the previous JSON, which names tensors that are complete. The JSON also names the
  // checkpoint before, kept on disk, so that workers a crash left one iteration apart (one saved
  // iteration N, another died saving it) can all resume from N - 1.
  void checkpoint(int iteration) {
    if (options_.checkpoint_dir.empty()) return;
    std::filesystem::create_directories(options_.checkpoint_dir);
    std::vector<torch::Tensor> tensors;
    nlohmann::json stages = nlohmann::json::array();
    for (auto& [s, state] : stages_) {
      auto parameters = state.current()->parameters();
      stages.push_back({{"stage", s}, {"parameters", parameters.size()}});
      for (auto& p : parameters) tensors.push_back(p.detach().to(torch::kCPU).clone());
      for (auto& m : state.momentum) tensors.push_back(m.to(torch::kCPU).clone());
    }
    const std::string tensor_path = checkpoint_file(".iteration" + std::to_string(iteration) + ".pt");
    torch::save(tensors, tensor_path + ".tmp");
    maybe_fault_while_saving(iteration);
    std::filesystem::rename(tensor_path + ".tmp", tensor_path);
    nlohmann::json meta{{"format", "pipetwin.checkpoint/1"}, {"worker", rank_},        {"iteration", iteration},
                        {"model", options_.model},             {"tensors", tensor_path}, {"stages", stages}};
    if (newest_.iteration >= 0 && newest_.iteration != iteration) {
      meta["previous"] = {{"iteration", newest_.iteration}, {"tensors", newest_.tensors}};
    }
    json_fields::write_text_atomically(checkpoint_file(".json"), meta.dump(2));
    if (!older_.tensors.empty() && older_.tensors != tensor_path && older_.tensors != newest_.tensors) {
      std::filesystem::remove(older_.tensors);
    }
    if (newest_.iteration != iteration) older_ = newest_;
    newest_ = {iteration, tensor_path};
  }

  // Resumes every worker from the newest iteration all of them saved (gathered through the store).
  void load_checkpoint() {
    const std::string path = checkpoint_file(".json");
    const nlohmann::json meta = json_fields::read_file(path);
    json_fields::expect_format(meta, "pipetwin.checkpoint/1", path);
    if (json_fields::string(meta, "model", "", path) != options_.model) {
      throw Error({path, 0, "model"}, "the checkpoint is of another model", "resume with the same --model");
    }
    SavedCheckpoint newest{static_cast<int>(json_fields::integer(meta, "iteration", "", path)),
                           json_fields::string(meta, "tensors", "", path)};
    SavedCheckpoint previous;
    if (meta.contains("previous")) {
      previous = {static_cast<int>(json_fields::integer(meta.at("previous"), "iteration", "previous", path)),
                  json_fields::string(meta.at("previous"), "tensors", "previous", path)};
    }
    const std::vector<std::int64_t> everyone = transport_->gather("resume-iteration", newest.iteration);
    const int common = static_cast<int>(*std::min_element(everyone.begin(), everyone.end()));
    if (common != newest.iteration && common != previous.iteration) {
      const int behind = static_cast<int>(std::min_element(everyone.begin(), everyone.end()) - everyone.begin());
      throw Error({path, 0, "iteration"},
                  "this worker's checkpoints are of iterations " + std::to_string(newest.iteration) +
                      (previous.iteration >= 0 ? " and " + std::to_string(previous.iteration) : std::string()) +
                      ", worker " + std::to_string(behind) + "'s newest is of iteration " + std::to_string(common) +
                      ": they are not from the same run",
                  "start again without --resume (and an empty --checkpoint-dir)");
    }
    const SavedCheckpoint& chosen = common == newest.iteration ? newest : previous;
    first_iteration_ = chosen.iteration;
    std::vector<torch::Tensor> tensors;
    try {
      torch::load(tensors, chosen.tensors);
    } catch (const std::exception& error) {
      throw Error({chosen.tensors, 0, ""}, std::string("cannot read the checkpoint's tensors: ") + error.what(),
                  "start again without --resume");
    }
    std::size_t next = 0;
    for (auto& [s, state] : stages_) {
      auto parameters = state.current()->parameters();
      if (next + 2 * parameters.size() > tensors.size()) {
        throw Error({chosen.tensors, 0, "tensors"}, "the checkpoint does not match the plan's stages",
                    "resume with the same plan");
      }
      torch::NoGradGuard no_grad;
      for (auto& p : parameters) p.copy_(tensors[next++]);
      for (auto& m : state.momentum) m.copy_(tensors[next++]);
    }
    if (&chosen == &previous) std::filesystem::remove(newest.tensors);  // an iteration the others never finished
    newest_ = chosen;
    older_ = &chosen == &newest ? previous : SavedCheckpoint{};
  }

  void write_outputs(const Plan& plan) {
    if (!options_.trace_part_path.empty()) {
      Trace trace;
      trace.header.source = "measured";
      trace.header.profile = options_.model;
      trace.header.cluster = plan.cluster_name;
      trace.header.schedule = options_.schedule;
      trace.header.workers = schedule_.shape.workers;
      trace.header.stages = schedule_.shape.stages();
      trace.header.microbatches = microbatches_;
      trace.header.microbatch_size = microbatch_size_;
      trace.header.iterations = options_.iterations;
      trace.events = events_;
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
  Schedule schedule_;
  int microbatches_ = 1, microbatch_size_ = 1, rank_ = 0, first_iteration_ = 0;
  long long executed_ = 0;
  std::unique_ptr<Model> model_;
  std::map<int, StageState> stages_;
  Transport* transport_ = nullptr;
  Clock::time_point epoch_;
  torch::Device device_{torch::kCPU};
  std::vector<TraceEvent> events_;
  struct SavedCheckpoint {
    int iteration = -1;
    std::string tensors;
  };
  SavedCheckpoint newest_, older_;  // this worker's two newest checkpoints on disk
};

}  // namespace

void run_worker(const WorkerOptions& options) {
  torch::set_num_threads(1);
  Interpreter interpreter(options);
  interpreter.run();
}

}  // namespace pipetwin::exec
