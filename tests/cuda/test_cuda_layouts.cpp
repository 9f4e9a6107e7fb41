// Multi-GPU layouts (NCCL) against one GPU: tp2 (also with parallel.tp_overlap, with sequence
// parallelism, with parallel.tp_fused_sum and with parallel.tp_split_layernorm_bwd), pp2 under
// both schedules, dp2 with ZeRO 0 and 1 train 20 steps on the same global batches; losses must
// agree within bf16 tolerance. On 4 GPUs (cuda_layouts_4gpu) tp 4 with sequence parallelism, with
// and without fused sums. Also one whole step of the CUDA backend against the CPU backend
// from the same initial weights, and generation with graph-replayed decode steps against without.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "learnable_source.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/backend/cuda_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/model/generator.hpp"
#include "trident/parallel/nccl/nccl_comm.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

namespace trident {
namespace {

constexpr int kSteps = 20;
// bf16 activations: different reduction orders (TP all-reduce, DP sums, pipeline) change the
// rounding of every step; the trajectories stay within 1% of each other over 20 steps.
constexpr double kLayoutTol = 1e-2;

RunConfig config() {
  RunConfig c = test::tiny_config();
  c.model.n_layer = 4;
  c.model.n_embd = 256;
  c.model.vocab_size = 1000;
  c.model.seq_len = 128;
  c.train.steps = kSteps;
  c.train.micro_batch_size = 4;
  c.train.global_batch_size = 16;
  c.train.lr = 3e-3;
  c.train.warmup_steps = 5;
  c.parallel.bucket_mb = 1;
  return c;
}

// The same size as a Llama: RMSNorm, SwiGLU, RoPE, 2 key/value heads for 4 query heads, untied.
RunConfig llama_config() {
  RunConfig c = config();
  c.model.arch = "llama";
  c.model.n_kv_head = 2;
  c.model.ffn_hidden_size = 704;
  return c;
}

struct Result {
  std::vector<double> losses;
  GatheredParams grads;
};

Result train(RunConfig cfg, MPI_Comm comm, bool cuda, int steps) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::unique_ptr<Backend> be = cuda ? make_cuda_backend(rank % cuda_device_count()) : make_cpu_backend();
  Topology topo = test::validated_topology(cfg, comm);
  const ParallelConfig& p = cfg.parallel;
  ParallelGroups g = cuda ? make_nccl_groups(split_axes(comm, topo), topo, p.timeout_s, p.tp_comm_ctas, p.dp_comm_ctas)
                          : test::mpi_groups(cfg, comm);
  test::LearnableSource data(cfg.model.seq_len, cfg.model.vocab_size, 11);
  Trainer trainer(cfg, g, *be, data);
  Result r;
  for (int s = 0; s < steps; ++s) r.losses.push_back(trainer.train_step(s).loss);
  trainer.sync_parameters();
  if (cfg.parallel.zero < 2)   // ZeRO-2 keeps no whole gradient to gather
    r.grads = gather_like_params(trainer.model(), trainer.model().grads(), g);
  return r;
}

bool have_gpus(int n) {
  if (cuda_device_count() >= n) return true;
  std::printf("no GPU: CUDA tests skipped (need %d, found %d)\n", n, cuda_device_count());
  return false;
}

TEST(CudaModel, OneStepMatchesTheCpuBackend) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!have_gpus(1)) GTEST_SKIP() << "no GPU: CUDA tests skipped";
  if (rank != 0) return;
  Result gpu = train(config(), MPI_COMM_SELF, true, 1);
  Result cpu = train(config(), MPI_COMM_SELF, false, 1);
  const double loss_err = std::fabs(gpu.losses[0] - cpu.losses[0]) / cpu.losses[0];
  std::printf("  one step: loss cpu %.6f cuda %.6f (rel %.2e)\n", cpu.losses[0], gpu.losses[0], loss_err);
  EXPECT_LE(loss_err, 5e-3);   // bf16 weights and activations against fp32
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, want] : cpu.grads.tensors) {
    double e = test::rel_l2(gpu.grads.tensors.at(name), want);
    // The key bias has an exactly zero gradient (softmax shift invariance): only noise to compare.
    if (name.find("attn.qkv.bias") != std::string::npos) continue;
    if (e > worst) {
      worst = e;
      worst_name = name;
    }
  }
  std::printf("  one step: worst gradient rel L2 %.2e (%s)\n", worst, worst_name.c_str());
  EXPECT_LE(worst, 5e-2);   // bf16 activations through 4 blocks: a few 2^-8 roundings per path
}

// Generation on one GPU with the decode steps replayed as CUDA graphs (Backend::make_replay)
// against the same generation with the op timers on, which keeps every step's ops queued one by
// one: the same tokens and log-probabilities bit for bit, so each replay read that step's tokens,
// positions and cache. More prompts than slots and a stop token make the batch ragged: prompt
// feeds between decode steps, and decode steps of 4, 3, 2 and 1 sequences (row counts 4, 2, 1).
TEST(CudaModel, GenerationReplaysDecodeStepsExactly) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!have_gpus(1)) GTEST_SKIP() << "no GPU: CUDA tests skipped";
  if (rank != 0) return;
  for (bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt2");
    RunConfig cfg = llama ? llama_config() : config();
    std::unique_ptr<Backend> be = make_cuda_backend(0);
    Topology topo = test::validated_topology(cfg, MPI_COMM_SELF);
    ParallelGroups g = make_nccl_groups(split_axes(MPI_COMM_SELF, topo), topo, cfg.parallel.timeout_s);
    GptStage model(cfg.model, g, *be, 1, /*n_slots=*/0, bucket_elements(cfg.parallel), /*with_grads=*/false);
    model.init_params(cfg.train.seed);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 7; ++i) prompts.push_back(std::vector<int32_t>(3 + 5 * i % 11, 17 * i + 5));
    GenerationParams p;
    p.sampling.temperature = 1.0;
    p.max_new_tokens = 40;
    p.stop_tokens = {7, 11};
    auto run = [&](bool timed) {
      be->set_profiling(timed);
      Generator gen(model, 4, 64);
      gen.generate(prompts, p);   // each row count's first step runs plainly, the next are captured
      std::vector<Completion> out = gen.generate(prompts, p);
      be->set_profiling(false);
      be->take_profile();
      return out;
    };
    const std::vector<Completion> plain = run(true), replayed = run(false);
    size_t tokens = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(replayed[i].tokens, plain[i].tokens) << "prompt " << i;
      EXPECT_EQ(replayed[i].logprobs, plain[i].logprobs) << "prompt " << i;
      tokens += plain[i].tokens.size();
    }
    std::printf("  %s: %zu tokens generated, replayed equal to plain\n", llama ? "llama" : "gpt2", tokens);
  }
}

TEST(CudaLayouts, TwoGpuLayoutsMatchOneGpu) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (!have_gpus(2) || world != 2) GTEST_SKIP() << "no GPU: CUDA tests skipped (needs 2 GPUs and 2 ranks)";
  std::vector<double> ref;
  if (rank == 0) ref = train(config(), MPI_COMM_SELF, true, kSteps).losses;
  MPI_Barrier(MPI_COMM_WORLD);
  // The tp_overlap cases also run with an SM margin for the GEMMs beside TP collectives and
  // the TP communicator capped at 8 CTAs (parallel.tp_sm_margin, parallel.tp_comm_ctas), the
  // ZeRO-1 case with the DP communicator capped at 8 CTAs (parallel.dp_comm_ctas); tp2 also
  // with sequence parallelism (alone and with tp_overlap), and with fused sums
  // (parallel.tp_fused_sum: copy-engine partials added by the LayerNorms), alone and with
  // tp_overlap; those are also compared with plain tp2, and fused sums under sequence parallelism
  // with sequence parallelism's losses (bit for bit without tp_overlap).
  struct L {
    int tp, pp, zero;
    const char* schedule;
    bool tp_overlap = false, sp = false, fused = false, split = false;
  };
  std::vector<double> plain_tp2, sp_tp2[2];   // sp_tp2[tp_overlap]
  for (L l : {L{2, 1, 0, "1f1b"}, L{2, 1, 0, "1f1b", true}, L{2, 1, 0, "1f1b", false, true},
              L{2, 1, 0, "1f1b", true, true},
              L{2, 1, 0, "1f1b", false, false, true}, L{2, 1, 0, "1f1b", true, false, true},
              L{2, 1, 0, "1f1b", true, false, true, true}, L{2, 1, 0, "1f1b", false, true, true},
              L{2, 1, 0, "1f1b", true, true, true}, L{1, 2, 0, "1f1b"},
              L{1, 2, 0, "gpipe"}, L{1, 1, 0, "1f1b"}, L{1, 1, 1, "1f1b"}}) {
    RunConfig c = config();
    c.parallel.tp = l.tp;
    c.parallel.pp = l.pp;
    c.parallel.zero = l.zero;
    c.parallel.schedule = l.schedule;
    c.parallel.tp_overlap = l.tp_overlap;
    c.parallel.sequence_parallel = l.sp;
    c.parallel.tp_fused_sum = l.fused;
    c.parallel.tp_split_layernorm_bwd = l.split;
    if (l.tp_overlap && !l.fused) c.parallel.tp_sm_margin = c.parallel.tp_comm_ctas = 8;
    if (l.zero) c.parallel.dp_comm_ctas = 8;
    const std::string name = str("tp", l.tp, " pp", l.pp, " dp", 2 / (l.tp * l.pp), " zero", l.zero, " ", l.schedule,
                                 l.split        ? " tp_overlap fused split LN bwd"
                                 : l.fused      ? str(l.sp ? " sp" : "", l.tp_overlap ? " tp_overlap" : "", " fused sums")
                                 : l.tp_overlap ? (l.sp ? " sp tp_overlap margin 8 ctas 8"
                                                        : " tp_overlap margin 8 ctas 8")
                                 : l.sp         ? " sequence parallel"
                                 : l.zero       ? " dp ctas 8"
                                                : "");
    SCOPED_TRACE(name);
    std::vector<double> got = train(c, MPI_COMM_WORLD, true, kSteps).losses;
    if (rank != 0) continue;
    double worst = 0;
    for (int s = 0; s < kSteps; ++s) worst = std::max(worst, std::fabs(got[s] - ref[s]) / ref[s]);
    std::printf("  %-24s losses %.4f -> %.4f, worst rel diff to 1 GPU %.2e\n", name.c_str(), got.front(), got.back(),
                worst);
    if (l.tp == 2 && !l.tp_overlap && !l.sp && !l.fused) plain_tp2 = got;
    if (l.sp && !l.fused) sp_tp2[l.tp_overlap] = got;
    if (l.sp && l.fused) {   // the pair's reduce-scatter as exchanged partials: the same sums
      double to_sp = 0;
      for (int s = 0; s < kSteps; ++s) to_sp = std::max(to_sp, std::fabs(got[s] - sp_tp2[l.tp_overlap][s]));
      std::printf("    largest loss difference to sequence parallelism with NCCL: %.3e\n", to_sp);
      // (With tp_overlap the NCCL run plans its GEMMs with an SM margin, which may change their bits.)
      if (!l.tp_overlap) EXPECT_EQ(to_sp, 0.0) << "fused sums must round as the reduce-scatter does";
    }
    if (l.fused && !l.split && !l.sp) {   // the split backward sums the LayerNorm gradients in another order
      double to_plain = 0;
      for (int s = 0; s < kSteps; ++s) to_plain = std::max(to_plain, std::fabs(got[s] - plain_tp2[s]));
      std::printf("    largest loss difference to plain tp2: %.3e\n", to_plain);
      EXPECT_EQ(to_plain, 0.0) << "fused sums must round as the all-reduce does";
    }
    EXPECT_LE(worst, kLayoutTol);
    EXPECT_LT(got.back(), got.front() - 1.0) << "loss does not fall";
  }
}

// Llama on 2 GPUs against 1 GPU: tp 2 (the key/value heads split), with sequence parallelism and
// selective recompute, with tp_overlap (alone and with sequence parallelism), with fused sums
// (parallel.tp_fused_sum: copy-engine partials added by the RMSNorms; alone and with tp_overlap,
// each bit for bit the losses of the same layout without them) and with the split norm backward
// too, pp 2 under 1F1B and zero_bubble (whose split backward must give 1F1B's losses bit for
// bit), and dp 2 under ZeRO-1 and ZeRO-2.
TEST(CudaLayouts, LlamaTwoGpuLayoutsMatchOneGpu) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (!have_gpus(2) || world != 2) GTEST_SKIP() << "no GPU: CUDA tests skipped (needs 2 GPUs and 2 ranks)";
  std::vector<double> ref;
  if (rank == 0) ref = train(llama_config(), MPI_COMM_SELF, true, kSteps).losses;
  MPI_Barrier(MPI_COMM_WORLD);
  struct L {
    const char* name;
    void (*apply)(RunConfig&);
  };
  const L layouts[] = {
      {"tp2", [](RunConfig& c) { c.parallel.tp = 2; }},
      {"tp2 sp selective recompute",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.sequence_parallel = true;
         c.parallel.recompute = "selective";
       }},
      {"tp2 sp fused selective recompute",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.sequence_parallel = c.parallel.tp_fused_sum = true;
         c.parallel.recompute = "selective";
       }},
      {"tp2 tp_overlap",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.tp_overlap = true;
       }},
      {"tp2 sp tp_overlap",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.sequence_parallel = true;
         c.parallel.tp_overlap = true;
       }},
      {"tp2 fused sums",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.tp_fused_sum = true;
       }},
      {"tp2 tp_overlap fused sums",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.tp_overlap = c.parallel.tp_fused_sum = true;
       }},
      {"tp2 tp_overlap fused split norm bwd",
       [](RunConfig& c) {
         c.parallel.tp = 2;
         c.parallel.tp_overlap = c.parallel.tp_fused_sum = c.parallel.tp_split_layernorm_bwd = true;
       }},
      {"pp2 1f1b", [](RunConfig& c) { c.parallel.pp = 2; }},
      {"pp2 zero_bubble",
       [](RunConfig& c) {
         c.parallel.pp = 2;
         c.parallel.schedule = "zero_bubble";
       }},
      {"dp2 zero1", [](RunConfig& c) { c.parallel.zero = 1; }},
      {"dp2 zero2", [](RunConfig& c) { c.parallel.zero = 2; }},
  };
  // The fused sums' layouts and the layouts that give their losses bit for bit.
  const std::map<std::string, std::string> same_bits_as = {
      {"tp2 fused sums", "tp2"},
      {"tp2 tp_overlap fused sums", "tp2 tp_overlap"},
      {"tp2 sp fused selective recompute", "tp2 sp selective recompute"}};
  std::map<std::string, std::vector<double>> losses;
  for (const L& l : layouts) {
    RunConfig c = llama_config();
    l.apply(c);
    SCOPED_TRACE(l.name);
    std::vector<double> got = train(c, MPI_COMM_WORLD, true, kSteps).losses;
    if (rank != 0) continue;
    losses[l.name] = got;
    if (auto same = same_bits_as.find(l.name); same != same_bits_as.end()) {
      const std::vector<double>& want = losses.at(same->second);
      double to_plain = 0;
      for (int s = 0; s < kSteps; ++s) to_plain = std::max(to_plain, std::fabs(got[s] - want[s]));
      std::printf("    largest loss difference to %s: %.3e\n", same->second.c_str(), to_plain);
      EXPECT_EQ(to_plain, 0.0) << "fused sums must round as the all-reduce does";
    }
    if (std::string(l.name) == "pp2 zero_bubble") {
      const std::vector<double>& pp2_1f1b = losses.at("pp2 1f1b");
      double to_1f1b = 0;
      for (int s = 0; s < kSteps; ++s) to_1f1b = std::max(to_1f1b, std::fabs(got[s] - pp2_1f1b[s]));
      std::printf("    largest loss difference to pp2 1f1b: %.3e\n", to_1f1b);
      EXPECT_EQ(to_1f1b, 0.0) << "zero_bubble's weight-gradient pass must give 1F1B's gradients";
    }
    double worst = 0;
    for (int s = 0; s < kSteps; ++s) worst = std::max(worst, std::fabs(got[s] - ref[s]) / ref[s]);
    std::printf("  llama %-28s losses %.4f -> %.4f, worst rel diff to 1 GPU %.2e\n", l.name, got.front(),
                got.back(), worst);
    EXPECT_LE(worst, kLayoutTol);
    EXPECT_LT(got.back(), got.front() - 1.0) << "loss does not fall";
  }
}

// Sequence parallelism on 4 GPUs against 1 GPU, GPT-2 and Llama (its 2 key/value heads
// replicated over the pairs of ranks): with NCCL's reduce-scatters and all-gathers, and with fused
// sums (parallel.tp_fused_sum: each rank's rows of a partial sent to that rank over the pair links'
// copy engines, the other ranks' partials added up in rank order, then by the norms), alone, with
// tp_overlap and with selective recompute. Registered on 4 ranks (cuda_layouts_4gpu); where fewer
// GPUs or ranks are there it skips.
TEST(CudaLayouts, FourGpuSequenceParallelMatchesOneGpu) {
  int rank = 0, world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (!have_gpus(1)) GTEST_SKIP() << "no GPU: CUDA tests skipped";
  // Not have_gpus(4): its "no GPU" line would mark the 2-GPU run of this binary skipped.
  if (cuda_device_count() < 4 || world != 4) GTEST_SKIP() << "needs 4 GPUs and 4 ranks (cuda_layouts_4gpu)";
  for (const bool llama : {false, true}) {
    const RunConfig base = llama ? llama_config() : config();
    std::vector<double> ref;
    if (rank == 0) ref = train(base, MPI_COMM_SELF, true, kSteps).losses;
    MPI_Barrier(MPI_COMM_WORLD);
    struct L {
      const char* name;
      bool fused, overlap;
      const char* recompute;
    };
    std::vector<double> sp;
    for (const L& l : {L{"tp4 sp", false, false, "none"}, L{"tp4 sp fused sums", true, false, "none"},
                       L{"tp4 sp tp_overlap fused sums", true, true, "none"},
                       L{"tp4 sp fused selective recompute", true, false, "selective"}}) {
      RunConfig c = base;
      c.parallel.tp = 4;
      c.parallel.sequence_parallel = true;
      c.parallel.tp_fused_sum = l.fused;
      c.parallel.tp_overlap = l.overlap;
      c.parallel.recompute = l.recompute;
      c.train.micro_batch_size = 8;   // tp_overlap halves each rank's rows: B divides by 2 x tp
      SCOPED_TRACE(l.name);
      std::vector<double> got = train(c, MPI_COMM_WORLD, true, kSteps).losses;
      if (rank != 0) continue;
      double worst = 0, to_sp = 0;
      for (int s = 0; s < kSteps; ++s) worst = std::max(worst, std::fabs(got[s] - ref[s]) / ref[s]);
      if (sp.empty()) sp = got;
      for (int s = 0; s < kSteps; ++s) to_sp = std::max(to_sp, std::fabs(got[s] - sp[s]) / sp[s]);
      std::printf("  %s %-34s losses %.4f -> %.4f, worst rel diff to 1 GPU %.2e, to tp4 sp %.2e\n",
                  llama ? "llama" : "gpt2", l.name, got.front(), got.back(), worst, to_sp);
      EXPECT_LE(worst, kLayoutTol);
      EXPECT_LT(got.back(), got.front() - 1.0) << "loss does not fall";
    }
  }
}

}  // namespace
}  // namespace trident
