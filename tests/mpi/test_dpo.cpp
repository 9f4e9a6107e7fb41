// DPO on every layout of the world against one rank: the policy and its frozen reference (another
// initialisation, so that the reference matters) run in the same layout; the loss is the mean pair
// loss of the global batch, so the first step's loss and every gradient, the losses, reward metrics
// and weights after a few steps match one rank with any DP, TP, PP and ZeRO-1 layout (and tp 2 with
// sequence parallelism or tp_overlap) and any number of micro-batches per step; the same for IPO
// on one multi-rank layout.
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
constexpr uint64_t kReferenceSeed = 77;

RunConfig dpo_config() {
  RunConfig c = test::finetune_config("dpo");
  c.dpo.beta = 0.5;
  c.dpo.label_smoothing = 0.1;
  // A tenth of the pre-training tests' rate (DPO trains near its reference): the first steps'
  // Adam updates are ~lr * sign(gradient), and at 1e-2 the gradients' rounding in another layout
  // (~1e-6 relative) flips the sign of enough near-zero elements to move the weights 1.5e-5 apart.
  c.train.lr = 1e-3;
  c.train.min_lr = 1e-4;
  return c;
}

struct DpoRun {
  std::vector<double> losses, accuracy, chosen, rejected;
  GatheredParams grads, params;   // gradients of the first step; weights at the end
};

DpoRun train(RunConfig cfg, MPI_Comm comm) {
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
  test::MaskedLearnableSource data(cfg.model.seq_len, cfg.model.vocab_size, 5);
  Trainer trainer(cfg, g, *be, data);
  trainer.set_reference_weights(test::initial_params(cfg, g, *be, kReferenceSeed));
  DpoRun r;
  for (int s = 0; s < kSteps; ++s) {
    const StepStats st = trainer.train_step(s);
    r.losses.push_back(st.loss);
    r.accuracy.push_back(st.accuracy);
    r.chosen.push_back(st.chosen_reward);
    r.rejected.push_back(st.rejected_reward);
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

// The largest relative difference of the losses.
double loss_error(const DpoRun& got, const DpoRun& want) {
  double e = 0;
  for (int s = 0; s < kSteps; ++s) e = std::max(e, std::fabs(got.losses[s] - want.losses[s]) / want.losses[s]);
  return e;
}

// The largest absolute difference of the mean rewards (beta times differences of sequence NLLs,
// whose rounding shows as an absolute error) and of the reward accuracy.
double reward_error(const DpoRun& got, const DpoRun& want) {
  double e = 0;
  for (int s = 0; s < kSteps; ++s)
    e = std::max({e, std::fabs(got.chosen[s] - want.chosen[s]), std::fabs(got.rejected[s] - want.rejected[s]),
                  std::fabs(got.accuracy[s] - want.accuracy[s])});
  return e;
}

TEST(Dpo, EveryLayoutMatchesOneRank) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  // One rank: four micro-batches of 2 (one pair each), and one of 8 (accumulation changes nothing).
  DpoRun ref, whole;
  if (rank == 0) {
    ref = train(dpo_config(), MPI_COMM_SELF);
    RunConfig c = dpo_config();
    c.train.micro_batch_size = 8;
    whole = train(c, MPI_COMM_SELF);
    std::string t;
    EXPECT_LE(loss_error(whole, ref), kTol);
    EXPECT_LE(reward_error(whole, ref), kTol);
    EXPECT_LE(test::worst_tensor(whole.grads, ref.grads, t), kTol) << t;
    std::printf("  dpo one micro-batch of 8: loss rel err %.2e  reward err %.2e  first-step gradient rel err %.2e\n",
                loss_error(whole, ref), reward_error(whole, ref), test::worst_tensor(whole.grads, ref.grads, t));
    std::printf("  dpo one rank: loss %.5f -> %.5f, reward accuracy %.3f -> %.3f, margin %.4f -> %.4f\n",
                ref.losses.front(), ref.losses.back(), ref.accuracy.front(), ref.accuracy.back(),
                ref.chosen.front() - ref.rejected.front(), ref.chosen.back() - ref.rejected.back());
  }
  // Every tp x pp without ZeRO and with ZeRO-1 and 2, then tp 2's head under sequence parallelism
  // (the final norm's rows gathered) and tp_overlap (the blocks in two halves), and with pp > 1
  // interleaved (two model chunks per rank; the reference model holds the policy's chunks) and
  // zero_bubble (the split backward).
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2)
      for (int variant = 0; variant < 7; ++variant) {
        const int zero = variant == 1 ? 1 : variant == 4 ? 2 : 0;
        const bool sp = variant == 2, overlap = variant == 3, interleaved = variant == 5, zero_bubble = variant == 6;
        RunConfig cfg = dpo_config();
        cfg.parallel.tp = tp;
        cfg.parallel.pp = pp;
        cfg.parallel.dp = world / (tp * pp);
        cfg.parallel.zero = zero;
        cfg.parallel.sequence_parallel = sp;
        cfg.parallel.tp_overlap = overlap;
        if (interleaved) {
          cfg.parallel.schedule = "interleaved";
          cfg.parallel.virtual_stages = 2;
          const int micro_per_rank = cfg.train.global_batch_size / (cfg.train.micro_batch_size * cfg.parallel.dp);
          if (pp == 1 || cfg.model.n_layer % (2 * pp) || micro_per_rank % pp) continue;
        }
        if (zero_bubble) {
          cfg.parallel.schedule = "zero_bubble";
          const int micro_per_rank = cfg.train.global_batch_size / (cfg.train.micro_batch_size * cfg.parallel.dp);
          if (pp == 1 || micro_per_rank < pp) continue;
        }
        if (cfg.parallel.dp * cfg.train.micro_batch_size > cfg.train.global_batch_size) continue;
        if (zero && cfg.parallel.dp == 1) continue;   // ZeRO shards over DP ranks only
        if ((sp || overlap) && (tp != 2 || pp != 1)) continue;
        const std::string name = str("dp", cfg.parallel.dp, " tp", tp, " pp", pp, zero ? str(" zero", zero) : "",
                                     sp ? " sp" : "", overlap ? " tp_overlap" : "", interleaved ? " interleaved" : "",
                                     zero_bubble ? " zero_bubble" : "");
        SCOPED_TRACE(name);
        const DpoRun got = train(cfg, MPI_COMM_WORLD);
        if (rank != 0) continue;
        std::string gt, wt;
        const double loss_err = loss_error(got, ref), reward_err = reward_error(got, ref);
        // ZeRO-1/2 leave each DP rank the reduced gradients of its own shard only.
        const double grad_err = zero ? 0.0 : test::worst_tensor(got.grads, ref.grads, gt);
        const double weight_err = test::worst_tensor(got.params, ref.params, wt);
        EXPECT_LE(loss_err, kTol);
        EXPECT_LE(reward_err, kTol);
        EXPECT_LE(grad_err, kTol) << gt;
        EXPECT_LE(weight_err, kTol) << wt;
        std::printf("  dpo %-18s loss rel err %.2e  reward err %.2e  first-step gradient rel err %.2e (%s)  "
                    "weights %.2e (%s)\n",
                    name.c_str(), loss_err, reward_err, grad_err, gt.c_str(), weight_err, wt.c_str());
      }
}

// IPO (dpo.loss = ipo: its squared loss over per-token log-ratios, whose counts the head takes
// from each sequence's targets) on one rank against tp 2 x pp world/2.
TEST(Dpo, IpoLayoutMatchesOneRank) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  RunConfig cfg = dpo_config();
  cfg.dpo.loss = "ipo";
  cfg.dpo.label_smoothing = 0;
  DpoRun ref;
  if (rank == 0) ref = train(cfg, MPI_COMM_SELF);
  cfg.parallel.tp = 2;
  cfg.parallel.pp = world / 2;
  cfg.parallel.dp = 1;
  const DpoRun got = train(cfg, MPI_COMM_WORLD);
  if (rank != 0) return;
  std::string gt, wt;
  EXPECT_LE(loss_error(got, ref), kTol);
  EXPECT_LE(reward_error(got, ref), kTol);
  EXPECT_LE(test::worst_tensor(got.grads, ref.grads, gt), kTol) << gt;
  EXPECT_LE(test::worst_tensor(got.params, ref.params, wt), kTol) << wt;
  std::printf("  ipo tp2 pp%d: loss %.5f -> %.5f, loss rel err %.2e  reward err %.2e  first-step gradient rel err "
              "%.2e (%s)  weights %.2e (%s)\n",
              world / 2, ref.losses.front(), ref.losses.back(), loss_error(got, ref), reward_error(got, ref),
              test::worst_tensor(got.grads, ref.grads, gt), gt.c_str(), test::worst_tensor(got.params, ref.params, wt),
              wt.c_str());
}

}  // namespace
}  // namespace trident
