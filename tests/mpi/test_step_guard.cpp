// Non-finite steps: a NaN put into one rank's gradients (TRIDENT_TEST_NAN_GRAD) makes the global
// norm NaN on every rank, and the update is skipped everywhere: no parameter, master weight or
// Adam moment changes (also with the optimizer offloaded), the skip is counted, and the next step
// trains on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/core/fault_point.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

// tests/support/fault_injection.cpp: the TRIDENT_TEST_* fault handler.
void install_test_fault_handler();
namespace {

RunConfig config(int zero, bool offload) {
  RunConfig c = test::tiny_config();
  c.parallel.offload_optimizer = offload;
  c.model.n_head = 2;
  c.model.n_embd = 16;
  c.model.vocab_size = 64;
  c.model.seq_len = 8;
  c.train.steps = 5;
  c.train.global_batch_size = 4;
  c.train.warmup_steps = 1;
  c.parallel.zero = zero;
  c.parallel.bucket_mb = 0.001;
  return c;
}

std::vector<char> bytes(Backend& be, TensorView t) {
  std::vector<char> out(t.bytes());
  be.copy_to_host(out.data(), t);
  return out;
}

void nan_update_is_skipped(int zero, bool offload = false) {
  RunConfig cfg = config(zero, offload);
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 3);
  // The last rank spoils its gradients in update 3 (0-based step 2).
  const int last = g.topo.world() - 1;
  setenv("TRIDENT_TEST_NAN_GRAD", str(last, ":3").c_str(), 1);
  install_test_fault_handler();
  struct Restore {
    ~Restore() {
      set_fault_handler(nullptr);
      unsetenv("TRIDENT_TEST_NAN_GRAD");
    }
  } restore;
  Trainer trainer(cfg, g, *be, data);
  for (int s = 0; s < 2; ++s) EXPECT_TRUE(trainer.train_step(s).skipped.empty());
  trainer.sync_parameters();   // ZeRO-1: the last update's parameters are gathered as read
  const std::vector<char> params = bytes(*be, trainer.model().params());
  Optimizer& opt = trainer.optimizer();
  const std::vector<char> master = bytes(*be, opt.master()), m = bytes(*be, opt.exp_avg()), v = bytes(*be, opt.exp_avg_sq());

  const StepStats bad = trainer.train_step(2);
  EXPECT_EQ(bad.step, 3);
  EXPECT_FALSE(std::isfinite(bad.grad_norm));
  EXPECT_NE(bad.skipped.find("non-finite gradient norm"), std::string::npos) << bad.skipped;
  EXPECT_EQ(bad.skipped_steps, 1);
  trainer.sync_parameters();
  EXPECT_EQ(bytes(*be, trainer.model().params()), params) << "a skipped update changed a parameter";
  EXPECT_EQ(bytes(*be, opt.master()), master) << "a skipped update changed the master weights";
  EXPECT_EQ(bytes(*be, opt.exp_avg()), m) << "a skipped update changed Adam's first moment";
  EXPECT_EQ(bytes(*be, opt.exp_avg_sq()), v) << "a skipped update changed Adam's second moment";

  const StepStats next = trainer.train_step(3);
  EXPECT_TRUE(next.skipped.empty()) << next.skipped;
  EXPECT_TRUE(std::isfinite(next.loss) && std::isfinite(next.grad_norm));
  EXPECT_EQ(next.skipped_steps, 1);
  trainer.sync_parameters();
  EXPECT_NE(bytes(*be, trainer.model().params()), params) << "the step after the skipped one did not train";
}

TEST(StepGuard, NanGradientOnOneRankSkipsTheUpdate) { nan_update_is_skipped(0); }
TEST(StepGuard, NanGradientOnOneRankSkipsTheUpdateZero1) { nan_update_is_skipped(1); }
// With the optimizer offloaded the gradients went to the host before the norm was known: the host
// update is skipped all the same.
TEST(StepGuard, NanGradientOnOneRankSkipsTheOffloadedUpdate) {
  nan_update_is_skipped(0, true);
  nan_update_is_skipped(2, true);
}

}  // namespace
}  // namespace trident
