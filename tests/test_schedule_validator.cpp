// Mutation tests: a sound schedule with one fault injected is rejected, naming the worker and action.
#include "planner/schedule_validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "planner/error.h"
#include "schedule_support.h"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

int find(const std::vector<Action>& actions, const std::string& text) {
  for (std::size_t i = 0; i < actions.size(); ++i) {
    if (to_text(actions[i]) == text) return static_cast<int>(i);
  }
  ADD_FAILURE() << text << " not found";
  return -1;
}

using testing::rejection;

TEST(Validator, AcceptsEveryGeneratedSchedule) {
  EXPECT_NO_THROW(validate_schedule(testing::lowered("gpipe", testing::pipeline({2, 1, 3}), 6)));
  EXPECT_NO_THROW(validate_schedule(testing::lowered("1f1b", testing::pipeline({2, 1, 3}), 6)));
  EXPECT_NO_THROW(validate_schedule(testing::lowered("pipedream", testing::pipeline({2, 1, 3}), 6, 2)));
  EXPECT_NO_THROW(validate_schedule(testing::lowered("2bw", testing::pipeline({2, 1, 3}), 6, 2)));
  EXPECT_NO_THROW(validate_schedule(testing::lowered("interleaved", testing::interleaved(3, 2), 6)));
  EXPECT_NO_THROW(validate_schedule(testing::lowered("zb-h1", testing::straight(3), 6)));
}

TEST(Validator, ARemovedReceiveIsNamed) {
  Schedule schedule = testing::lowered("1f1b", testing::straight(3), 4);
  auto& worker = schedule.workers[1];
  worker.erase(worker.begin() + find(worker, "1RECV_F2"));
  const Error error = rejection(schedule);
  EXPECT_THAT(error.context().field, HasSubstr("worker 1 action #"));
  EXPECT_THAT(error.context().field, HasSubstr("(1F2)"));
  EXPECT_THAT(error.what(), HasSubstr("no RECV_F comes before it"));
}

TEST(Validator, ARemovedGradientReceiveIsNamed) {
  Schedule schedule = testing::lowered("gpipe", testing::straight(2), 3);
  auto& worker = schedule.workers[0];
  worker.erase(worker.begin() + find(worker, "0RECV_B1"));
  const Error error = rejection(schedule);
  EXPECT_THAT(error.context().field, HasSubstr("(0B1)"));
  EXPECT_THAT(error.what(), HasSubstr("RECV_B"));
}

TEST(Validator, AnOrphanSendIsNamed) {
  Schedule schedule = testing::lowered("gpipe", testing::straight(2), 2);
  Action extra{.stage = 0, .kind = ActionKind::SEND_ACT, .microbatch = 1, .peer = 1, .bytes = 1e6};
  schedule.workers[0].insert(schedule.workers[0].begin() + find(schedule.workers[0], "0SEND_F1"), extra);
  EXPECT_THAT(rejection(schedule).what(), HasSubstr("has no message id"));
  auto& worker = schedule.workers[0];
  worker[find(worker, "0SEND_F1")].message = worker[find(worker, "0SEND_F1") + 1].message;  // the same id twice
  const Error error = rejection(schedule);
  EXPECT_THAT(error.what(), HasSubstr("a second time"));
  EXPECT_THAT(error.context().field, HasSubstr("worker 0"));
}

TEST(Validator, AReceiveThatNamesAnotherMessageIsNamed) {
  // Worker 1's receives of microbatches 0 and 1 swap ids: each id still has one send and one
  // receive, but the microbatches disagree.
  Schedule schedule = testing::lowered("gpipe", testing::straight(2), 2);
  auto& worker = schedule.workers[1];
  std::swap(worker[find(worker, "1RECV_F0")].message, worker[find(worker, "1RECV_F1")].message);
  const Error error = rejection(schedule);
  EXPECT_THAT(error.what(), HasSubstr("does not match the send of message"));
  EXPECT_THAT(error.what(), HasSubstr("iteration or microbatch differ"));
  EXPECT_THAT(error.context().field, HasSubstr("worker 1"));
}

TEST(Validator, TwoSwappedActionsThatDeadlockAreNamed) {
  // GPipe on 2 workers: worker 0 runs F0 SEND_F0 F1 SEND_F1 RECV_B0 ... Swapping SEND_F1 and RECV_B0
  // makes worker 0 wait for a gradient that needs the activation it has not sent yet.
  Schedule schedule = testing::lowered("gpipe", testing::straight(2), 2);
  auto& worker = schedule.workers[0];
  std::swap(worker[find(worker, "0SEND_F1")], worker[find(worker, "0RECV_B0")]);
  const Error error = rejection(schedule);
  EXPECT_EQ(error.context().field, "worker 0 action #3 (0RECV_B0)");
  EXPECT_THAT(error.what(), HasSubstr("deadlock"));
}

TEST(Validator, BackwardBeforeForwardIsNamed) {
  Schedule schedule = testing::lowered("gpipe", testing::straight(1), 2);
  auto& worker = schedule.workers[0];
  std::swap(worker[find(worker, "0F1")], worker[find(worker, "0B1")]);
  const Error error = rejection(schedule);
  EXPECT_THAT(error.context().field, HasSubstr("(0B1)"));
  EXPECT_THAT(error.what(), HasSubstr("before the forward"));
}

TEST(Validator, MissingBackwardAndWrongReplicaAreNamed) {
  Schedule schedule = testing::lowered("gpipe", testing::straight(1), 2);
  schedule.workers[0].erase(schedule.workers[0].begin() + find(schedule.workers[0], "0B0"));
  EXPECT_THAT(rejection(schedule).what(), HasSubstr("stage 0 microbatch 0 of iteration 0 needs one backward"));

  Schedule replicated = testing::lowered("1f1b", testing::pipeline({2, 1}), 4);
  replicated.workers[0][find(replicated.workers[0], "0F0")].microbatch = 1;
  EXPECT_THAT(rejection(replicated).what(), HasSubstr("belongs to worker 1"));
}

TEST(Validator, WeightBeforeInputGradientIsNamed) {
  Schedule schedule = testing::lowered("zb-h1", testing::straight(1), 2);
  auto& worker = schedule.workers[0];
  std::swap(worker[find(worker, "0I0")], worker[find(worker, "0W0")]);
  EXPECT_THAT(rejection(schedule).what(), HasSubstr("weight gradient comes before the input gradient"));
}

// A split backward's W reads the tensors its I read, so they are held from F to W: on one worker,
// F0 I0 F1 W0 I1 W1 holds two microbatches at F1 (one while counting to I), F0 I0 W0 F1 I1 W1 one.
TEST(Validator, SplitBackwardHoldsActivationsUntilItsWeightPass) {
  auto one_worker = [](const std::vector<std::string>& codes) {
    Schedule schedule{"by-hand", 2, 1, testing::straight(1), {{}}};
    for (const std::string& code : codes) {
      schedule.workers[0].push_back(compute_action(0, *kind_from_code(code.substr(0, 1)), code[1] - '0'));
    }
    schedule.workers[0].push_back(compute_action(0, ActionKind::OPTIMIZER_STEP, -1));
    return schedule;
  };
  const std::vector<double> activation_bytes = {3e6};
  const auto overlapped = schedule_memory(one_worker({"F0", "I0", "F1", "W0", "I1", "W1"}), activation_bytes);
  EXPECT_EQ(overlapped[0].peak_in_flight, 2);
  EXPECT_DOUBLE_EQ(overlapped[0].activation_bytes_at_peak, 6e6);
  const auto one_at_a_time = schedule_memory(one_worker({"F0", "I0", "W0", "F1", "I1", "W1"}), activation_bytes);
  EXPECT_EQ(one_at_a_time[0].peak_in_flight, 1);
  EXPECT_DOUBLE_EQ(one_at_a_time[0].activation_bytes_at_peak, 3e6);
  const auto full_backward = schedule_memory(one_worker({"F0", "B0", "F1", "B1"}), activation_bytes);
  EXPECT_EQ(full_backward[0].peak_in_flight, 1);
  // The I leaves its layers' output gradients (1 MB here) for the W: F0 I0 F1 peaks at 3 + 1 + 3 MB,
  // F0 I0 W0 at 3 + 1; a full backward leaves nothing.
  const std::vector<double> gradient_bytes = {1e6};
  EXPECT_DOUBLE_EQ(schedule_memory(one_worker({"F0", "I0", "F1", "W0", "I1", "W1"}), activation_bytes, {}, gradient_bytes)[0]
                       .activation_bytes_at_peak, 7e6);
  EXPECT_DOUBLE_EQ(schedule_memory(one_worker({"F0", "I0", "W0", "F1", "I1", "W1"}), activation_bytes, {}, gradient_bytes)[0]
                       .activation_bytes_at_peak, 4e6);
  EXPECT_DOUBLE_EQ(schedule_memory(one_worker({"F0", "B0", "F1", "B1"}), activation_bytes, {}, gradient_bytes)[0]
                       .activation_bytes_at_peak, 3e6);
}

TEST(Validator, MemoryLimitIsChecked) {
  const Schedule schedule = testing::lowered("gpipe", testing::straight(2), 8);
  ValidationOptions options;
  options.activation_bytes = {1e9, 1e9};
  options.memory_limit_bytes = 5e9;  // GPipe keeps 8 x 1 GB in flight
  try {
    validate_schedule(schedule, options);
    FAIL();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("8 microbatches in flight"));
  }
  options.memory_limit_bytes = 9e9;
  EXPECT_NO_THROW(validate_schedule(schedule, options));
  // What each worker process holds itself counts too: 8 GB of activations and 1.5 GB of it exceed 9 GB.
  options.runtime_memory_bytes = 1.5e9;
  try {
    validate_schedule(schedule, options);
    FAIL();
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("1.500 GB its process holds itself"));
  }
  options.memory_limit_bytes = 10e9;
  const ValidationReport report = validate_schedule(schedule, options);
  EXPECT_DOUBLE_EQ(report.memory[0].total_bytes(), report.memory[0].stage_bytes() + 1.5e9);
  EXPECT_DOUBLE_EQ(report.memory[0].stage_bytes(), report.memory[0].peak_bytes + report.memory[0].optimizer_bytes);
  EXPECT_DOUBLE_EQ(report.memory[0].activation_bytes_at_peak, 8e9);
}

}  // namespace
}  // namespace pipetwin
