// Planner: parameter counts of GPT-2, memory of a hand-computed layout with and without ZeRO-1 and 2,
// the bubble formula, in-flight micro-batches per schedule, and the ranking of layouts.
#include <gtest/gtest.h>

#include "trident/config/parse.hpp"
#include "trident/parallel/pair_exchange.hpp"
#include "trident/parallel/topology.hpp"
#include "trident/model/generator.hpp"
#include "trident/train/executor.hpp"
#include "trident/train/planner.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/sharded_params.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

ModelConfig gpt2_124m() {
  ModelConfig m;   // the defaults are GPT-2 124M: L 12, NH 12, C 768, V 50257, T 1024
  return m;
}

TEST(Planner, Gpt2SmallParameterCounts) {
  const ModelConfig m = gpt2_124m();
  // wte 50257*768 + wpe 1024*768 + 12 blocks * 7,087,872 + lnf 2*768 (HF GPT-2 reports the same).
  EXPECT_EQ(logical_param_count(m), 38597376 + 786432 + 12 * 7087872 + 1536);
  EXPECT_EQ(logical_param_count(m), 124439808);
  // Stored with the vocabulary padded to 50304 rows (llm.c's count of the same model).
  EXPECT_EQ(stored_param_count(m, 1), 124475904);
  EXPECT_EQ(stored_param_count(m, 1) - logical_param_count(m), (50304 - 50257) * 768);
}

TEST(Planner, FlopsPerTokenIsSixNPlusAttention) {
  const ModelConfig m = gpt2_124m();
  // N: every parameter but the position table and the final LayerNorm (no GEMM touches them).
  const double n = double(logical_param_count(m)) - 1024.0 * 768 - 2 * 768;
  EXPECT_DOUBLE_EQ(flops_per_token(m), 6 * n + 12.0 * 12 * 768 * 1024);
}

TEST(Planner, BubbleFormula) {
  EXPECT_DOUBLE_EQ(pipeline_bubble(1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 4), 3.0 / 7.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble(2, 15), 1.0 / 16.0);
  // Interleaved: pp=4, m=8, v=2 fills and drains in 3/2 micro-batch slots.
  EXPECT_DOUBLE_EQ(pipeline_bubble(4, 8, 2), 1.5 / 9.5);
}

// L 2, NH 2, C 64, V 128, T 16; micro-batch 2, global batch 8, dp 2: every tensor is a multiple
// of the 64-element alignment and the buckets of 128 (64*dp), so the sizes are exact.
RunConfig small_config(int zero) {
  RunConfig c;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.n_embd = 64;
  c.model.vocab_size = 128;
  c.model.seq_len = 16;
  c.train.micro_batch_size = 2;
  c.train.global_batch_size = 8;
  c.parallel.zero = zero;
  validate_run_config(c, 2);
  return c;
}

TEST(Planner, MemoryOfAHandComputedLayout) {
  Hardware hw;
  hw.device = false;
  hw.act_bytes = 2;
  // Parameters: lnf 128 + 2 blocks * 49,984 + wpe 1,024 + wte 8,192 = 109,312.
  const double P = 109312;
  // One slot (N = 32 rows): input, grad 4,096 B each; tokens, targets, doc_start 256 B each (128
  // rounded up to the 256-byte arena alignment); per layer ln1, atty, x2, ln2, x3 4,096 B; qkv
  // 12,288 B; fch, fcg 16,384 B; ln means/rstds and lse 256 B each (five of them): 66,816 B.
  const double slot = 2 * 4096 + 3 * 256 + 2 * 66816;
  // Scratch: dln 4,096 + dqkv 12,288 + datty 4,096 + dfch 16,384; head: lnf, dlnf 4,096 each,
  // logits 32*128*2 = 8,192, and nine 256-byte f32 vectors (DPO's sequence NLLs and row weights
  // among them, and online RL's entropy sums, 32 x 2 f32).
  const double scratch = 4096 + 12288 + 4096 + 16384 + 2 * 4096 + 8192 + 9 * 256;

  MemoryEstimate plain = estimate_memory(small_config(0), hw);
  EXPECT_DOUBLE_EQ(plain.params, 2 * P);
  EXPECT_DOUBLE_EQ(plain.grads, 4 * P);
  EXPECT_DOUBLE_EQ(plain.optimizer, 12 * P);
  EXPECT_EQ(plain.in_flight, 1);
  EXPECT_DOUBLE_EQ(plain.activations, slot);
  EXPECT_DOUBLE_EQ(plain.scratch, scratch);
  // Trainer: inputs, targets and document starts of 2 micro-batches of 2 x 16 tokens (768 B), the
  // step statistics (24 B: LossSums and the squared gradient norm), and 32-byte optimizer pieces: 28
  // to update (one per tensor) and 18 for the norm (the tensors meeting a DP rank's half of the
  // single bucket; the planner takes the larger rank).
  EXPECT_DOUBLE_EQ(plain.trainer, 768 + 24 + (28 + 18) * 32);
  EXPECT_DOUBLE_EQ(plain.total(), 2168024);   // 18 P + slot + scratch + trainer

  MemoryEstimate zero = estimate_memory(small_config(1), hw);
  EXPECT_DOUBLE_EQ(zero.optimizer, 12 * P / 2);   // master, m and v sharded over dp = 2
  EXPECT_DOUBLE_EQ(zero.trainer, 768 + 24 + (18 + 18) * 32);   // it updates only its shard's tensors
  EXPECT_DOUBLE_EQ((plain.total() - plain.trainer) - (zero.total() - zero.trainer), 6 * P);
  EXPECT_DOUBLE_EQ(zero.total(), 1511832);

  // Task dpo adds the frozen reference: its parameters, one forward slot, its scratch and the
  // sequence NLLs of 2 micro-batches of 2 (16 B).
  RunConfig dpo = small_config(0);
  dpo.task = "dpo";
  const MemoryEstimate with_reference = estimate_memory(dpo, hw);
  EXPECT_DOUBLE_EQ(with_reference.reference, 2 * P + slot + scratch + 16);
  EXPECT_DOUBLE_EQ(with_reference.total(), plain.total() + with_reference.reference);
  // A precomputed reference (dpo.reference = precomputed) builds no reference model: only the
  // sequence NLLs the step reads from its file.
  dpo.dpo.reference = "precomputed";
  const MemoryEstimate precomputed = estimate_memory(dpo, hw);
  EXPECT_DOUBLE_EQ(precomputed.reference, 16);
  EXPECT_DOUBLE_EQ(precomputed.total(), plain.total() + 16);
}

// parallel.offload_optimizer on the hand-computed layout: the 12 bytes of master weight and moments
// per updated element leave the GPU; the host holds them with a 4-byte gradient copy and a 2-byte
// bf16 parameter each (P elements without ZeRO, P/2 under ZeRO-1 on dp = 2).
TEST(Planner, OffloadMovesTheOptimizerStateToTheHost) {
  Hardware hw;
  hw.device = false;
  hw.act_bytes = 2;
  const double P = 109312;
  for (const int zero : {0, 1}) {
    RunConfig c = small_config(zero);
    const MemoryEstimate on_gpu = estimate_memory(c, hw);
    c.parallel.offload_optimizer = true;
    const MemoryEstimate offloaded = estimate_memory(c, hw);
    const double state = zero ? P / 2 : P;
    EXPECT_DOUBLE_EQ(on_gpu.host, 0) << "zero " << zero;
    EXPECT_DOUBLE_EQ(offloaded.optimizer, 0) << "zero " << zero;
    EXPECT_DOUBLE_EQ(on_gpu.total() - offloaded.total(), 12 * state) << "zero " << zero;
    EXPECT_DOUBLE_EQ(offloaded.host, (12 + 4 + 2) * state) << "zero " << zero;
  }
}

// The step's offload time: gradient copies down beyond 2/3 of the last micro-batch's compute (the
// last bucket's always), then the host AdamW (7 fp32 words and a parameter per element, at the
// host's bandwidth shared by its ranks) or the uploads, whichever is longer.
TEST(Planner, OffloadAddsTheHostUpdateToTheStep) {
  Hardware hw;   // 50 GB/s PCIe
  hw.host_adamw_gbps = 150;
  // 1e9 elements, the last bucket 1e8: 80 ms of gradients down (8 ms of them the last bucket's),
  // 200 ms of host update (30 bytes each) beside 40 ms of uploads.
  EXPECT_NEAR(offload_seconds(1e9, 1e8, 0, 1, hw), 0.08 + 0.2, 1e-12);
  EXPECT_NEAR(offload_seconds(1e9, 1e8, 0.06, 1, hw), 0.04 + 0.2, 1e-12);   // 40 ms hidden by the backward
  EXPECT_NEAR(offload_seconds(1e9, 1e8, 1, 1, hw), 0.008 + 0.2, 1e-12);     // the last bucket waits
  EXPECT_NEAR(offload_seconds(1e9, 1e8, 1, 2, hw), 0.008 + 0.4, 1e-12);     // two ranks share the host
  hw.host_adamw_gbps = 1e4;   // a host this fast waits for the uploads
  EXPECT_NEAR(offload_seconds(1e9, 1e8, 1, 1, hw), 0.008 + 0.04, 1e-12);

  hw = Hardware{};
  const double P = 109312;   // small_config's parameters (dp 2, no ZeRO: every rank updates all)
  RunConfig c = small_config(0);
  // The tied embedding's bucket (V * C = 8,192 elements) is the last to be final (its half under ZeRO-1).
  const double last = 8192;
  const ParamLayout layout(c.model, StageInfo::of(c.model, 0, 1), 1, 0, 2, bucket_elements(c.parallel));
  ASSERT_EQ(double(layout.buckets()[layout.bucket_of_unit(layout.first_forward_unit())].size), last);
  ASSERT_EQ(double(layout.total()), P);
  const TimeEstimate on_gpu = estimate_time(c, hw);
  c.parallel.offload_optimizer = true;
  const TimeEstimate offloaded = estimate_time(c, hw);
  EXPECT_DOUBLE_EQ(on_gpu.offload_s, 0);
  EXPECT_GT(offloaded.offload_s, 0);
  // Both ranks of the 2-rank job update on one host (8 GPUs per node).
  const double micro_compute = on_gpu.compute_s / c.micro_batches_per_step();
  EXPECT_NEAR(offloaded.offload_s, offload_seconds(P, last, micro_compute, 2, hw), 1e-15);
  // Offloaded, the device runs no AdamW: 28 + act_bytes bytes an element fewer at hbm_gbps.
  EXPECT_NEAR(on_gpu.memory_s - offloaded.memory_s, P * (28 + hw.act_bytes) / (hw.hbm_gbps * 1e9), 1e-15);
  EXPECT_NEAR(offloaded.step_s - on_gpu.step_s, offloaded.offload_s + offloaded.memory_s - on_gpu.memory_s, 1e-15);
  hw.gpus_per_node = 1;   // one rank per node: each host's bandwidth for one
  EXPECT_NEAR(estimate_time(c, hw).offload_s, offload_seconds(P, last, micro_compute, 1, hw), 1e-15);
  hw.gpus_per_node = 8;
  c.parallel.zero = 1;   // each rank updates its half
  validate_run_config(c, 2);
  EXPECT_NEAR(estimate_time(c, hw).offload_s, offload_seconds(P / 2, last / 2, micro_compute, 2, hw), 1e-15);
}

// What the GPU holds beyond trident's allocations: the CUDA context, the cuBLASLt workspace, and
// NCCL's 12 MiB per channel and peer for every communicator of two or more ranks the layout uses.
TEST(Planner, GpuMemoryOutsideTheArenas) {
  Hardware hw;   // 2.2 GiB context, 32 channels
  const double channel = 12.0 * (1 << 20), ring = 32 * channel;
  RunConfig dp2 = small_config(0);   // world and dp rings
  const MemoryEstimate e = estimate_memory(dp2, hw);
  EXPECT_DOUBLE_EQ(e.cuda_context, 2.2 * (1 << 30));
  EXPECT_DOUBLE_EQ(e.gemm_workspace, 32.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(e.nccl_buffers, 2 * ring);
  EXPECT_DOUBLE_EQ(e.total(), e.arenas() + e.outside_arenas());
  dp2.parallel.dp_comm_ctas = 8;   // NCCL opens at most maxCTAs channels
  EXPECT_DOUBLE_EQ(estimate_memory(dp2, hw).nccl_buffers, ring + 8 * channel);

  RunConfig one = small_config(0);
  one.train.global_batch_size = 2;
  one.parallel.dp = 0;
  validate_run_config(one, 1);   // every communicator of one rank: no buffers
  EXPECT_DOUBLE_EQ(estimate_memory(one, hw).nccl_buffers, 0);

  RunConfig pp2 = small_config(0);
  pp2.parallel.dp = 0;
  pp2.parallel.pp = 2;
  validate_run_config(pp2, 2);   // world ring, the tied embedding's pair, one pipeline neighbour
  EXPECT_DOUBLE_EQ(nccl_buffer_bytes(pp2, hw, 0), 3 * ring);
  EXPECT_DOUBLE_EQ(nccl_buffer_bytes(pp2, hw, 1), 3 * ring);

  hw.device = false;   // CPU ranks: nothing outside the arenas
  const MemoryEstimate cpu = estimate_memory(small_config(0), hw);
  EXPECT_DOUBLE_EQ(cpu.outside_arenas(), 0);
  EXPECT_DOUBLE_EQ(cpu.total(), cpu.arenas());
}

// The activations GptStage's slots hold, per layout (tp 1 to 8, sequence parallelism, recompute
// none, selective, full, and selective with the first block full), are the stage boundary's
// buffers plus block_activation_bytes per block, for GPT-2 and Llama; for GPT-2 those are the
// Korthikanti et al. coefficients of sbh (sizes chosen so that the arena's 256-byte alignment
// adds nothing).
TEST(Planner, SlotBytesFollowTheActivationFormula) {
  Hardware hw;
  hw.act_bytes = 2;
  for (const char* arch : {"gpt2", "llama"})
    for (int tp : {1, 2, 4, 8})
      for (bool sp : {false, true})
        for (const auto& [mode, layers] : {std::pair{"none", 0}, std::pair{"selective", 0}, std::pair{"full", 0},
                                           std::pair{"selective", 1}}) {
          RunConfig c;
          c.model.arch = arch;
          c.model.n_layer = 4;
          c.model.n_head = 8;
          c.model.n_embd = 256;
          c.model.vocab_size = 256;
          c.model.seq_len = 128;
          if (c.model.arch == "llama") {
            c.model.n_kv_head = 4;
            c.model.ffn_hidden_size = 512;
          }
          c.train.micro_batch_size = 4;
          c.train.global_batch_size = 4;
          c.parallel.tp = tp;
          c.parallel.sequence_parallel = sp && tp > 1;
          c.parallel.recompute = mode;
          c.parallel.recompute_layers = layers;
          validate_run_config(c, tp);
          SCOPED_TRACE(str(arch, " tp", tp, sp ? " sp " : " ", mode, " ", layers));
          const MemoryEstimate e = estimate_memory(c, hw);
          const double N = 4 * 128, C = 256;
          const bool selective = c.parallel.recompute == "selective";
          double want = 2 * N * C * 2 + 3 * N * 4;   // the stage input and gradient; tokens, targets, doc starts
          for (int i = 0; i < 4; ++i) {
            const bool full = c.parallel.recompute == "full" || (selective && i < layers);
            want += block_activation_bytes(c.model, tp, 4, 2, c.parallel.sequence_parallel, selective, full);
          }
          EXPECT_EQ(e.in_flight, 1);
          EXPECT_DOUBLE_EQ(e.activations, want);
          if (c.model.arch != "gpt2") continue;
          // Without the fp32 statistics: sbh times the paper's coefficients less its dropout masks.
          const double sbh = N * C, t = tp, r = c.parallel.sequence_parallel ? 1 / t : 1;
          const double stats = N * r * 4 * 4 + N * (8 / tp) * 4;
          auto block = [&](bool sel, bool full) {
            return block_activation_bytes(c.model, tp, 4, 2, c.parallel.sequence_parallel, sel, full);
          };
          EXPECT_DOUBLE_EQ(block(false, false) - stats, sbh * (8 * r + 24 / t));
          EXPECT_DOUBLE_EQ(block(true, false) - stats, sbh * (4 * r + 24 / t));   // the GELU output kept
          EXPECT_DOUBLE_EQ(block(false, true), sbh * 2 * r);
        }
}

// ZeRO-2 on small_config with 12 layers and buckets of 40,000 elements: the head (lnf, 128) closes
// its bucket with the last block (50,112, rounded to 128s: 50,176), each other block has one
// (49,984 -> 50,048), then wpe (1,024) and the tied wte (8,192): 609,920 elements in all, a
// 304,960-element shard. The head's bucket (it also holds the last block, whose output bias
// gradient the head writes), wpe's and wte's keep a staging buffer each (59,392); the eleven
// other buckets share three (3 x 50,048). So the fp32 gradients take (304,960 + 209,536) x 4 B
// instead of ZeRO-1's 609,920 x 4 B, and the parameters 304,960 x 2 B more (AdamW's shard).
// ZeRO-3 keeps ZeRO-2's gradients, and of the parameters only the shard and the gather buffers: the
// head's, wpe's and wte's buckets (59,392) and two of the other buckets' (2 x 50,048).
TEST(Planner, MemoryOfZero2And3) {
  Hardware hw;
  hw.device = false;
  RunConfig c = small_config(1);
  c.model.n_layer = 12;
  c.parallel.bucket_mb = 40000.0 * 4 / (1 << 20);
  validate_run_config(c, 2);
  const MemoryEstimate zero1 = estimate_memory(c, hw);
  c.parallel.zero = 2;
  const MemoryEstimate zero2 = estimate_memory(c, hw);
  EXPECT_DOUBLE_EQ(zero1.grads, 4.0 * 609920);
  EXPECT_DOUBLE_EQ(zero2.grads, 4.0 * (304960 + 209536));
  EXPECT_DOUBLE_EQ(zero2.params - zero1.params, 2.0 * 304960);
  EXPECT_DOUBLE_EQ(zero2.optimizer, zero1.optimizer);
  EXPECT_DOUBLE_EQ(zero2.trainer, zero1.trainer);
  // Its reduce-scatters on every micro-batch can only add to the exposed DP time.
  EXPECT_GE(estimate_time(c, hw).dp_s, estimate_time(small_config(1), hw).dp_s);
  c.parallel.zero = 3;
  validate_run_config(c, 2);
  const MemoryEstimate zero3 = estimate_memory(c, hw);
  EXPECT_DOUBLE_EQ(zero3.params, 2.0 * (304960 + 59392 + 2 * 50048));
  EXPECT_DOUBLE_EQ(zero3.grads, zero2.grads);
  EXPECT_DOUBLE_EQ(zero3.optimizer, zero2.optimizer);
}

// The memory-bound passes over the parameters (parameter_pass_seconds) on MemoryOfZero2And3's
// layout (609,920 elements in buckets of 40,000, dp 2: 304,960 updated per rank under ZeRO).
TEST(Planner, ParameterPassesCountZero2StagingPerMicroBatch) {
  Hardware hw;
  hw.device = false;
  hw.act_bytes = 2;
  hw.hbm_gbps = 1;   // 1e9 bytes a second: seconds are bytes / 1e9
  RunConfig c = small_config(0);
  c.model.n_layer = 12;
  c.parallel.bucket_mb = 40000.0 * 4 / (1 << 20);
  c.train.global_batch_size = 4;   // one micro-batch of 2 per rank
  validate_run_config(c, 2);
  ASSERT_EQ(c.micro_batches_per_step(), 1);
  const double total = 609920, shard = 304960;
  // ZeRO-0: AdamW over all (30 bytes), the norm's read (4) and the gradients' zeroing (4).
  EXPECT_NEAR(estimate_time(c, hw).memory_s, total * (30 + 4 + 4) / 1e9, 1e-15);
  c.parallel.zero = 1;
  validate_run_config(c, 2);
  const double zero1 = estimate_time(c, hw).memory_s;
  EXPECT_NEAR(zero1, (shard * (30 + 4) + total * 4) / 1e9, 1e-15);
  // ZeRO-2 with one micro-batch: every bucket zeroed (4) and reduced straight into the shard, as
  // ZeRO-1 zeroes the whole gradient.
  c.parallel.zero = 2;
  validate_run_config(c, 2);
  const double zero2_one = estimate_time(c, hw).memory_s;
  EXPECT_NEAR(zero2_one, zero1, 1e-15);
  // Two micro-batches: the staged buckets (all but those reduced once a step) zeroed again (4) and
  // their second sums' halves added to the shards (3 x 4 / 2); ZeRO-1 the same as with one.
  c.train.global_batch_size = 8;
  validate_run_config(c, 2);
  const double staged_once_more = estimate_time(c, hw).memory_s - zero2_one;
  EXPECT_GT(staged_once_more, 0.5 * total * 10 / 1e9);
  EXPECT_LT(staged_once_more, total * 10 / 1e9);
  c.parallel.zero = 1;
  validate_run_config(c, 2);
  EXPECT_DOUBLE_EQ(estimate_time(c, hw).memory_s, zero1);
  // Offloaded, the device runs no AdamW.
  c.parallel.offload_optimizer = true;
  validate_run_config(c, 2);
  EXPECT_NEAR(zero1 - estimate_time(c, hw).memory_s, shard * 30 / 1e9, 1e-15);
}

// Llama-3-8B on 4x H200 (139 GiB usable, 4,000 GB/s memory, global batch 16): measured on
// 2026-11-28, dp 4 ZeRO-1 at B 2 ran at 44,690 tok/s, ZeRO-2 at B 4 (one micro-batch a step) at
// 44,631 and ZeRO-2 at B 2 at 43,392 (docs/PERFORMANCE.md, "Llama"). The planner puts the first
// two level, ahead of the third: ZeRO-2 at one micro-batch makes the passes ZeRO-1 makes.
TEST(Planner, RankingWeighsZero2StagingOfLlama3_8B) {
  // inputs/models/llama3-8b.cfg's shape.
  const RunConfig c = parse_config_text(
      "[model]\narch = llama\nn_layer = 32\nn_head = 32\nn_kv_head = 8\nn_embd = 4096\nffn_hidden_size = 14336\n"
      "vocab_size = 128256\nseq_len = 4096\ntie_embeddings = false\n[train]\nglobal_batch_size = 16\n",
      "llama3-8b");
  Hardware hw;
  hw.gpus = 4;
  hw.memory_gib = 139;
  hw.gemm_tflops = 680;
  hw.hbm_gbps = 4000;
  const std::vector<Candidate> ranked = rank_layouts(c, hw);
  ASSERT_TRUE(ranked.front().fits);
  auto find = [&](int zero, int B) {
    for (size_t i = 0; i < ranked.size(); ++i)
      if (ranked[i].layout.dp == 4 && ranked[i].layout.zero == zero && ranked[i].layout.micro_batch_size == B)
        return i;
    return ranked.size();
  };
  const size_t zero1_b2 = find(1, 2), zero2_b4 = find(2, 4), zero2_b2 = find(2, 2);
  ASSERT_LT(zero2_b2, ranked.size());
  EXPECT_LT(std::max(zero1_b2, zero2_b4), 2u);   // the first two
  EXPECT_LT(zero1_b2, zero2_b2);
  EXPECT_LT(zero2_b4, zero2_b2);
  EXPECT_DOUBLE_EQ(ranked[zero1_b2].time.step_s, ranked[zero2_b4].time.step_s);
  EXPECT_GT(ranked[zero2_b2].time.memory_s, ranked[zero1_b2].time.memory_s);
}

// Task dpo: the reference (parameters whole beside a ZeRO-2 shard) and its forward with the head's
// second pass in the step's FLOPs.
TEST(Planner, DpoCountsItsReference) {
  Hardware hw;
  RunConfig c = small_config(1);
  c.parallel.zero = 2;
  c.task = "dpo";
  const MemoryEstimate zero2 = estimate_memory(c, hw);
  c.parallel.zero = 1;
  const MemoryEstimate zero1 = estimate_memory(c, hw);
  EXPECT_DOUBLE_EQ(zero2.reference, zero1.reference);   // not counting the policy's parameter shard
  const double pretrain = estimate_time(small_config(1), hw).compute_s, dpo = estimate_time(c, hw).compute_s;
  EXPECT_GT(dpo, pretrain * 4 / 3);
  EXPECT_LT(dpo, pretrain * 5 / 3);
  // Precomputed: no reference forward, only the head's second pass over the logits.
  c.dpo.reference = "precomputed";
  const double precomputed = estimate_time(c, hw).compute_s;
  EXPECT_GT(precomputed, pretrain);
  EXPECT_LT(precomputed, pretrain * 7 / 6);
}

// Task grpo: the generator's KV cache and rows, the answer tokens' loss inputs, and with a KL
// penalty the reference (per-token NLLs) and its forward.
TEST(Planner, GrpoCountsGenerationAndItsReference) {
  Hardware hw;
  RunConfig c = small_config(1);
  const MemoryEstimate pretrain = estimate_memory(c, hw);
  c.task = "grpo";
  c.rl.kl_beta = 0;
  const MemoryEstimate no_kl = estimate_memory(c, hw);
  const StageInfo st = StageInfo::of(c.model, 0, 1);
  const ParamLayout layout(c.model, st, c.parallel.tp, 0, c.parallel.dp, bucket_elements(c.parallel));
  EXPECT_DOUBLE_EQ(no_kl.generation, Generator::device_bytes(c.model, st, c.parallel.tp, layout.vocab_local(), DType::BF16,
                                                             rollout_generation_slots(c), c.model.seq_len,
                                                             rollout_feed_rows(c)));
  EXPECT_GT(no_kl.generation, 0);
  // On pp 2 each stage's generator holds the KV cache of its own layers, and only the last stage
  // the head's buffers: less than one stage's whole model.
  RunConfig pp2 = c;
  pp2.parallel.pp = 2;
  pp2.parallel.dp = 1;
  const MemoryEstimate piped = estimate_memory(pp2, hw);
  EXPECT_DOUBLE_EQ(piped.generation,
                   Generator::device_bytes(c.model, StageInfo::of(c.model, piped.stage, 2), c.parallel.tp,
                                           layout.vocab_local(), DType::BF16, rollout_generation_slots(pp2),
                                           c.model.seq_len, rollout_feed_rows(pp2)));
  EXPECT_LT(piped.generation, no_kl.generation);
  EXPECT_DOUBLE_EQ(no_kl.reference, 0);
  const double tokens = static_cast<double>(c.micro_batches_per_step()) * c.train.micro_batch_size * c.model.seq_len;
  EXPECT_DOUBLE_EQ(no_kl.trainer - pretrain.trainer, 3 * tokens * sizeof(float));
  c.rl.kl_beta = 0.04;
  const MemoryEstimate kl = estimate_memory(c, hw);
  c.task = "dpo";
  const MemoryEstimate dpo = estimate_memory(c, hw);
  // The same frozen model as dpo's, with an NLL per token instead of per sequence.
  EXPECT_DOUBLE_EQ(kl.reference - dpo.reference,
                   static_cast<double>(c.micro_batches_per_step()) * c.train.micro_batch_size * (c.model.seq_len - 1) *
                       sizeof(float));
  c.task = "grpo";
  EXPECT_GT(estimate_time(c, hw).compute_s, estimate_time(small_config(1), hw).compute_s * 4 / 3);
}

// Task ppo: grpo's terms (generator, per-token reference) plus the value model, a trained
// score-head model of the policy's layout: a reward model's estimate but the shared workspace,
// with its per-token head inputs; its training and rollout forward add to the step's compute.
TEST(Planner, PpoCountsTheValueModel) {
  Hardware hw;
  RunConfig c = small_config(1);
  c.task = "grpo";
  const MemoryEstimate grpo = estimate_memory(c, hw);
  const TimeEstimate grpo_time = estimate_time(c, hw);
  c.task = "ppo";
  const MemoryEstimate ppo = estimate_memory(c, hw);
  RunConfig reward = small_config(1);
  reward.task = "reward";
  reward.model.score_head = true;
  const MemoryEstimate rm = estimate_memory(reward, hw);
  const double tokens = static_cast<double>(c.micro_batches_per_step()) * c.train.micro_batch_size * c.model.seq_len;
  EXPECT_DOUBLE_EQ(ppo.value_model, rm.arenas() + 3 * tokens * sizeof(float));
  EXPECT_DOUBLE_EQ(ppo.generation, grpo.generation);
  EXPECT_DOUBLE_EQ(ppo.reference, grpo.reference);
  EXPECT_DOUBLE_EQ(ppo.total(), grpo.total() + ppo.value_model);
  EXPECT_GT(estimate_time(c, hw).compute_s, grpo_time.compute_s);
}

TEST(Planner, InFlightMicroBatchesFollowTheSchedule) {
  Hardware hw;
  RunConfig c = small_config(0);
  c.parallel.pp = 2;
  c.parallel.dp = 1;
  c.train.global_batch_size = 8;   // 4 micro-batches of 2
  validate_run_config(c, 2);
  EXPECT_EQ(estimate_memory(c, hw).in_flight, 2);   // 1F1B: pp - stage on stage 0
  c.parallel.schedule = "gpipe";
  EXPECT_EQ(estimate_memory(c, hw).in_flight, 4);   // GPipe: every micro-batch
  // Interleaved, two chunks of one layer per rank: Megatron's 2*(pp-1) + (v-1)*pp warm-up forwards
  // plus one, each in a slot of one chunk's activations (the trainer's slots).
  c.model.n_layer = 4;
  c.parallel.schedule = "interleaved";
  c.parallel.virtual_stages = 2;
  validate_run_config(c, 2);
  EXPECT_EQ(estimate_memory(c, hw).in_flight, 5);
  const size_t chunk_slot = GptStage::slot_bytes(c.model, StageInfo::of(c.model, 0, 2, 2), 1, c.train.micro_batch_size,
                                                 DType::BF16, activation_options(c));
  EXPECT_DOUBLE_EQ(estimate_memory(c, hw).activations, 5.0 * chunk_slot);
}

RunConfig preset(int n_layer, int n_head, int n_embd, int global_batch) {
  RunConfig c;
  c.model.n_layer = n_layer;
  c.model.n_head = n_head;
  c.model.n_embd = n_embd;
  c.train.global_batch_size = global_batch;
  return c;
}

TEST(Planner, RankingPrefersDataParallelForASmallModel) {
  Hardware hw;
  hw.gpus = 8;
  std::vector<Candidate> ranked = rank_layouts(preset(12, 12, 768, 64), hw);
  ASSERT_FALSE(ranked.empty());
  const Layout& best = ranked.front().layout;
  EXPECT_TRUE(ranked.front().fits);
  EXPECT_EQ(best.dp, 8);
  EXPECT_EQ(best.tp, 1);
  EXPECT_EQ(best.pp, 1);
  EXPECT_EQ(best.micro_batch_size, 8);   // ties on time go to the larger micro-batch
  for (size_t i = 1; i < ranked.size(); ++i)
    if (ranked[i].fits) EXPECT_LE(ranked[i].time.tokens_per_s, ranked[i - 1].time.tokens_per_s * (1 + 1e-6));
}

TEST(Planner, RankingKeepsOnlyLayoutsThatFitWhenMemoryIsShort) {
  Hardware hw;
  hw.gpus = 8;
  hw.memory_gib = 24;
  std::vector<Candidate> ranked = rank_layouts(preset(48, 25, 1600, 64), hw);   // GPT-2 1.5B
  ASSERT_FALSE(ranked.empty());
  ASSERT_TRUE(ranked.front().fits);
  const Layout& best = ranked.front().layout;
  EXPECT_TRUE(best.zero >= 1 || best.pp > 1) << "plain data parallelism needs > 24 GiB for 1.5B parameters";
  bool plain_dp_fits = false;
  for (const Candidate& c : ranked) {
    if (c.fits) EXPECT_LE(c.memory.total(), 24.0 * (1 << 30));
    if (c.layout.dp == 8 && c.layout.zero == 0) plain_dp_fits = plain_dp_fits || c.fits;
  }
  EXPECT_FALSE(plain_dp_fits);
}

TEST(Planner, TensorParallelAcrossNodesIsSlowerThanInside) {
  Hardware hw;
  hw.gpus = 8;
  RunConfig c = preset(12, 12, 768, 64);
  Layout l;
  l.tp = 4;
  l.dp = 2;
  l.micro_batch_size = 8;
  apply_layout(c, l);
  validate_run_config(c, 8);
  const double inside = estimate_time(c, hw).tp_s;
  hw.gpus_per_node = 2;   // TP groups of 4 now cross nodes and run at IB speed
  // The exposed all-reduces take nvlink/ib times as long; the backward ones, partly hidden by
  // the weight-gradient GEMMs, more than that.
  EXPECT_GE(estimate_time(c, hw).tp_s / inside, hw.nvlink_gbps / hw.ib_gbps - 1e-9);
}

// tp = 2, one stage, 4 micro-batches of one 1024-token sequence at C = 1536: each (B, T, C)
// bf16 all-reduce moves 3.1 MB once through the link (ring factor 1). The forward's 2 per layer,
// the embedding sum and the head's input gradient (plus 12 bytes a token of softmax statistics)
// are always exposed; the backward's 2 per layer only beyond the weight-gradient GEMMs beside
// them (16 and 8 C^2 FLOPs a token over tp).
TEST(Planner, BackwardTensorParallelAllReducesHideBehindWeightGradients) {
  Hardware hw;
  hw.gpus = 2;
  RunConfig c = preset(4, 16, 1536, 4);
  Layout l;
  l.tp = 2;
  l.micro_batch_size = 1;
  apply_layout(c, l);
  validate_run_config(c, 2);
  const double tokens = 1.0 * c.model.seq_len, msg = tokens * 1536 * 2, bw = hw.nvlink_gbps * 1e9;
  const double exposed = 4 * ((2 * 4 + 2) * msg + 12 * tokens) / bw;   // 4 micro-batches
  // 300 GB/s and 400 TFLOP/s: one all-reduce 10.5 us, the smaller GEMM pair (8 C^2) 24 us.
  EXPECT_NEAR(estimate_time(c, hw).tp_s, exposed, 1e-12);
  // GEMMs 1000x faster: the backward's all-reduces show (less the GEMMs' time).
  hw.gemm_tflops = 400e3;
  const double dw = 1536.0 * 1536 * tokens / 2 / (hw.gemm_tflops * 1e12);
  const double backward = 4 * 4 * ((msg / bw - 16 * dw) + (msg / bw - 8 * dw));
  EXPECT_NEAR(estimate_time(c, hw).tp_s, exposed + backward, 1e-12);
  // tp_overlap with fused sums: the forward's 2 per layer run beside the other half's work.
  c.parallel.tp_overlap = c.parallel.tp_fused_sum = true;
  EXPECT_NEAR(estimate_time(c, hw).tp_s, exposed - 4 * 2 * 4 * msg / bw + backward, 1e-12);
  // ... and its partials are memory: 4 slots of (B*T, C).
  const double with_partials = estimate_memory(c, hw).scratch;
  c.parallel.tp_fused_sum = false;
  EXPECT_NEAR(with_partials - estimate_memory(c, hw).scratch, kPartialSlots * msg, 1e-6);
  // Sequence parallelism with fused sums (no tp_overlap): the forward's transfers run beside the
  // GEMMs of the other ranks' rows, not counted either.
  c.parallel.tp_overlap = false;
  c.parallel.sequence_parallel = c.parallel.tp_fused_sum = true;
  EXPECT_NEAR(estimate_time(c, hw).tp_s, exposed - 4 * 2 * 4 * msg / bw + backward, 1e-12);
}

// ZeRO-3's all-gathers, counted by hand: 4 blocks of a bucket each, dp 2, one stage, 2
// micro-batches. The two rotating buffers take buckets 0, 2 and 1, 3: forward 0 gathers all four;
// backward 0 finds 3 and 2 still there and gathers 1 and 0; forward 1 finds 0 and 1 and gathers 2
// and 3; backward 1 gathers 1 and 0: ten gathers of a block's bucket, where ZeRO-2 gathers the
// whole stage (the kept buckets and four block buckets) once after the update. Both reduce-scatter
// the same gradients.
TEST(Planner, Zero3GathersEachBlockBucketWhereAPassNeedsIt) {
  Hardware hw;
  RunConfig c = small_config(2);
  c.model.n_layer = 4;
  c.parallel.bucket_mb = 64.0 * 4 / (1 << 20);   // a bucket per unit (the final LayerNorm's too)
  validate_run_config(c, 2);
  const ParamLayout layout(c.model, StageInfo::of(c.model, 0, 1), 1, 0, 2, bucket_elements(c.parallel));
  const std::vector<char> kept = ShardedParams::kept_gathered(layout);
  std::vector<size_t> block_buckets;
  for (size_t b = 0; b < kept.size(); ++b)
    if (!kept[b]) block_buckets.push_back(layout.buckets()[b].size);
  ASSERT_EQ(block_buckets.size(), 4u);
  for (size_t size : block_buckets) ASSERT_EQ(size, block_buckets[0]);
  const double block = double(block_buckets[0]);
  // Half of a bf16 element crosses each rank's link in a 2-rank all-gather.
  const double element_s = 0.5 * 2 / (hw.nvlink_gbps * 1e9);
  RunConfig zero3 = c;
  zero3.parallel.zero = 3;
  validate_run_config(zero3, 2);

  // GEMMs this fast hide nothing: six block gathers more than ZeRO-2's one of everything.
  hw.gemm_tflops = 1e12;
  EXPECT_NEAR(estimate_time(zero3, hw).dp_s - estimate_time(c, hw).dp_s, 6 * block * element_s,
              1e-9 * block * element_s);
  // GEMMs this slow hide every prefetched gather: what shows is the first forward's first bucket
  // (backward 0 and forward 1 start on buckets still there) and the embedding's bucket, which the
  // forward reads first and ZeRO-2 gathers first too.
  hw.gemm_tflops = 1e-6;
  EXPECT_NEAR(estimate_time(zero3, hw).dp_s - estimate_time(c, hw).dp_s, block * element_s, 1e-9 * block * element_s);
  // ZeRO-3 costs time: never less DP time than ZeRO-1 in either case.
  for (double tflops : {1e12, 400.0, 1e-6}) {
    hw.gemm_tflops = tflops;
    EXPECT_GE(estimate_time(zero3, hw).dp_s, estimate_time(small_config(1), hw).dp_s) << tflops;
  }
}

// A 1.5B-parameter GPT whose 25 heads and 47 layers leave 8 GPUs one layout, dp 8: where memory
// admits no ZeRO-2 layout the planner chooses ZeRO-3; where ZeRO-1 fits it is faster than ZeRO-3
// and chosen.
TEST(Planner, RankingChoosesZero3OnlyWhereMemoryNeedsIt) {
  Hardware hw;
  hw.gpus = 8;
  hw.memory_gib = 1e6;
  const RunConfig c = preset(47, 25, 1600, 64);
  double least_zero2 = 1e30, least_zero3 = 1e30;
  for (const Candidate& k : rank_layouts(c, hw)) {
    ASSERT_EQ(k.layout.dp, 8);
    (k.layout.zero == 3 ? least_zero3 : least_zero2) = std::min(k.layout.zero == 3 ? least_zero3 : least_zero2,
                                                                k.memory.total());
  }
  ASSERT_LT(least_zero3, least_zero2);
  hw.memory_gib = (least_zero3 + least_zero2) / 2 / double(1 << 30);
  std::vector<Candidate> ranked = rank_layouts(c, hw);
  ASSERT_TRUE(ranked.front().fits);
  EXPECT_EQ(ranked.front().layout.zero, 3);

  hw.memory_gib = 80;
  ranked = rank_layouts(c, hw);
  ASSERT_TRUE(ranked.front().fits);
  EXPECT_NE(ranked.front().layout.zero, 3);
  // Layout by layout, ZeRO-1 beats ZeRO-3 (it gathers the parameters once per step, not per pass).
  int compared = 0;
  for (const Candidate& one : ranked)
    for (const Candidate& three : ranked)
      if (one.layout.zero == 1 && three.layout.zero == 3 &&
          one.layout.micro_batch_size == three.layout.micro_batch_size) {
        EXPECT_GT(one.time.tokens_per_s, three.time.tokens_per_s) << "micro-batch " << one.layout.micro_batch_size;
        ++compared;
      }
  EXPECT_GT(compared, 0);
}

// zero_bubble against 1F1B on small_config at pp 2 (4 micro-batches of 32 tokens): the last stage
// is the slowest (a block and the head); per token its GEMMs do 6 * 49,984 + 6 * 128 * 64 FLOPs
// and attention 12 * 16 * 64, 361,344 in all, of which the weight gradients (W) are 2 * 49,984 +
// 2 * 128 * 64 = 116,352. ZB-H1's bubble is (p-1)(F + B - W) against 1F1B's (p-1)(F + B + W).
TEST(Planner, ZeroBubbleFillsTheBubbleWithWeightGradients) {
  Hardware hw;
  RunConfig c = small_config(0);
  c.parallel.dp = 1;
  c.parallel.pp = 2;
  validate_run_config(c, 2);
  RunConfig zb = c;
  zb.parallel.schedule = "zero_bubble";
  validate_run_config(zb, 2);
  const TimeEstimate one = estimate_time(c, hw), zero = estimate_time(zb, hw);
  const double weight_s = 116352.0 * 32 / (hw.gemm_tflops * 1e12);
  EXPECT_NEAR(zero.bubble_s, one.bubble_s - 2 * weight_s, 1e-18);
  EXPECT_DOUBLE_EQ(zero.compute_s, one.compute_s);
  EXPECT_NEAR(one.step_s - zero.step_s, 2 * weight_s, 1e-18);
  EXPECT_NEAR(zero.bubble, zero.bubble_s / (4 * one.bubble_s + zero.bubble_s), 1e-15);
  // Without communication time, the ratio is (F + B - W) / (F + B + W) of the FLOPs.
  hw.nvlink_gbps = 1e15;
  EXPECT_NEAR(estimate_time(zb, hw).bubble_s / estimate_time(c, hw).bubble_s, (361344.0 - 2 * 116352) / 361344, 1e-9);

  // Memory: what the trainer allocates for the plan: the last stage defers its first weight pass,
  // so it holds two micro-batches' activations (1F1B's peak, stage 0's), the next input in the
  // receive inbox until the deferred pass frees a slot (one (B, T, C) activation), and two
  // weight-gradient stashes (GptStage::stash_bytes: the four GEMM output gradients go into the
  // slot's dead activations, leaving the fp32 bias and norm gradients of its block: 6C + fc + qkv
  // = 832 floats).
  const MemoryEstimate m1 = estimate_memory(c, hw), mz = estimate_memory(zb, hw);
  EXPECT_EQ(m1.stashed, 0);
  EXPECT_EQ(mz.stage, 1);
  EXPECT_EQ(mz.in_flight, 2);
  EXPECT_EQ(mz.stashed, 2);
  const StageInfo last = StageInfo::of(c.model, 1, 2);
  const size_t slot = GptStage::slot_bytes(c.model, last, 1, 2, DType::BF16, activation_options(c));
  const size_t stash = GptStage::stash_bytes(c.model, last, 1, 2, DType::BF16);
  EXPECT_EQ(stash, 4u * (6 * 64 + 256 + 192));
  EXPECT_EQ(GptStage::inbox_bytes(c.model, 2, DType::BF16), 2u * 16 * 64 * 2);
  EXPECT_DOUBLE_EQ(mz.activations, 2.0 * slot + 2.0 * stash + GptStage::inbox_bytes(c.model, 2, DType::BF16));
  EXPECT_GT(mz.total(), m1.total());
}

// zero_bubble's weight-gradient stash keeps its output gradients over activations of the same
// micro-batch's slot that are dead from backward_input on (GptStage::stash_in_slot), so its own
// buffer is what the slot cannot hold. GPT 1.44B (L 48, C 1536, T 1024) at pp 4, B 8: N = 8,192
// rows, 12 blocks a stage; a (N, C) bf16 gradient is 25,165,824 bytes. Without recompute and
// sequence parallelism only the fp32 bias and norm gradients are left, per block six C-vectors,
// fc = 4C and qkv = 3C (multiples of the 256-byte arena alignment).
TEST(Planner, ZeroBubbleStashKeepsOnlyWhatTheSlotCannotHold) {
  RunConfig c = preset(48, 24, 1536, 64);
  c.train.micro_batch_size = 8;
  c.parallel.dp = 1;
  c.parallel.pp = 4;
  validate_run_config(c, 4);
  const StageInfo st = StageInfo::of(c.model, 0, 4);
  const size_t C = 1536, N = 8192, NC = N * C * 2, blocks = 12;
  const size_t fp32_tp1 = blocks * 4 * (6 * C + 4 * C + 3 * C), fp32_tp2 = blocks * 4 * (6 * C + 2 * C + 3 * C / 2);
  EXPECT_EQ(GptStage::stash_bytes(c.model, st, 1, 8, DType::BF16), fp32_tp1);
  ActivationOptions o;
  // Sequence parallelism: x2 and x3 hold this rank's rows only; dqkv and dfch still fit.
  o.sequence_parallel = true;
  EXPECT_EQ(GptStage::stash_bytes(c.model, st, 2, 8, DType::BF16, o), fp32_tp2 + 2 * blocks * NC);
  // Selective recompute redoes LN2 from x2 and the next block's LN1 from x3 (the top block's
  // output is read by no weight pass); GPT-2's fch is not read again.
  o = ActivationOptions{};
  o.recompute.selective = true;
  EXPECT_EQ(GptStage::stash_bytes(c.model, st, 1, 8, DType::BF16, o), fp32_tp1 + (2 * blocks - 1) * NC);
  // Full recompute of every block: the slot keeps outputs only, and the next block's weight pass
  // recomputes from them; the top block's dx3 alone goes into its output.
  o.recompute = RecomputePlan{12, false};
  EXPECT_EQ(GptStage::stash_bytes(c.model, st, 1, 8, DType::BF16, o),
            fp32_tp1 + (2 * blocks - 1) * NC + blocks * N * (4 * C + 3 * C) * 2);

  // The activation memory of each stage, 1F1B's against zero_bubble's (what the trainer allocates
  // for the plans, m = 8): stage r holds min(pp - r, m) slots under 1F1B. zero_bubble holds pp = 4
  // on every stage (the next input waits in the receive inbox, one (B, T, C) activation, on
  // stages > 0, whose deferred weight passes free a slot only after it arrives) and r + 1 stashes
  // of the fp32 part (0.9 MiB each). So the busiest, the last, needs 1F1B's busiest (stage 0) +
  // four stashes + the inbox: 0.7% more.
  const ActivationOptions acts = activation_options(c);
  const size_t stash = GptStage::stash_bytes(c.model, st, 1, 8, DType::BF16, acts);
  for (int r = 0; r < 4; ++r) {
    const StageInfo sr = StageInfo::of(c.model, r, 4);
    EXPECT_EQ(GptStage::stash_bytes(c.model, sr, 1, 8, DType::BF16, acts), stash);
    const std::vector<Action> one = make_plan(ScheduleKind::OneFOneB, 4, r, 8);
    const std::vector<Action> zb = make_plan(ScheduleKind::ZeroBubble, 4, r, 8);
    EXPECT_EQ(PipelineExecutor::slots_needed(one), 4 - r);
    EXPECT_EQ(PipelineExecutor::slots_needed(zb), 4);
    EXPECT_EQ(PipelineExecutor::receives_into_inbox(zb), r > 0);
    EXPECT_FALSE(PipelineExecutor::receives_into_inbox(one));
    EXPECT_EQ(PipelineExecutor::stashes_needed(zb), r + 1);
  }
  Hardware hw;
  RunConfig zbc = c;
  zbc.parallel.schedule = "zero_bubble";
  validate_run_config(zbc, 4);
  const MemoryEstimate m1 = estimate_memory(c, hw), mz = estimate_memory(zbc, hw);
  const double slot = GptStage::slot_bytes(c.model, StageInfo::of(c.model, 3, 4), 1, 8, DType::BF16, acts);
  EXPECT_EQ(m1.stage, 0);
  EXPECT_EQ(mz.stage, 3);
  EXPECT_DOUBLE_EQ(m1.activations, 4 * GptStage::slot_bytes(c.model, st, 1, 8, DType::BF16, acts));
  EXPECT_DOUBLE_EQ(mz.activations, 4 * slot + 4.0 * stash + GptStage::inbox_bytes(c.model, 8, DType::BF16));
  EXPECT_LT(mz.activations, 1.01 * m1.activations);
}

// The ranking lists zero_bubble beside 1F1B and GPipe where pp > 1, never with ZeRO-3 (refused);
// with three micro-batches that dp 2 cannot split, 2 GPUs run pp 2, and zero_bubble is best.
TEST(Planner, RankingIncludesZeroBubbleWithPipelines) {
  Hardware hw;
  hw.gpus = 2;
  RunConfig c = preset(4, 25, 1600, 3);
  std::vector<Candidate> ranked = rank_layouts(c, hw);
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked.front().layout.pp, 2);
  EXPECT_EQ(ranked.front().layout.schedule, "zero_bubble");
  hw.gpus = 8;
  ranked = rank_layouts(preset(12, 12, 768, 64), hw);
  int zero_bubble = 0;
  for (const Candidate& z : ranked) {
    if (z.layout.schedule != "zero_bubble") continue;
    ++zero_bubble;
    EXPECT_GT(z.layout.pp, 1);
    EXPECT_LT(z.layout.zero, 3);
    Layout twin = z.layout;
    twin.schedule = "1f1b";
    for (const Candidate& o : ranked)
      if (o.layout.dp == twin.dp && o.layout.tp == twin.tp && o.layout.pp == twin.pp && o.layout.zero == twin.zero &&
          o.layout.micro_batch_size == twin.micro_batch_size && o.layout.schedule == "1f1b") {
        EXPECT_GT(z.time.tokens_per_s, o.time.tokens_per_s);
        EXPECT_GE(z.memory.total(), o.memory.total());
      }
  }
  EXPECT_GT(zero_bubble, 0);
}

// Four GPUs as two nodes of two (parallel.gpus_per_node = 2, or `trident plan --gpus-per-node 2`):
// where memory needs tensor parallelism (long sequences, one stage: 5 layers), the planner
// keeps the TP pairs inside the nodes (tp 2 x dp 2) rather than tp 4 across them.
TEST(Planner, RankingKeepsTensorParallelismInsideANode) {
  Hardware hw;
  hw.gpus = 4;
  hw.gpus_per_node = 2;
  hw.memory_gib = 1e6;
  RunConfig c = preset(5, 16, 2048, 4);
  c.model.seq_len = 8192;
  c.model.n_positions = 8192;
  double least_tp1 = 1e30, least_tp2 = 1e30;
  for (const Candidate& k : rank_layouts(c, hw)) {
    if (k.layout.tp == 1) least_tp1 = std::min(least_tp1, k.memory.total());
    if (k.layout.tp == 2) least_tp2 = std::min(least_tp2, k.memory.total());
  }
  ASSERT_LT(least_tp2, least_tp1);
  hw.memory_gib = (least_tp1 + least_tp2) / 2 / double(1 << 30);
  const std::vector<Candidate> ranked = rank_layouts(c, hw);
  ASSERT_TRUE(ranked.front().fits);
  const Layout& best = ranked.front().layout;
  EXPECT_EQ(best.tp, 2);
  EXPECT_EQ(best.dp, 2);
  const Topology topo(best.dp, best.tp, best.pp);
  for (int r = 0; r < 4; ++r)
    for (int q : topo.group(Axis::TP, r)) EXPECT_EQ(q / 2, r / 2) << "TP group of rank " << r << " spans nodes";
  // tp 4 fits too (it needs less memory) but crosses the nodes at --ib-gbps.
  bool tp4_fits = false;
  for (const Candidate& k : ranked) tp4_fits = tp4_fits || (k.layout.tp == 4 && k.fits);
  EXPECT_TRUE(tp4_fits);
}

}  // namespace
}  // namespace trident
