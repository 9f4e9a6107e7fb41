// ParamLayout, GradSync and Optimizer on their own, on CPU ranks: the layout's sizes and offsets
// against the model's formulas, the data-parallel gradient sums against the sums of the ranks'
// known gradients, one AdamW step against a hand computation, and ZeRO-3's parameter memory by the
// backend's allocation accounting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/model/layout.hpp"
#include "trident/train/grad_sync.hpp"
#include "trident/train/optimizer.hpp"
#include "trident/train/planner.hpp"
#include "trident/train/sharded_params.hpp"
#include "trident/train/trainer.hpp"
#include "trident/train/zero_shards.hpp"

namespace trident {
namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<float> to_host(Backend& be, TensorView v) {
  std::vector<float> out(v.numel);
  be.copy_to_host(out.data(), v);
  return out;
}

// ---------------------------------------------------------------- ParamLayout

// One stage, one TP rank: every tensor of GPT-2 once, 12C^2 + 13C per block, aligned offsets in
// unit order, and buckets tiling the buffer.
TEST(ParamLayout, SizesAndOffsetsOfOneRank) {
  const ModelConfig m = test::tiny_config().model;   // L 2, C 64, V 100, T 16
  const int64_t C = m.n_embd, L = m.n_layer, V = m.padded_vocab(1), T = m.positions();
  const ParamLayout layout(m, StageInfo::of(m, 0, 1), 1, 0, 1, 4096);
  EXPECT_EQ(V, 128);   // padded to a multiple of 128
  size_t elements = 0;
  for (const ParamInfo& p : layout.params()) elements += p.numel;
  EXPECT_EQ(elements, static_cast<size_t>(L * (12 * C * C + 13 * C) + V * C + T * C + 2 * C));
  EXPECT_EQ(layout.get("blocks.1.attn.qkv.weight").numel, static_cast<size_t>(3 * C * C));
  EXPECT_EQ(layout.get("blocks.0.mlp.fc.weight").local_shape(), (std::vector<int64_t>{4 * C, C}));
  EXPECT_EQ(layout.get("wte").local_shape(), (std::vector<int64_t>{V, C}));
  EXPECT_EQ(layout.n_units(), 1 + 2 + 1 + 1);   // head, two blocks, wpe, tied wte

  size_t end = 0;
  int unit = 0;
  for (const ParamInfo& p : layout.params()) {
    EXPECT_EQ(p.offset % ParamLayout::kAlign, 0u) << p.name;
    EXPECT_GE(p.offset, end) << p.name << " overlaps the tensor before it";
    EXPECT_GE(p.unit, unit) << p.name << ": offsets must follow the units' completion order";
    end = p.offset + p.numel;
    unit = p.unit;
  }
  EXPECT_LE(end, layout.total());
  size_t next = 0;
  for (const Bucket& bk : layout.buckets()) {
    EXPECT_EQ(bk.offset, next);
    EXPECT_EQ(bk.size % ParamLayout::kAlign, 0u);
    next = bk.offset + bk.size;
  }
  EXPECT_EQ(next, layout.total());
  // The tied embedding is alone in the last bucket.
  const Bucket& last = layout.buckets().back();
  EXPECT_EQ(last.unit_begin, layout.tied_unit());
  EXPECT_EQ(last.unit_end, layout.tied_unit() + 1);
}

// TP 2, two pipeline stages: each rank holds half of every split tensor, the stages split the
// layers, and only the first stage counts the tied embedding in the norm.
TEST(ParamLayout, ShardsOfTensorAndPipelineParallelism) {
  ModelConfig m = test::tiny_config().model;
  m.n_layer = 4;
  const int64_t C = m.n_embd;
  const StageInfo first = StageInfo::of(m, 0, 2), last = StageInfo::of(m, 1, 2);
  EXPECT_EQ(first.layer_begin, 0);
  EXPECT_EQ(first.layer_end, 2);
  EXPECT_EQ(last.layer_begin, 2);
  EXPECT_EQ(last.layer_end, 4);
  const ParamLayout a(m, first, 2, 1, 2, 1 << 20), b(m, last, 2, 0, 2, 1 << 20);
  const ParamInfo& qkv = a.get("blocks.1.attn.qkv.weight");
  EXPECT_EQ(qkv.numel, static_cast<size_t>(3 * C * C / 2));
  EXPECT_EQ(qkv.split_begin, m.n_head / 2);
  EXPECT_EQ(a.get("blocks.0.ln1.weight").numel, static_cast<size_t>(C));
  EXPECT_FALSE(a.get("blocks.0.ln1.weight").count_in_norm);   // a TP replica on tp rank 1
  EXPECT_EQ(a.find("blocks.2.ln1.weight"), nullptr);
  EXPECT_EQ(a.find("lnf.weight"), nullptr);
  EXPECT_NE(b.find("lnf.weight"), nullptr);
  EXPECT_EQ(b.find("wpe"), nullptr);
  EXPECT_EQ(a.get("wte").numel, static_cast<size_t>(m.padded_vocab(2) / 2 * C));
  EXPECT_TRUE(a.get("wte").count_in_norm);
  EXPECT_FALSE(b.get("wte").count_in_norm);
  for (const Bucket& bk : a.buckets()) EXPECT_EQ(bk.size % (2 * ParamLayout::kAlign), 0u);   // dp 2 shards
}

// Interleaved, pp 2 with two chunks of two layers: rank 1 holds layers 2, 3 (virtual stage 1) and
// 6, 7 (virtual stage 3, with the head); its blocks complete from layer 7 down to 2, and a bucket
// closes where a chunk ends even when it could hold more, so that ZeRO-2 finishes every bucket
// within one chunk's backward.
TEST(ParamLayout, ChunksOfAnInterleavedStage) {
  ModelConfig m = test::tiny_config().model;
  m.n_layer = 8;
  const StageInfo first = StageInfo::of(m, 0, 2, 2), last = StageInfo::of(m, 1, 2, 2);
  EXPECT_EQ(first.n_layers(), 4);
  EXPECT_EQ(first.layer(2), 4);
  EXPECT_EQ(last.layer(0), 2);
  EXPECT_EQ(last.layer(3), 7);
  const StageInfo c1 = first.chunk(1), top = last.chunk(1);
  EXPECT_EQ(c1.stage, 2);
  EXPECT_EQ(c1.n_stages, 4);
  EXPECT_EQ(c1.layer_begin, 4);
  EXPECT_EQ(c1.layer_end, 6);
  EXPECT_TRUE(first.chunk(0).first());
  EXPECT_FALSE(c1.first() || c1.last());
  EXPECT_FALSE(last.chunk(0).last());
  EXPECT_TRUE(top.last());
  const ParamLayout a(m, first, 1, 0, 1, size_t{1} << 30), b(m, last, 1, 0, 1, size_t{1} << 30);
  EXPECT_NE(a.find("blocks.5.ln1.weight"), nullptr);
  EXPECT_EQ(a.find("blocks.2.ln1.weight"), nullptr);
  EXPECT_EQ(b.block_unit(7), b.head_unit() + 1);
  EXPECT_EQ(b.block_unit(6), b.head_unit() + 2);
  EXPECT_EQ(b.block_unit(3), b.head_unit() + 3);
  EXPECT_EQ(b.block_unit(2), b.head_unit() + 4);
  EXPECT_EQ(b.first_forward_unit(), b.block_unit(2));
  EXPECT_EQ(a.first_forward_unit(), a.tied_unit());
  EXPECT_EQ(b.bucket_of_unit(b.block_unit(7)), b.bucket_of_unit(b.head_unit()));
  EXPECT_EQ(b.bucket_of_unit(b.block_unit(3)), b.bucket_of_unit(b.block_unit(2)));
  EXPECT_NE(b.bucket_of_unit(b.block_unit(6)), b.bucket_of_unit(b.block_unit(3)));
  EXPECT_NE(a.bucket_of_unit(a.block_unit(4)), a.bucket_of_unit(a.block_unit(1)));
}

// ---------------------------------------------------------------- GradSync

// Every DP rank's gradient element i is (rank + 1) * (i % 97 + 1); after finish() the reduced
// elements hold the sum over ranks: all of them, or with ZeRO-1 this rank's slice of each bucket.
void check_grad_sync(bool zero) {
  const int dp = world_size();
  RunConfig cfg = test::tiny_config();
  cfg.train.global_batch_size = cfg.train.micro_batch_size * dp;
  cfg.parallel.zero = zero;
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const ParamLayout layout(cfg.model, StageInfo::of(cfg.model, 0, 1), 1, 0, dp, 2048);
  ASSERT_GT(layout.buckets().size(), 2u);   // several buckets, so their order matters
  std::vector<float> mine(layout.total());
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>((g.coord.dp + 1) * (i % 97 + 1));
  Buffer grads(*be, mine.size() * sizeof(float));
  be->copy_from_host(grads.view(DType::F32), mine.data());
  ZeroShards shards(layout, g, *be, zero);
  GradSync sync(layout, grads.view(DType::F32), g, *be, shards);
  for (int u = 0; u < layout.n_units(); ++u) sync.unit_done(u);
  sync.finish();
  const std::vector<float> got = to_host(*be, grads.view(DType::F32));
  const double rank_sum = dp * (dp + 1) / 2.0;
  for (const Bucket& bk : layout.buckets()) {
    auto [begin, end] = zero ? ZeroShards::dp_slice(bk, dp, g.coord.dp) : std::make_pair(bk.offset, bk.offset + bk.size);
    for (size_t i = begin; i < end; ++i)
      ASSERT_EQ(got[i], static_cast<float>(rank_sum * (i % 97 + 1))) << "element " << i;
  }
}

TEST(GradSync, AllReduceSumsEveryBucket) { check_grad_sync(false); }
TEST(GradSync, ReduceScatterSumsEachRanksSlice) { check_grad_sync(true); }

// ZeRO-2: over three micro-batches each unit's gradients, (rank + 1) * (i % 97 + 1) per micro-batch,
// are added into the staging as the backward would (begin_unit, +=, end_unit; the GradSync
// announcements on the last micro-batch); after finish() this rank's gradient shard holds three
// times the sum over ranks of its slice of every bucket (the staged ones reduced per micro-batch,
// through three reused buffers, the others once), and zeros where no parameter lies.
TEST(GradSync, Zero2StagingSumsEachRanksSliceOverMicroBatches) {
  const int dp = world_size();
  if (dp == 1) GTEST_SKIP() << "ZeRO-2 stages gradients only with dp > 1";
  RunConfig cfg = test::tiny_config();
  cfg.model.n_layer = 8;   // a bucket per block
  cfg.train.global_batch_size = cfg.train.micro_batch_size * dp;
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const ParamLayout layout(cfg.model, StageInfo::of(cfg.model, 0, 1), 1, 0, dp, 2048);
  ZeroShards shards(layout, g, *be, 2);
  ASSERT_TRUE(shards.staged());
  int staged_buckets = 0;
  for (size_t b = 0; b < layout.buckets().size(); ++b) staged_buckets += shards.per_micro_bucket(static_cast<int>(b));
  ASSERT_GT(staged_buckets, 3) << "more staged buckets than buffers, so the buffers are reused";
  GradSync sync(layout, TensorView(), g, *be, shards);
  shards.zero_grads();
  std::vector<float> mine(layout.total());
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>((g.coord.dp + 1) * (i % 97 + 1));
  Buffer part(*be, layout.total() * sizeof(float));
  const int micro_batches = 3;
  for (int micro = 0; micro < micro_batches; ++micro)
    for (int u = 0; u < layout.n_units(); ++u) {
      shards.begin_unit(u);
      for (const ParamInfo& p : layout.params()) {
        if (p.unit != u) continue;
        TensorView src = part.view(DType::F32).slice(0, p.numel);
        be->copy_from_host(src, mine.data() + p.offset);
        be->accumulate(shards.grad_view(p.offset, p.numel), src);
      }
      shards.end_unit(u);
      if (micro == micro_batches - 1) sync.unit_done(u);
    }
  sync.finish();
  const std::vector<float> got = to_host(*be, shards.grad_shard());
  std::vector<char> in_param(layout.total(), 0);
  for (const ParamInfo& p : layout.params()) std::fill(in_param.begin() + p.offset, in_param.begin() + p.offset + p.numel, 1);
  const double rank_sum = dp * (dp + 1) / 2.0;
  for (size_t b = 0; b < layout.buckets().size(); ++b) {
    auto [begin, end] = ZeroShards::dp_slice(layout.buckets()[b], dp, g.coord.dp);
    for (size_t i = begin; i < end; ++i)
      ASSERT_EQ(got[shards.shard_offset(static_cast<int>(b)) + i - begin],
                in_param[i] ? static_cast<float>(micro_batches * rank_sum * (i % 97 + 1)) : 0.0f)
          << "element " << i << " of bucket " << b;
  }
}

// ---------------------------------------------------------------- Optimizer

// One AdamW step (t = 1, no clipping) on one rank against the update written out by hand:
// m = (1-b1) g, v = (1-b2) g^2, w = w (1 - lr wd) - lr m/(1-b1) / (sqrt(v/(1-b2)) + eps), with
// weight decay on the matrices only; padding between tensors stays untouched.
TEST(Optimizer, AdamWStepMatchesAHandComputation) {
  if (world_size() != 1) GTEST_SKIP() << "one rank";
  RunConfig cfg = test::tiny_config();
  cfg.train.weight_decay = 0.1;
  ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
  std::unique_ptr<Backend> be = make_cpu_backend();
  const ParamLayout layout(cfg.model, StageInfo::of(cfg.model, 0, 1), 1, 0, 1, 4096);
  const std::vector<float> w0 = test::random_vector(layout.total(), 11), grad = test::random_vector(layout.total(), 12);
  Buffer params(*be, w0.size() * sizeof(float)), grads(*be, w0.size() * sizeof(float));
  be->copy_from_host(params.view(DType::F32), w0.data());
  be->copy_from_host(grads.view(DType::F32), grad.data());
  ZeroShards shards(layout, g, *be, 0);
  Optimizer opt(layout, params.view(DType::F32), grads.view(DType::F32), g, *be, cfg.train, shards);
  opt.init_master();
  const double lr = 1e-2;
  opt.step(lr, TensorView(), 0.0, 1);
  const std::vector<float> got = to_host(*be, params.view(DType::F32));

  const TrainConfig& t = cfg.train;
  std::vector<float> want = w0;
  for (const ParamInfo& p : layout.params()) {
    const double decay = p.decay ? t.weight_decay : 0.0;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
      const double gi = grad[i], m = (1 - t.beta1) * gi, v = (1 - t.beta2) * gi * gi;
      const double update = (m / (1 - t.beta1)) / (std::sqrt(v / (1 - t.beta2)) + t.eps);
      want[i] = static_cast<float>(w0[i] * (1 - lr * decay) - lr * update);
    }
  }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "element " << i;
  EXPECT_NE(got, w0);
}

// ---------------------------------------------------------------- ShardedParams

// ZeRO-3 on dp 2, by the backend's own accounting (peak_bytes after construction and a step): a
// rank allocates exactly ZeRO-2's memory less its whole compute-dtype parameters, plus only the
// buffers its buckets are gathered into (two reused ones of a block's bucket, the head's bucket,
// which also holds the last block, and the embeddings'), so that its parameters take its half (the
// shards both stages keep) and those buffers: 0.70 of what a ZeRO-2 rank's whole parameters take
// here (16 blocks), which would be 1.5 if they were not sharded. The planner counts the same bytes.
TEST(ShardedParams, Zero3RankHoldsItsShardOfTheParameters) {
  if (world_size() != 2) GTEST_SKIP() << "two ranks (dp 2)";
  RunConfig cfg = test::tiny_config();
  cfg.model.n_layer = 16;
  cfg.parallel.bucket_mb = 0.01;   // a bucket per block
  auto peak_after_a_step = [&](int zero) {
    cfg.parallel.zero = zero;
    ParallelGroups g = test::mpi_groups(cfg, MPI_COMM_WORLD);
    std::unique_ptr<Backend> be = make_cpu_backend();
    RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, 5);
    Trainer trainer(cfg, g, *be, data);
    trainer.train_step(0);
    return be->peak_bytes();
  };
  const size_t zero2 = peak_after_a_step(2), zero3 = peak_after_a_step(3);
  const ParamLayout layout(cfg.model, StageInfo::of(cfg.model, 0, 1), 1, 0, 2, bucket_elements(cfg.parallel));
  const size_t elem = dtype_size(make_cpu_backend()->compute_dtype());
  const size_t whole = layout.total() * elem, shard = whole / 2;
  const size_t gathered = ShardedParams::gathered_elements(layout) * elem;
  EXPECT_EQ(zero2 - zero3, whole - gathered) << "ZeRO-3 should allocate no whole parameters";
  const double zero3_params = static_cast<double>(shard + gathered) / whole;
  EXPECT_LT(zero3_params, 0.75);
  std::printf("  dp2, 16 blocks: peak %zu B under ZeRO-2, %zu B under ZeRO-3; ZeRO-3's parameters (shard and gather "
              "buffers) %.2f of the whole parameters\n",
              zero2, zero3, zero3_params);
  Hardware hw;
  hw.act_bytes = static_cast<int>(elem);
  cfg.parallel.dp = 2;
  cfg.parallel.zero = 2;
  const double planned2 = estimate_memory(cfg, hw).params;
  cfg.parallel.zero = 3;
  EXPECT_DOUBLE_EQ(planned2 - estimate_memory(cfg, hw).params, static_cast<double>(whole - gathered));
}

}  // namespace
}  // namespace trident
