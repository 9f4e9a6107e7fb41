// Supervised fine-tuning's masked loss on every layout of the world against one rank: the loss is
// the mean over the trained targets of the global batch, so the first step's loss and every
// gradient, and the losses and weights after a few steps, match one rank with any DP size and any
// number of micro-batches (gradient accumulation), although samples train different numbers of targets.
// Packed sequences (data.pack): each record's loss and gradients are those of the record alone, and
// every layout matches one rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "masked_learnable_source.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/io/sft_source.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

constexpr int kSteps = 3;
constexpr double kTol = 1e-5;

RunConfig sft_config() {
  return test::finetune_config("sft");
}

struct SftRun {
  std::vector<double> losses;
  GatheredParams grads, params;   // gradients of the first step; weights at the end
};

SftRun train(RunConfig cfg, MPI_Comm comm, BatchSource& data) {
  ParallelGroups g = test::mpi_groups(cfg, comm);
  std::unique_ptr<Backend> be = make_cpu_backend();
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

SftRun train(RunConfig cfg, MPI_Comm comm) {
  test::MaskedLearnableSource data(cfg.model.seq_len, cfg.model.vocab_size, 5);
  return train(cfg, comm, data);
}

// MaskedLearnableSource's samples packed: each sample holds documents of lengths drawn per sample
// (the last one cut by the sequence's end), so every layout reads the same document boundaries.
class PackedLearnableSource : public test::MaskedLearnableSource {
 public:
  PackedLearnableSource(int seq_len, int vocab, uint64_t seed)
      : MaskedLearnableSource(seq_len, vocab, seed), T_(seq_len), seed_(seed) {}
  bool packs_documents() const override { return true; }
  void doc_starts(int64_t first, int count, int32_t* out) override {
    for (int k = 0; k < count; ++k) {
      const uint64_t s = static_cast<uint64_t>(first + k);
      int start = 0;
      for (int t = 0, doc = 0; t < T_; ++t) {
        if (t - start >= 2 + static_cast<int>(hash3(seed_ + 2, s, doc) % 6)) start = t, ++doc;
        out[k * T_ + t] = start;
      }
    }
  }

 private:
  int T_;
  uint64_t seed_;
};

// cfg's run from `data` on the world against ref, one rank's run.
void expect_matches(const RunConfig& cfg, BatchSource& data, const SftRun& ref, const std::string& name) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  SCOPED_TRACE(name);
  const SftRun got = train(cfg, MPI_COMM_WORLD, data);
  if (rank != 0) return;
  double loss_err = 0;
  for (int s = 0; s < kSteps; ++s)
    loss_err = std::max(loss_err, std::fabs(got.losses[s] - ref.losses[s]) / ref.losses[s]);
  std::string gt, wt;
  const double grad_err = test::worst_tensor(got.grads, ref.grads, gt);
  const double weight_err = test::worst_tensor(got.params, ref.params, wt);
  EXPECT_LE(loss_err, kTol);
  EXPECT_LE(grad_err, kTol) << gt;
  EXPECT_LE(weight_err, kTol) << wt;
  std::printf("  %-36s loss rel err %.2e  first-step gradient rel err %.2e (%s)  weights %.2e (%s)\n", name.c_str(),
              loss_err, grad_err, gt.c_str(), weight_err, wt.c_str());
}

// Every dp/tp/pp layout of the world trained from `data` against ref, one rank's run of base.
void expect_layouts_match(const RunConfig& base, BatchSource& data, const SftRun& ref, const std::string& label) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int tp = 1; tp <= world; tp *= 2)
    for (int pp = 1; tp * pp <= world; pp *= 2) {
      RunConfig cfg = base;
      cfg.parallel.tp = tp;
      cfg.parallel.pp = pp;
      cfg.parallel.dp = world / (tp * pp);
      if (cfg.parallel.dp * cfg.train.micro_batch_size > cfg.train.global_batch_size) continue;
      expect_matches(cfg, data, ref, str(label, " dp", cfg.parallel.dp, " tp", tp, " pp", pp));
    }
}

TEST(Sft, EveryLayoutMatchesOneRank) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
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
  test::MaskedLearnableSource data(sft_config().model.seq_len, sft_config().model.vocab_size, 5);
  expect_layouts_match(sft_config(), data, ref, "sft");
}

// Every layout against one rank with packed sequences, Llama (RoPE) and GPT-2 (learned positions):
// the document starts reach every pipeline stage.
TEST(Sft, PackedEveryLayoutMatchesOneRank) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (const char* arch : {"llama", "gpt2"}) {
    RunConfig base = sft_config();
    base.data.pack = true;
    base.model.arch = arch;
    base.model.n_layer = world;   // divisible by every pp of the world, and no more blocks than that needs
    if (std::string(arch) == "gpt2") base.model.n_kv_head = base.model.ffn_hidden_size = 0;
    PackedLearnableSource data(base.model.seq_len, base.model.vocab_size, 5);
    SftRun ref;
    if (rank == 0) ref = train(base, MPI_COMM_SELF, data);
    expect_layouts_match(base, data, ref, str("packed ", arch));
    // The forward's other paths at tp 2: the micro-batch in two halves (each its own document
    // starts), sequence parallelism, and recomputed blocks (their attention again in the backward).
    RunConfig tp2 = base;
    tp2.parallel.tp = 2;
    tp2.parallel.dp = world / 2;
    RunConfig halves = tp2, sequence = tp2, recompute = tp2;
    halves.parallel.tp_overlap = true;
    sequence.parallel.sequence_parallel = true;
    recompute.parallel.recompute = "full";
    expect_matches(halves, data, ref, str("packed ", arch, " tp2 tp_overlap"));
    expect_matches(sequence, data, ref, str("packed ", arch, " tp2 sequence_parallel"));
    expect_matches(recompute, data, ref, str("packed ", arch, " tp2 recompute"));
  }
}

// A source whose target mask keeps one record's targets only: the record's document of a packed
// sample (the doc-th of the row), or sample `doc` of unpacked ones.
class OneRecord : public BatchSource {
 public:
  OneRecord(SftSource& src, int T, int doc) : src_(src), T_(T), doc_(doc) {}
  void samples(int64_t first, int count, int32_t* out) override { src_.samples(first, count, out); }
  bool masks_targets() const override { return true; }
  bool packs_documents() const override { return src_.packs_documents(); }
  void doc_starts(int64_t first, int count, int32_t* out) override { src_.doc_starts(first, count, out); }
  void target_mask(int64_t first, int count, uint8_t* out) override {
    src_.target_mask(first, count, out);
    std::vector<int32_t> docs(static_cast<size_t>(count) * T_);
    if (src_.packs_documents()) src_.doc_starts(first, count, docs.data());
    for (int k = 0; k < count; ++k)
      for (int t = 0, doc = 0; t < T_; ++t) {
        if (src_.packs_documents()) doc += t > 0 && docs[k * T_ + t] == t;
        const bool mine = src_.packs_documents() ? doc == doc_ : first + k == doc_;
        if (!mine) out[k * T_ + t] = 0;
      }
  }

 private:
  SftSource& src_;
  int T_, doc_;
};

// Three records of 5, 6 and 6 tokens fill one packed sequence of seq_len + 1 = 17 tokens; unpacked
// they are three padded sequences. The whole batch, and each record's targets alone, give the same
// first-step loss and gradients either way (only the sums' order differs), for Llama and GPT-2.
TEST(Sft, PackedRecordsTrainAsAlone) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  test::TempDir dir;
  {
    MaskedDatasetWriter w(dir / "chat", 101);
    w.add_sequence({{1, 5, 9, 13, 17}, {0, 0, 1, 1, 1}});
    w.end_document();
    w.add_sequence({{2, 40, 41, 42, 43, 44}, {0, 1, 1, 0, 1, 1}});
    w.end_document();
    w.add_sequence({{3, 70, 71, 72, 73, 74}, {0, 0, 0, 1, 1, 1}});
    w.end_document();
    w.finish();
  }
  auto ds = std::make_shared<const MaskedDataset>(dir / "chat", 1);
  for (const char* arch : {"llama", "gpt2"}) {
    RunConfig cfg = sft_config();
    cfg.model.arch = arch;
    cfg.model.n_layer = 2;
    if (std::string(arch) == "gpt2") cfg.model.n_kv_head = cfg.model.ffn_hidden_size = 0;
    const int T = cfg.model.seq_len;
    SftSource packed(ds, 0, 3, T, cfg.model.vocab_size, 9, true), unpacked(ds, 0, 3, T, cfg.model.vocab_size, 9, false);
    ASSERT_EQ(packed.epoch_samples(), 1u);
    EXPECT_DOUBLE_EQ(packed.fill(), 1.0);
    EXPECT_NEAR(unpacked.fill(), 17.0 / 51, 1e-12);   // tokens per sequence rise threefold
    for (int doc = -1; doc < 3; ++doc) {   // -1: every record's targets
      RunConfig p = cfg, u = cfg;
      p.data.pack = true;
      p.train.global_batch_size = p.train.micro_batch_size = 1;
      u.train.global_batch_size = u.train.micro_batch_size = 3;
      OneRecord p_src(packed, T, doc), u_src(unpacked, T, doc);
      BatchSource& p_data = doc < 0 ? static_cast<BatchSource&>(packed) : p_src;
      BatchSource& u_data = doc < 0 ? static_cast<BatchSource&>(unpacked) : u_src;
      const SftRun a = train(p, MPI_COMM_SELF, p_data), b = train(u, MPI_COMM_SELF, u_data);
      std::string which;
      const double grad_err = test::worst_tensor(a.grads, b.grads, which);
      EXPECT_LE(std::fabs(a.losses[0] - b.losses[0]) / b.losses[0], 1e-6) << arch << " record " << doc;
      EXPECT_LE(grad_err, 1e-6) << arch << " record " << doc << " " << which;
      std::printf("  %s record %2d: packed loss %.7f, unpacked %.7f, gradient rel err %.2e (%s)\n", arch, doc,
                  a.losses[0], b.losses[0], grad_err, which.c_str());
    }
  }
}

}  // namespace
}  // namespace trident
