// Generation: decoding with the KV cache reproduces a full forward pass (bit for bit on the CPU
// backend), greedy output is deterministic, a batch of prompts of different lengths generates
// bit for bit what each prompt alone does (greedy and sampled, device and host sampling), the
// log-probabilities are the full forward's, stop tokens end a sequence, and tp = 2 and dp = 2
// generate what one rank does; for GPT-2 and for a Llama (RoPE at each sequence's positions, a
// cache of the 2 key/value heads only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "learnable_source.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/core/rng.hpp"
#include "trident/config/parse.hpp"
#include "trident/model/generator.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

struct Model {
  RunConfig cfg;
  ParallelGroups g;
  std::unique_ptr<Backend> be = make_cpu_backend();
  test::LearnableSource data{32, 60, 3};
  std::unique_ptr<Trainer> trainer;
  // Trained for a few steps on learnable sequences, so greedy decoding has something to follow.
  Model(RunConfig c, MPI_Comm comm) : cfg(std::move(c)), g(test::mpi_groups(cfg, comm)) {
    trainer = std::make_unique<Trainer>(cfg, g, *be, data);
    for (int s = 0; s < cfg.train.steps; ++s) trainer->train_step(s);
    trainer->sync_parameters();
  }
};

std::vector<int32_t> greedy(GptStage& model, std::vector<int32_t> prompt, int n, std::vector<std::vector<float>>* logits) {
  Generator gen(model, 1, static_cast<int>(prompt.size()) + n);
  gen.feed({0}, {prompt});
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = gen.logits();
    if (logits) logits->push_back(l);
    out.push_back(sample_token(l, SamplingParams{0.0, 0, 1.0}, 1, 0, gen.length(0)).token);
    if (i + 1 < n) gen.feed({0}, {{out.back()}});
  }
  return out;
}

GenerationParams params(double temperature, int top_k = 0) {
  GenerationParams p;
  p.sampling = SamplingParams{temperature, top_k, 1.0};
  p.max_new_tokens = 12;
  p.seed = 42;
  return p;
}

// Each prompt alone in a generator of one slot, keyed as prompt i.
std::vector<Completion> one_at_a_time(GptStage& model, const std::vector<std::vector<int32_t>>& ps,
                                      const GenerationParams& p) {
  std::vector<Completion> out;
  for (size_t i = 0; i < ps.size(); ++i) {
    Generator gen(model, 1, 24);
    out.push_back(gen.generate({ps[i]}, p, i)[0]);
  }
  return out;
}

class Generation : public ::testing::TestWithParam<bool> {};   // llama or gpt2

TEST_P(Generation, KvCacheReproducesTheFullForwardBitForBit) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
  GptStage& model = m.trainer->model();
  const std::vector<int32_t> prompt = {7, 38, 11};
  std::vector<std::vector<float>> cached;
  std::vector<int32_t> out = greedy(model, prompt, 20, &cached);

  // Recompute: the whole sequence so far through forward_logits (positions after it are padding,
  // invisible to earlier positions under the causal mask).
  std::vector<int32_t> seq = prompt;
  const int T = m.cfg.model.seq_len, V = m.cfg.model.vocab_size;
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<int32_t> tokens(T, 0);
    std::copy(seq.begin(), seq.end(), tokens.begin());
    model.set_tokens(0, tokens.data(), tokens.data());
    std::vector<float> full = model.forward_logits(0);
    std::vector<float> row(full.begin() + (seq.size() - 1) * V, full.begin() + seq.size() * V);
    ASSERT_EQ(row, cached[i]) << "step " << i;
    seq.push_back(out[i]);
  }
  // The model learned x -> 5x + 3 (mod 60): greedy decoding follows it.
  int follows = 0;
  for (size_t i = 1; i < out.size(); ++i) follows += out[i] == (5 * out[i - 1] + 3) % 60;
  EXPECT_GE(follows, 15) << "greedy output does not follow the learned pattern";
  EXPECT_EQ(greedy(model, prompt, 20, nullptr), out) << "greedy decoding is not deterministic";
}

TEST_P(Generation, BatchedGeneratesWhatEachPromptDoesAloneBitForBit) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
  GptStage& model = m.trainer->model();
  // Greedy, temperature sampling on the device, top-k sampling on the host.
  for (const GenerationParams& p : {params(0.0), params(0.9), params(1.2, 5)}) {
    SCOPED_TRACE(str("temperature ", p.sampling.temperature, " top_k ", p.sampling.top_k));
    const std::vector<Completion> alone = one_at_a_time(model, test::ragged_prompts(), p);
    Generator gen(model, 3, 24);
    test::expect_same_completions(gen.generate(test::ragged_prompts(), p), alone, 0);
    Generator wide(model, 16, 24);   // every prompt at once
    test::expect_same_completions(wide.generate(test::ragged_prompts(), p), alone, 0);
    Generator roomy(model, 3, 24, 100);   // more tokens per step than slots + max_len
    test::expect_same_completions(roomy.generate(test::ragged_prompts(), p), alone, 0);
  }
  // Top-k of the whole vocabulary samples on the host what the device samples.
  Generator gen(model, 4, 24);
  test::expect_same_completions(gen.generate(test::ragged_prompts(), params(0.9, m.cfg.model.vocab_size)),
                                gen.generate(test::ragged_prompts(), params(0.9)), 1e-6f);
}

TEST_P(Generation, LogprobsAreTheFullForwardsLogSoftmax) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
  GptStage& model = m.trainer->model();
  Generator gen(model, 4, 24);
  const std::vector<std::vector<int32_t>> ps = test::ragged_prompts();
  const std::vector<Completion> out = gen.generate(ps, params(1.0));
  const int T = m.cfg.model.seq_len, V = m.cfg.model.vocab_size;
  double worst = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    std::vector<int32_t> tokens(T, 0);
    std::copy(ps[i].begin(), ps[i].end(), tokens.begin());
    std::copy(out[i].tokens.begin(), out[i].tokens.end(), tokens.begin() + ps[i].size());
    model.set_tokens(0, tokens.data(), tokens.data());
    const std::vector<float> full = model.forward_logits(0);
    for (size_t t = 0; t < out[i].tokens.size(); ++t) {
      const float* row = full.data() + (ps[i].size() - 1 + t) * V;
      double mx = *std::max_element(row, row + V), s = 0;
      for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
      const double want = row[out[i].tokens[t]] - mx - std::log(s);
      worst = std::max(worst, std::abs(want - out[i].logprobs[t]));
    }
  }
  EXPECT_LE(worst, 1e-5);
}

// A vocabulary limit (a tokenizer smaller than the model's vocabulary) keeps every sampled id below
// it, on the device as on the host (top-k of all ids), each the same draw.
TEST_P(Generation, VocabLimitSamplesOnlyIdsBelowIt) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
  Generator gen(m.trainer->model(), 4, 24);
  const int limit = 40;
  GenerationParams device = params(1.5), host = params(1.5, limit);
  device.sampling.vocab_limit = host.sampling.vocab_limit = limit;
  const std::vector<Completion> got = gen.generate(test::ragged_prompts(), device);
  test::expect_same_completions(gen.generate(test::ragged_prompts(), host), got, 1e-6f);
  int below = 0, all = 0;
  for (const Completion& c : got)
    for (int32_t t : c.tokens) below += t < limit, ++all;
  EXPECT_EQ(below, all);
  // Without the limit the same draws reach past it (the check above could not fail otherwise).
  int past = 0;
  for (const Completion& c : gen.generate(test::ragged_prompts(), params(1.5)))
    for (int32_t t : c.tokens) past += t >= limit;
  EXPECT_GT(past, 0);
}

TEST_P(Generation, StopTokensEndEachSequenceAtItsFirst) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
  Generator gen(m.trainer->model(), 3, 24);
  GenerationParams p = params(0.9);
  const std::vector<Completion> full = gen.generate(test::ragged_prompts(), p);
  p.stop_tokens = {full[2].tokens[3], full[5].tokens[1]};
  const std::vector<Completion> stopped = gen.generate(test::ragged_prompts(), p);
  int n_stopped = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    auto end = std::find_first_of(full[i].tokens.begin(), full[i].tokens.end(), p.stop_tokens.begin(), p.stop_tokens.end());
    const bool stops = end != full[i].tokens.end();
    n_stopped += stops;
    EXPECT_EQ(stopped[i].stopped, stops) << "prompt " << i;
    EXPECT_EQ(stopped[i].tokens, std::vector<int32_t>(full[i].tokens.begin(), end + (stops ? 1 : 0))) << "prompt " << i;
    EXPECT_EQ(stopped[i].logprobs, std::vector<float>(full[i].logprobs.begin(), full[i].logprobs.begin() + stopped[i].tokens.size()));
  }
  EXPECT_GE(n_stopped, 2);
  EXPECT_EQ(full[0].tokens.size(), 12u);   // max_new_tokens
}

TEST_P(Generation, TensorParallelGeneratesWhatOneRankDoes) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::vector<float>> one_logits, tp_logits;
  std::vector<int32_t> one;
  std::vector<Completion> one_batch;
  if (rank == 0) {
    Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
    one = greedy(m.trainer->model(), {5, 9}, 16, &one_logits);
    one_batch = Generator(m.trainer->model(), 3, 24).generate(test::ragged_prompts(), params(0.9));
  }
  Model m(test::generation_config(GetParam(), 2), MPI_COMM_WORLD);
  std::vector<int32_t> got = greedy(m.trainer->model(), {5, 9}, 16, &tp_logits);
  std::vector<Completion> got_batch =
      Generator(m.trainer->model(), 3, 24).generate(test::ragged_prompts(), params(0.9));
  if (rank != 0) return;
  EXPECT_EQ(got, one);
  for (size_t i = 0; i < one_logits.size(); ++i) EXPECT_LE(test::rel_l2(tp_logits[i], one_logits[i]), 1e-5);
  test::expect_same_completions(got_batch, one_batch, 1e-5f);
}

// Each data-parallel rank generates its share of the prompts, keyed by their global index: the
// union is what one rank generates.
TEST_P(Generation, DataParallelRanksGenerateTheirSharesOfWhatOneRankDoes) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<Completion> one;
  if (rank == 0) {
    Model m(test::generation_config(GetParam(), 1), MPI_COMM_SELF);
    one = Generator(m.trainer->model(), 3, 24).generate(test::ragged_prompts(), params(0.9));
  }
  Model m(test::generation_config(GetParam(), 1), MPI_COMM_WORLD);   // dp = 2
  ASSERT_EQ(m.g.topo.dp(), 2);
  const std::vector<std::vector<int32_t>> all = test::ragged_prompts();
  const auto [first, last] = prompt_share(all.size(), m.g.coord.dp, 2);
  const std::vector<Completion> mine = Generator(m.trainer->model(), 2, 24)
                                           .generate({all.begin() + first, all.begin() + last}, params(0.9), first);
  // Rank 1's completions to rank 0: token counts, then tokens and log-probabilities.
  std::vector<Completion> got = mine;
  if (rank == 1) {
    for (const Completion& c : mine) {
      int n = static_cast<int>(c.tokens.size()), stopped = c.stopped;
      MPI_Send(&n, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
      MPI_Send(&stopped, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
      MPI_Send(c.tokens.data(), n, MPI_INT32_T, 0, 0, MPI_COMM_WORLD);
      MPI_Send(c.logprobs.data(), n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
    }
    return;
  }
  const auto [first1, last1] = prompt_share(all.size(), 1, 2);
  for (size_t i = first1; i < last1; ++i) {
    int n = 0, stopped = 0;
    MPI_Recv(&n, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(&stopped, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Completion c;
    c.stopped = stopped;
    c.tokens.resize(n);
    c.logprobs.resize(n);
    MPI_Recv(c.tokens.data(), n, MPI_INT32_T, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(c.logprobs.data(), n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    got.push_back(c);
  }
  test::expect_same_completions(got, one, 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Arch, Generation, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "llama" : "gpt2"; });

TEST(Sampling, GreedyTopKAndTopPAreConsistent) {
  std::vector<float> logits = {0.1f, 2.0f, 2.0f, -1.0f, 1.5f};
  EXPECT_EQ(sample_token(logits, {0.0, 0, 1.0}, 7, 0, 0).token, 1);     // argmax, ties to the lowest id
  int counts[5] = {};
  for (int pos = 0; pos < 400; ++pos) {
    const int32_t t = sample_token(logits, {1.0, 2, 1.0}, 7, 3, pos).token;   // top-2: ids 1 and 2 only
    EXPECT_TRUE(t == 1 || t == 2);
    EXPECT_EQ(sample_token(logits, {1.0, 0, 0.01}, 7, 3, pos).token, 1);     // top-p tiny: the most likely only
    ++counts[sample_token(logits, {1.0, 0, 1.0}, 7, 3, pos).token];
  }
  // Plain sampling draws from the softmax: id 3 has probability 0.02, ids 1 and 2 0.37 each.
  EXPECT_GT(counts[1], 110);
  EXPECT_GT(counts[2], 110);
  EXPECT_LT(counts[3], 25);
  // A draw is a function of (seed, sequence, position): the same keys, the same token.
  for (int pos = 0; pos < 20; ++pos)
    EXPECT_EQ(sample_token(logits, {0.8, 0, 1.0}, 99, 5, pos).token, sample_token(logits, {0.8, 0, 1.0}, 99, 5, pos).token);
  // The log-probability is log_softmax at temperature 1.
  double s = 0;
  for (float z : logits) s += std::exp(z);
  EXPECT_NEAR(sample_token(logits, {0.0, 0, 1.0}, 7, 0, 0).logprob, 2.0 - std::log(s), 1e-6);
}

// Top-k orders only the k most likely ids (a partial sort): the draw is still the best score among
// exactly the k ids a full sort by (logit descending, id ascending) puts first, ties included.
TEST(Sampling, TopKDrawsAmongTheKFirstOfAFullSort) {
  std::vector<float> logits(200);
  for (int id = 0; id < 200; ++id) logits[id] = static_cast<float>((id * 37) % 10) * 0.25f;   // 10 levels, many ties
  std::vector<int> sorted(logits.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  std::sort(sorted.begin(), sorted.end(),
            [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  for (const int k : {1, 3, 17, 25, 100, 200})
    for (int pos = 0; pos < 40; ++pos) {
      int best = -1;
      float best_score = -INFINITY;
      for (int i = 0; i < k; ++i) {
        const float score = logits[sorted[i]] / 0.7f + gumbel_at(5, 2, pos, sorted[i]);
        if (score > best_score || (score == best_score && sorted[i] < best)) best_score = score, best = sorted[i];
      }
      EXPECT_EQ(sample_token(logits, {0.7, k, 1.0}, 5, 2, pos).token, best) << "k " << k << " position " << pos;
    }
}

// A step's GEMMs run on a few row counts: powers of two up to 64, then multiples of 64, never
// fewer rows than fed and at most twice (or 63 more than) them. Generation's bit-for-bit tests
// above run through these padded rows.
TEST(GenerationRows, PaddedToAFewShapes) {
  std::set<int> shapes;
  for (int n = 1; n <= 4096; ++n) {
    const int p = padded_rows(n);
    EXPECT_GE(p, n);
    EXPECT_TRUE(p < 2 * n || p - n < 64) << n << " rows padded to " << p;
    shapes.insert(p);
  }
  EXPECT_EQ(shapes.size(), 7u + 4096 / 64 - 1);   // 1, 2, ..., 64, then 128, ..., 4096
  EXPECT_EQ(padded_rows(1), 1);
  EXPECT_EQ(padded_rows(33), 64);
  EXPECT_EQ(padded_rows(65), 128);
  EXPECT_EQ(padded_rows(257), 320);
}

// CpuBackend::sample_shard on a vocabulary split in two shards (the second with padding columns),
// combined, draws what sample_token draws from the whole row, with the same log-probability.
TEST(Sampling, ShardsCombinedDrawWhatTheWholeRowDraws) {
  std::unique_ptr<Backend> be = make_cpu_backend();
  const int V = 37, v_local = 20, N = 6;
  std::vector<float> rows(static_cast<size_t>(N) * V);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(3.0 * (uniform_at(5, 6, i) - 0.5));
  rows[2 * V + 30] = rows[2 * V + 4] = 9.0f;   // a tie across the shards: greedy takes id 4
  std::vector<int32_t> keys;
  for (int r = 0; r < N; ++r) keys.insert(keys.end(), {100 + r, 7 * r});
  for (float temperature : {0.0f, 0.7f, 1.0f}) {
    std::vector<float> stats(2 * N * kSampleStats);
    for (int k = 0; k < 2; ++k) {
      std::vector<float> shard(static_cast<size_t>(N) * v_local, 1e9f);   // padding never wins
      const int valid = std::min(v_local, V - k * v_local);
      for (int r = 0; r < N; ++r)
        std::copy_n(rows.begin() + r * V + k * v_local, valid, shard.begin() + r * v_local);
      be->sample_shard(TensorView(stats.data() + k * N * kSampleStats, DType::F32, N * kSampleStats),
                       TensorView(shard.data(), DType::F32, shard.size()), keys.data(), 11, temperature, N, v_local,
                       valid, k * v_local);
    }
    for (int r = 0; r < N; ++r) {
      const std::vector<float> row(rows.begin() + r * V, rows.begin() + (r + 1) * V);
      const SampledToken want = sample_token(row, {temperature, 0, 1.0}, 11, keys[2 * r], keys[2 * r + 1]);
      const SampledToken got = combine_sample_stats(stats.data() + r * kSampleStats, 2, N * kSampleStats);
      EXPECT_EQ(got.token, want.token) << "row " << r << " temperature " << temperature;
      EXPECT_NEAR(got.logprob, want.logprob, 1e-6) << "row " << r << " temperature " << temperature;
    }
  }
}

TEST(Sampling, PromptSharesCoverThePromptsOnce) {
  for (size_t n : {0, 1, 5, 8})
    for (int dp : {1, 2, 3}) {
      size_t next = 0;
      for (int r = 0; r < dp; ++r) {
        const auto [first, last] = prompt_share(n, r, dp);
        EXPECT_EQ(first, next);
        EXPECT_LE(last - first, n / dp + 1);
        next = last;
      }
      EXPECT_EQ(next, n);
    }
}

}  // namespace
}  // namespace trident
