// A reward model (task reward: score head, pairwise Bradley-Terry loss) on every layout of the world
// against one rank: the loss is the mean over the scored pairs of the global batch, so the first
// step's loss, accuracy, margin and every gradient, and the losses and weights after a few steps,
// match one rank with any DP size, number of micro-batches, TP (the score computed alike on each
// TP rank), pipeline stages and ZeRO-1; for Llama (untied) and GPT-2 (its tied embedding is the
// first stage's alone: no LM head).
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

RunConfig reward_config(const std::string& arch) { return test::finetune_config("reward", arch); }

struct RewardRun {
  std::vector<StepStats> steps;
  GatheredParams grads, params;   // gradients of the first step; weights at the end
};

RewardRun train(RunConfig cfg, MPI_Comm comm) {
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
  // Pairs are samples (2i, 2i + 1); every seventh sample trains no target, so some pairs are not
  // scored and the mean is over a count that differs between micro-batches and ranks.
  test::MaskedLearnableSource data(cfg.model.seq_len, cfg.model.vocab_size, 5);
  Trainer trainer(cfg, g, *be, data);
  RewardRun r;
  for (int s = 0; s < kSteps; ++s) {
    r.steps.push_back(trainer.train_step(s));
    // Under ZeRO-2 the stage holds no whole gradient to gather (the weights check it).
    if (s == 0 && cfg.parallel.zero < 2) {
      trainer.sync_parameters();
      r.grads = gather_like_params(trainer.model(), trainer.model().grads(), g);
    }
  }
  trainer.sync_parameters();
  r.params = gather_params(trainer.model(), g);
  return r;
}

double l2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// The relative L2 error of each tensor; absolute where the reference is zero: the final norm's
// bias shifts both scores of a pair alike, so its exact gradient is 0, and layouts differ from it
// (and hence in that bias) by rounding only.
double worst(const GatheredParams& got, const GatheredParams& want, std::string& which) {
  EXPECT_EQ(got.tensors.size(), want.tensors.size());
  double e = 0;
  for (const auto& [name, w] : want.tensors) {
    std::vector<float> diff = got.tensors.at(name);
    for (size_t i = 0; i < diff.size(); ++i) diff[i] -= w[i];
    const double d = l2(w) < 1e-6 ? l2(diff) : test::rel_l2(got.tensors.at(name), w);
    if (d > e) e = d, which = name;
  }
  return e;
}

// Relative, or absolute for values below 1 (a margin near 0 at the start).
double rel(double got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1.0); }

void every_layout_matches_one_rank(const std::string& arch) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  RewardRun ref;
  if (rank == 0) {
    ref = train(reward_config(arch), MPI_COMM_SELF);
    EXPECT_EQ(ref.grads.tensors.count("score.weight"), 1u);
    EXPECT_EQ(ref.grads.tensors.count("lm_head"), 0u);
    EXPECT_TRUE(std::isfinite(ref.steps[0].accuracy) && std::isfinite(ref.steps[0].margin));
    // One micro-batch of 8 (accumulation changes nothing).
    RunConfig c = reward_config(arch);
    c.train.micro_batch_size = 8;
    const RewardRun whole = train(c, MPI_COMM_SELF);
    std::string t;
    EXPECT_LE(rel(whole.steps[0].loss, ref.steps[0].loss), kTol);
    EXPECT_LE(worst(whole.grads, ref.grads, t), kTol) << t;
  }
  struct Variant {
    const char* name;
    void (*apply)(RunConfig&);
  };
  const Variant variants[] = {
      {"", [](RunConfig&) {}},
      {" zero1", [](RunConfig& c) { c.parallel.zero = 1; }},
      {" zero2", [](RunConfig& c) { c.parallel.zero = 2; }},
      {" sp", [](RunConfig& c) { c.parallel.sequence_parallel = true; }},
      {" overlap", [](RunConfig& c) { c.parallel.tp_overlap = true; }},
      {" gpipe", [](RunConfig& c) { c.parallel.schedule = "gpipe"; }},
      {" zero_bubble", [](RunConfig& c) { c.parallel.schedule = "zero_bubble"; }},
  };
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2)
      for (const Variant& v : variants) {
        RunConfig cfg = reward_config(arch);
        cfg.parallel.tp = tp;
        cfg.parallel.pp = pp;
        cfg.parallel.dp = world / (tp * pp);
        v.apply(cfg);
        if (cfg.parallel.dp * cfg.train.micro_batch_size > cfg.train.global_batch_size) continue;
        if ((cfg.parallel.sequence_parallel || cfg.parallel.tp_overlap) && tp == 1) continue;
        if (cfg.parallel.zero >= 1 && cfg.parallel.dp == 1) continue;
        if (cfg.parallel.schedule != "1f1b" && pp == 1) continue;
        const int micro_per_rank = cfg.train.global_batch_size / (cfg.train.micro_batch_size * cfg.parallel.dp);
        if (cfg.parallel.schedule == "zero_bubble" && micro_per_rank < pp) continue;
        const std::string name = str(arch, " dp", cfg.parallel.dp, " tp", tp, " pp", pp, v.name);
        SCOPED_TRACE(name);
        const RewardRun got = train(cfg, MPI_COMM_WORLD);
        if (rank != 0) continue;
        double loss_err = 0, metric_err = 0;
        for (int s = 0; s < kSteps; ++s) {
          loss_err = std::max(loss_err, rel(got.steps[s].loss, ref.steps[s].loss));
          metric_err = std::max({metric_err, std::fabs(got.steps[s].accuracy - ref.steps[s].accuracy),
                                 rel(got.steps[s].margin, ref.steps[s].margin)});
        }
        std::string gt, wt;
        // Under ZeRO-1/2 each DP rank holds only its reduced shard of the gradients: the weights
        // after the steps check them.
        const double grad_err = cfg.parallel.zero ? 0.0 : worst(got.grads, ref.grads, gt),
                     weight_err = worst(got.params, ref.params, wt);
        EXPECT_LE(loss_err, kTol);
        EXPECT_LE(metric_err, kTol);
        EXPECT_LE(grad_err, kTol) << gt;
        EXPECT_LE(weight_err, kTol) << wt;
        std::printf("  reward %-26s loss %.2e  accuracy/margin %.2e  first-step gradient %.2e (%s)  weights %.2e (%s)\n",
                    name.c_str(), loss_err, metric_err, grad_err, gt.c_str(), weight_err, wt.c_str());
      }
}

TEST(Reward, LlamaEveryLayoutMatchesOneRank) { every_layout_matches_one_rank("llama"); }
TEST(Reward, Gpt2EveryLayoutMatchesOneRank) { every_layout_matches_one_rank("gpt2"); }

}  // namespace
}  // namespace trident
