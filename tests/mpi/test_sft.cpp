// Supervised fine-tuning's masked loss on every layout of the world against one rank: the loss is
// the mean over the trained targets of the global batch, so the first step's loss and every
// gradient, and the losses and weights after a few steps, match one rank with any DP size and any
// number of micro-batches (gradient accumulation), although samples train different numbers of targets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "masked_learnable_source.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

constexpr int kSteps = 3;
constexpr double kTol = 1e-5;

RunConfig sft_config() {
  RunConfig c = test::tiny_config();
  c.task = "sft";
  c.model.arch = "llama";
  c.model.n_layer = 4;   // divisible by every pp up to 4
  c.model.n_kv_head = 2;
  c.model.ffn_hidden_size = 96;
  c.model.vocab_size = 101;
  c.train.global_batch_size = 8;
  c.train.micro_batch_size = 2;
  c.train.min_lr = 1e-3;
  c.train.eps = 1e-5;   // as test_equivalence: keeps rounding-floor gradients from taking full steps
  return c;
}

struct SftRun {
  std::vector<double> losses;
  GatheredParams grads, params;   // gradients of the first step; weights at the end
};

SftRun train(RunConfig cfg, MPI_Comm comm) {
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
  test::MaskedLearnableSource data(cfg.model.seq_len, cfg.model.vocab_size, 5);
  Trainer trainer(cfg, g, *be, data);
  SftRun r;
  for (int s = 0; s < kSteps; ++s) {
    r.losses.push_back(trainer.train_step(s).loss);
    if (s == 0) {
      trainer.sync_parameters();
      r.grads = gather_like_params(trainer.model(), trainer.model().grads(), g);
    }
  }
  trainer.sync_parameters();
  r.params = gather_params(trainer.model(), g);
  return r;
}

TEST(Sft, EveryLayoutMatchesOneRank) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // One rank: four micro-batches of 2, and one of 8 (accumulation changes nothing).
  SftRun ref, whole;
  if (rank == 0) {
    ref = train(sft_config(), MPI_COMM_SELF);
    RunConfig c = sft_config();
    c.train.micro_batch_size = 8;
    whole = train(c, MPI_COMM_SELF);
    std::string t;
    EXPECT_LE(std::fabs(whole.losses[0] - ref.losses[0]) / ref.losses[0], kTol);
    EXPECT_LE(test::worst_tensor(whole.grads, ref.grads, t), kTol) << t;
  }
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2) {
      RunConfig cfg = sft_config();
      cfg.parallel.tp = tp;
      cfg.parallel.pp = pp;
      cfg.parallel.dp = world / (tp * pp);
      if (cfg.parallel.dp * cfg.train.micro_batch_size > cfg.train.global_batch_size) continue;
      const std::string name = str("dp", cfg.parallel.dp, " tp", tp, " pp", pp);
      SCOPED_TRACE(name);
      const SftRun got = train(cfg, MPI_COMM_WORLD);
      if (rank != 0) continue;
      double loss_err = 0;
      for (int s = 0; s < kSteps; ++s)
        loss_err = std::max(loss_err, std::fabs(got.losses[s] - ref.losses[s]) / ref.losses[s]);
      std::string gt, wt;
      const double grad_err = test::worst_tensor(got.grads, ref.grads, gt);
      const double weight_err = test::worst_tensor(got.params, ref.params, wt);
      EXPECT_LE(loss_err, kTol);
      EXPECT_LE(grad_err, kTol) << gt;
      EXPECT_LE(weight_err, kTol) << wt;
      std::printf("  sft %-14s loss rel err %.2e  first-step gradient rel err %.2e (%s)  weights %.2e (%s)\n",
                  name.c_str(), loss_err, grad_err, gt.c_str(), weight_err, wt.c_str());
    }
}

}  // namespace
}  // namespace trident
