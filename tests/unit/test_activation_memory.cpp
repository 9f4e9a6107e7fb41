// Activation memory of a block as the stage plans it (GptStage::slot_bytes) against Korthikanti et
// al. 2022's per-layer formula re-derived for trident's stored tensors, with and without sequence
// parallelism, for GPT-2 and Llama shapes at tp 2 and 4 (docs/PERFORMANCE.md, "Sequence parallelism").
#include <gtest/gtest.h>

#include "trident/core/error.hpp"
#include "trident/model/gpt.hpp"

namespace trident {
namespace {

// The paper counts, per layer and 16-bit element, every tensor the backward reads; those between
// a column-parallel and a row-parallel GEMM are split over t ranks, the others (the norms' inputs
// and outputs) are whole on every rank without sequence parallelism and split with it:
//   paper (GPT-3, dropout, softmax stored):  sbh (10 + 24/t + 5as/(ht))   with SP  sbh (34/t + 5as/(ht))
//     norm inputs 2 x 2, QKV input 2, MLP input 2, two dropout masks 2 x 1          (10, replicated)
//     Q, K 4, V 2, proj input 2, GELU input 8, GELU output 8                        (24/t)
//     softmax output 2as^2b, its dropout mask as^2b, the dropout output 2as^2b      (5as/(ht) sbh)
// trident has no dropout (no masks, no dropout output) and flash attention keeps no softmax, only
// its logsumexp (f32 per token and head: 4a/(ht) sbh); its norm inputs are the block input (kept
// once, as the previous block's output x3, or the stage input) and x2. With q = the qkv width
// (h for GPT-2's q, k, v each; h + 2 g for Llama's q and grouped k, v of width g = NKV HS) and
// f = the MLP width (GPT-2 4h; Llama's gate|up 2F before, F after SwiGLU):
//   GPT-2  sbh (8 r + (24 + 4a/h)/t)                         r = 1, with SP r = 1/t
//   Llama  sbh (8 r + (2 (h + 2g)/h + 2 + 6F/h + 4a/h)/t)
// plus the norms' f32 statistics, 16/h r sbh (LayerNorm mean and rstd, twice) or 8/h r sbh
// (RMSNorm), which the paper leaves out. So sequence parallelism saves sbh 8 (1 - 1/t) per layer,
// where the paper's 10 (1 - 1/t) also has the two dropout masks.
double formula_block_bytes(const ModelConfig& m, int tp, int micro_batch, bool sp) {
  const double h = m.n_embd, a = m.n_head, t = tp, r = sp ? 1 / t : 1;
  const double sbh = double(micro_batch) * m.seq_len * h;
  if (!m.llama()) return sbh * (8 * r + (24 + 4 * a / h) / t);
  const double g = double(m.kv_heads()) * m.head_size(), F = m.ffn();
  return sbh * (8 * r + (2 * (h + 2 * g) / h + 2 + 6 * F / h + 4 * a / h) / t);
}

// One block's activations on one TP rank as the stage allocates them: a slot of two blocks less one of one.
double planned_block_bytes(ModelConfig m, int tp, int micro_batch, bool sp) {
  const ActivationOptions acts{RecomputePlan{}, sp};
  auto slot = [&](int layers) {
    m.n_layer = layers;
    return double(GptStage::slot_bytes(m, StageInfo::of(m, 0, 1), tp, micro_batch, DType::BF16, acts));
  };
  return slot(2) - slot(1);
}

ModelConfig gpt2_1_44b() {   // inputs/models/gpt2-1.5b-tp.cfg: GPT-2 XL's depth with 24 heads (tp divides them)
  ModelConfig m;
  m.n_layer = 48;
  m.n_head = 24;
  m.n_embd = 1536;
  return m;
}

ModelConfig llama_3_2_1b() {
  ModelConfig m;
  m.arch = "llama";
  m.n_layer = 16;
  m.n_head = 32;
  m.n_kv_head = 8;
  m.n_embd = 2048;
  m.ffn_hidden_size = 8192;
  m.vocab_size = 128256;
  m.seq_len = 2048;
  return m;
}

// Per-rank bytes of a block within 10% of the formula (the statistics it leaves out are 1-2%),
// with and without sequence parallelism, and the memory SP saves within 10% of sbh 8 (1 - 1/t).
TEST(ActivationMemory, SequenceParallelSavesWhatThePaperFormulaPredicts) {
  ModelConfig gpt2_small;   // the defaults: GPT-2 124M, T 1024
  for (const ModelConfig& m : {gpt2_small, gpt2_1_44b(), llama_3_2_1b()})
    for (const int tp : {2, 4}) {
      const int B = 4;
      SCOPED_TRACE(str(m.arch, " C ", m.n_embd, " tp ", tp));
      const double plain = planned_block_bytes(m, tp, B, false), sp = planned_block_bytes(m, tp, B, true);
      const double want_plain = formula_block_bytes(m, tp, B, false), want_sp = formula_block_bytes(m, tp, B, true);
      EXPECT_NEAR(plain / want_plain, 1.0, 0.1) << plain << " vs " << want_plain;
      EXPECT_NEAR(sp / want_sp, 1.0, 0.1) << sp << " vs " << want_sp;
      const double saved = plain - sp, want_saved = want_plain - want_sp;
      EXPECT_NEAR(saved / want_saved, 1.0, 0.1) << saved << " vs " << want_saved;
      std::printf("  %s C %d tp %d: block %.1f MiB, with SP %.1f MiB (formula %.1f, %.1f)\n", m.arch.c_str(),
                  m.n_embd, tp, plain / (1 << 20), sp / (1 << 20), want_plain / (1 << 20), want_sp / (1 << 20));
    }
}

}  // namespace
}  // namespace trident
