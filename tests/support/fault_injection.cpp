// The fault handler of the trident_test binary (src/apps/main.cpp built with TRIDENT_TEST_HOOKS):
// the e2e tests choose a rank and a step through the environment.
//   TRIDENT_TEST_STALL=RANK:STEP        world rank RANK stops answering at step STEP, so that its
//                                       peers must time out instead of hanging
//   TRIDENT_TEST_DIE_IN_SAVE=RANK:STEP  world rank RANK dies like kill -9 halfway through writing
//                                       the step-STEP checkpoint, which must leave the previous one
//   TRIDENT_TEST_STALL_IN_SAVE=RANK:STEP  world rank RANK stops answering at the same point, so
//                                       that rank 0 must abort the job naming it
//   TRIDENT_TEST_SLOW_STEP_MS=MS        every step of every rank takes MS milliseconds longer, so
//                                       that a stop signal lands in a step longer than mpirun's
//                                       1 s kill timeout
//   TRIDENT_TEST_NAN_GRAD=RANK:STEP[:COUNT]  world rank RANK turns its reduced gradients into NaN
//                                       in COUNT (default 1) updates from update STEP (1-based),
//                                       before the global norm, so that the updates are skipped
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "trident/core/error.hpp"
#include "trident/core/fault_point.hpp"

namespace trident {
namespace {

// Whether the variable `name` holds "RANK:STEP" naming this rank and step.
bool selected(const char* name, int world_rank, int64_t step) {
  const char* v = std::getenv(name);
  int rank = -1;
  long long at = -1;
  return v && std::sscanf(v, "%d:%lld", &rank, &at) == 2 && rank == world_rank && at == step;
}

void stall(const char* hook, int64_t step) {
  std::fprintf(stderr, "%s %s: stalling at step %lld\n", error_context().c_str(), hook, static_cast<long long>(step));
  std::this_thread::sleep_for(std::chrono::hours(24));
}

// Whether TRIDENT_TEST_NAN_GRAD ("RANK:STEP[:COUNT]") spoils this rank's update `step`.
bool spoiled(int world_rank, int64_t step) {
  const char* v = std::getenv("TRIDENT_TEST_NAN_GRAD");
  int rank = -1;
  long long at = -1, count = 1;
  return v && std::sscanf(v, "%d:%lld:%lld", &rank, &at, &count) >= 2 && rank == world_rank && step >= at &&
         step < at + count;
}

bool inject(FaultPoint point, int world_rank, int64_t step) {
  switch (point) {
    case FaultPoint::TrainStep:
      if (selected("TRIDENT_TEST_STALL", world_rank, step)) stall("TRIDENT_TEST_STALL", step);
      if (const char* ms = std::getenv("TRIDENT_TEST_SLOW_STEP_MS"))
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
      break;
    case FaultPoint::CheckpointWrite:
      if (selected("TRIDENT_TEST_DIE_IN_SAVE", world_rank, step)) std::_Exit(9);
      if (selected("TRIDENT_TEST_STALL_IN_SAVE", world_rank, step)) stall("TRIDENT_TEST_STALL_IN_SAVE", step);
      break;
    case FaultPoint::GradientsReduced:
      return spoiled(world_rank, step);
  }
  return false;
}

}  // namespace

void install_test_fault_handler() { set_fault_handler(inject); }

}  // namespace trident
