// Random data, error metrics, test configurations and comparisons shared by the test binaries.
#include "test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "trident/config/parse.hpp"
#include "trident/core/rng.hpp"
#include "trident/model/generator.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

namespace trident::test {

std::vector<float> random_vector(size_t n, uint64_t seed, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((2.0 * uniform_at(seed, 7, i) - 1.0) * scale);
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

double worst_tensor(const GatheredParams& got, const GatheredParams& want, std::string& which) {
  double e = 0;
  for (const auto& [name, w] : want.tensors) {
    const double d = rel_l2(got.tensors.at(name), w);
    if (d > e) e = d, which = name;
  }
  return e;
}

RunConfig tiny_config() {
  RunConfig c;
  c.model.n_layer = 2;
  c.model.n_head = 4;
  c.model.n_embd = 64;
  c.model.vocab_size = 100;
  c.model.seq_len = 16;
  c.train.micro_batch_size = 2;
  c.train.global_batch_size = 8;
  c.train.lr = 1e-2;
  c.train.warmup_steps = 2;
  c.parallel.timeout_s = 120;
  return c;
}

RunConfig generation_config(bool llama, int tp, int pp) {
  RunConfig c = tiny_config();
  if (llama) {
    c.model.arch = "llama";
    c.model.n_kv_head = 2;
    c.model.ffn_hidden_size = 64;
  }
  c.model.n_embd = 32;
  c.model.vocab_size = 60;
  c.model.seq_len = 32;
  c.train.micro_batch_size = 1;
  c.train.global_batch_size = 4;
  c.train.warmup_steps = 1;
  c.train.steps = 30;
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.timeout_s = 60;
  return c;
}

std::vector<std::vector<int32_t>> ragged_prompts() {
  std::vector<std::vector<int32_t>> p;
  for (int n = 1; n <= 7; ++n) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < n; ++i) tokens.push_back((11 * n + 7 * i) % 60);
    p.push_back(tokens);
  }
  return p;
}

void expect_same_completions(const std::vector<Completion>& got, const std::vector<Completion>& want,
                             float logprob_tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "prompt " << i;
    EXPECT_EQ(got[i].stopped, want[i].stopped) << "prompt " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t t = 0; t < got[i].logprobs.size(); ++t)
      if (logprob_tol == 0)
        EXPECT_EQ(got[i].logprobs[t], want[i].logprobs[t]) << "prompt " << i << " token " << t;
      else
        EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], logprob_tol) << "prompt " << i << " token " << t;
  }
}

RunConfig finetune_config(const std::string& task, const std::string& arch) {
  RunConfig c = tiny_config();
  c.task = task;
  c.model.arch = arch;
  c.model.n_layer = 4;
  c.model.vocab_size = 101;
  if (arch == "llama") {
    c.model.n_kv_head = 2;
    c.model.ffn_hidden_size = 96;
  }
  c.train.global_batch_size = 8;
  c.train.micro_batch_size = 2;
  c.train.min_lr = 1e-3;
  c.train.eps = 1e-5;
  return c;
}

Topology validated_topology(RunConfig& cfg, MPI_Comm comm) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  validate_run_config(cfg, size);
  return Topology(cfg.parallel.dp, cfg.parallel.tp, cfg.parallel.pp);
}

ParallelGroups mpi_groups(RunConfig& cfg, MPI_Comm comm) {
  Topology topo = validated_topology(cfg, comm);
  return make_mpi_groups(split_axes(comm, topo), topo, cfg.parallel.timeout_s);
}

std::vector<float> initial_params(const RunConfig& cfg, const ParallelGroups& g, Backend& be, uint64_t seed) {
  GptStage m(cfg.model, g, be, cfg.train.micro_batch_size, 1, bucket_elements(cfg.parallel), false, {}, nullptr,
             cfg.parallel.virtual_stages);
  m.init_params(seed);
  TRIDENT_CHECK(m.params().dtype == DType::F32, "initial_params: the backend's parameters are not fp32");
  std::vector<float> out(m.params().numel);
  be.copy_to_host(out.data(), m.params());
  return out;
}

}  // namespace trident::test
