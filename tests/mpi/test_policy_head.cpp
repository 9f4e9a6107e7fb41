// The policy head of tasks grpo and ppo reports the exact entropy of the model's distribution: its
// LossSums' fourth value is the sum over the answer positions of -sum_v p_v log p_v, computed from
// the full-vocabulary logits of the same forward, on one rank and with the vocabulary split over
// tp = 2 (padding columns in the shards), for GPT-2 and a Llama.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/core/rng.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

struct HeadSums {
  double entropy_sum = 0;   // the head's (LossSums[3])
  double want = 0;          // from forward_logits on the host
};

HeadSums policy_head(bool llama, int tp, MPI_Comm comm) {
  RunConfig cfg = test::tiny_config();   // vocabulary 100: padded to 128, so the tp = 2 shards hold padding
  if (llama) {
    cfg.model.arch = "llama";
    cfg.model.n_kv_head = 2;
    cfg.model.ffn_hidden_size = 96;
  }
  cfg.parallel.tp = tp;
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const int B = cfg.train.micro_batch_size, T = cfg.model.seq_len, V = cfg.model.vocab_size;
  const size_t N = static_cast<size_t>(B) * T;
  GptStage model(cfg.model, g, *be, B, 1, bucket_elements(cfg.parallel), false);
  model.init_params(7);
  model.set_policy_loss(PolicyArgs{0.2f, 0.0f, 1.0f});
  std::vector<int32_t> inputs(N), targets(N);
  for (size_t i = 0; i < N; ++i) inputs[i] = static_cast<int32_t>(hash3(3, 1, i) % V);
  for (size_t i = 0; i < N; ++i) targets[i] = inputs[(i + 1) % N];
  // Answer tokens: two of every three positions; the others (coef 0) count nowhere.
  std::vector<float> policy(3 * N, 0.0f);   // old_logp, coef, coef_adv
  for (size_t i = 0; i < N; ++i) {
    policy[i] = -4.5f;
    policy[N + i] = i % 3 == 1 ? 0.0f : 1.0f / N;
    policy[2 * N + i] = 0.5f * policy[N + i];
  }
  Buffer buf(*be, 3 * N * sizeof(float));
  const TensorView p = buf.view(DType::F32);
  be->copy_from_host(p, policy.data());
  model.set_tokens(0, inputs.data(), targets.data());
  model.set_policy_inputs(0, p.slice(0, N), p.slice(N, N), p.slice(2 * N, N), TensorView{});
  model.forward(0, false, 1.0f, UnitDone{});
  float sums[kLossSums];
  be->copy_to_host(sums, model.loss_sums());

  HeadSums out;
  out.entropy_sum = sums[3];
  const std::vector<float> logits = model.forward_logits(0);
  for (size_t i = 0; i < N; ++i) {
    if (policy[N + i] == 0) continue;
    const float* z = logits.data() + i * V;
    const double m = *std::max_element(z, z + V);
    double s = 0, sz = 0;
    for (int v = 0; v < V; ++v) s += std::exp(z[v] - m);
    for (int v = 0; v < V; ++v) sz += std::exp(z[v] - m) / s * (z[v] - m - std::log(s));
    out.want -= sz;
  }
  return out;
}

class PolicyHead : public ::testing::TestWithParam<bool> {};   // llama or gpt2

TEST_P(PolicyHead, EntropyIsTheExactSumOverTheVocabulary) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ASSERT_EQ(world, 2) << "needs 2 ranks";
  if (rank == 0) {
    const HeadSums one = policy_head(GetParam(), 1, MPI_COMM_SELF);
    EXPECT_GT(one.want, 0);
    EXPECT_NEAR(one.entropy_sum, one.want, 1e-5 * one.want) << "tp 1";
  }
  const HeadSums tp2 = policy_head(GetParam(), 2, MPI_COMM_WORLD);
  EXPECT_NEAR(tp2.entropy_sum, tp2.want, 1e-5 * tp2.want) << "tp 2, rank " << rank;
}

INSTANTIATE_TEST_SUITE_P(Arch, PolicyHead, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "llama" : "gpt2"; });

}  // namespace
}  // namespace trident
