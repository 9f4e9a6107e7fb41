// Runs a small GPT-2 or Llama on one rank and writes what the PyTorch check needs: the initial
// weights, the token batches, the logits and loss at initialisation, every parameter gradient of
// the first step, and the loss of each AdamW step. Output: DIR/manifest.json + DIR/data.bin.
//   dump_reference DIR [cpu|cuda] [STEPS] [gpt2|llama|llama-qkv-bias|llama-sft|llama-dpo|llama-ipo|llama-reward]
// The Llama has grouped-query attention (4 query, 2 key/value heads) and an untied head.
// llama-sft trains it with --task sft on samples whose targets are partly masked (the mask is
// dumped as target_mask): the loss is the mean over the trained targets of each global batch.
// llama-dpo (cpu) trains it with --task dpo on those samples as pairs (2i chosen, 2i + 1 rejected)
// against a reference model of another initialisation (dumped as ref.NAME), and dumps each step's
// reward accuracy, mean margin and mean chosen and rejected rewards. llama-ipo does the same with
// dpo.loss = ipo (the squared loss over per-token log-ratios).
// llama-reward trains it as a reward model (--task reward: score head, pairs of samples 2i, 2i + 1
// on the same masked samples): the scores of the first micro-batch replace the logits.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "masked_learnable_source.hpp"
#include "reference_dump.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#if TRIDENT_HAVE_CUDA
#include "trident/backend/cuda_backend.hpp"
#endif
#include "trident/config/parse.hpp"
#include "trident/train/gather.hpp"
#include "trident/train/trainer.hpp"

using namespace trident;

namespace {

std::unique_ptr<Backend> make_backend(const std::string& kind) {
#if TRIDENT_HAVE_CUDA
  if (kind == "cuda") return make_cuda_backend(0);
#endif
  if (kind != "cpu") {
    std::fprintf(stderr, "dump_reference: backend %s is not built\n", kind.c_str());
    std::exit(2);
  }
  return make_cpu_backend();
}

void run(const std::string& dir, const std::string& backend, int steps, const std::string& model) {
  RunConfig c;
  c.backend = backend;
  c.model.n_layer = 2;
  c.model.n_head = 4;
  c.model.n_embd = 64;
  if (model != "gpt2") {
    c.model.arch = "llama";
    c.model.n_kv_head = 2;
    c.model.ffn_hidden_size = 96;
    c.model.rope_theta = 500.0;   // small, so that the rotation differs across the 24 positions
    c.model.qkv_bias = model == "llama-qkv-bias";
  }
  if (model == "llama-sft") c.task = "sft";
  if (model == "llama-dpo") {
    c.task = "dpo";
    c.dpo.beta = 0.5;
    c.dpo.label_smoothing = 0.1;
  }
  if (model == "llama-ipo") {
    c.task = "dpo";
    c.dpo.beta = 0.5;
    c.dpo.loss = "ipo";
  }
  if (model == "llama-reward") c.task = "reward";
  c.model.vocab_size = 101;   // not a multiple of anything: exercises the padded vocabulary
  c.model.seq_len = 24;
  c.model.n_positions = 32;
  c.train.steps = steps;
  c.train.micro_batch_size = 4;
  c.train.global_batch_size = 8;   // two micro-batches: gradient accumulation
  c.train.lr = 3e-3;
  c.train.min_lr = 3e-4;
  c.train.warmup_steps = 3;
  c.train.weight_decay = 0.1;
  c.train.grad_clip = 1.0;
  c.parallel.timeout_s = 60;
  ParallelGroups g = test::mpi_groups(c, MPI_COMM_SELF);

  const int B = c.train.micro_batch_size, T = c.model.seq_len, V = c.model.vocab_size, G = c.train.global_batch_size;
  std::unique_ptr<Backend> be = make_backend(backend);
  test::MaskedLearnableSource masked(T, V, 2024);
  test::LearnableSource plain(T, V, 2024);
  BatchSource& data = c.task == "pretrain" ? static_cast<BatchSource&>(plain) : masked;
  Trainer trainer(c, g, *be, data);
  test::ReferenceDump dump(dir);
  if (c.task == "dpo") {
    constexpr uint64_t kReferenceSeed = 99;
    GptStage reference(c.model, g, *be, B, 1, bucket_elements(c.parallel), false);
    reference.init_params(kReferenceSeed);
    for (const auto& [name, v] : gather_params(reference, g).tensors)
      dump.add("ref." + name, v, reference.layout().get(name).global_shape);
    trainer.set_reference_weights(test::initial_params(c, g, *be, kReferenceSeed));
  }
  dump.manifest()["config"] = {{"n_layer", c.model.n_layer}, {"n_head", c.model.n_head}, {"n_embd", c.model.n_embd},
                               {"vocab_size", V}, {"seq_len", T}, {"n_positions", c.model.n_positions},
                               {"micro_batch_size", B}, {"global_batch_size", G}, {"steps", c.train.steps},
                               {"lr", c.train.lr}, {"min_lr", c.train.min_lr}, {"warmup_steps", c.train.warmup_steps},
                               {"weight_decay", c.train.weight_decay}, {"beta1", c.train.beta1},
                               {"beta2", c.train.beta2}, {"eps", c.train.eps}, {"grad_clip", c.train.grad_clip},
                               {"ln_eps", c.model.norm_eps}, {"backend", backend}, {"arch", c.model.arch},
                               {"n_kv_head", c.model.kv_heads()}, {"ffn_hidden_size", c.model.ffn()},
                               {"rope_theta", c.model.rope_theta}, {"qkv_bias", c.model.qkv_bias},
                               {"tied", c.model.tied()}, {"sft", c.task == "sft"}, {"reward", c.task == "reward"},
                               {"dpo", c.task == "dpo"}, {"dpo_beta", c.dpo.beta},
                               {"dpo_label_smoothing", c.dpo.label_smoothing}, {"dpo_loss", c.dpo.loss}};

  std::vector<int32_t> tokens(static_cast<size_t>(c.train.steps) * G * (T + 1));
  data.samples(0, c.train.steps * G, tokens.data());
  dump.add("tokens", std::vector<float>(tokens.begin(), tokens.end()), {c.train.steps * G, T + 1});
  if (data.masks_targets()) {
    std::vector<uint8_t> mask(static_cast<size_t>(c.train.steps) * G * T);
    data.target_mask(0, c.train.steps * G, mask.data());
    dump.add("target_mask", std::vector<float>(mask.begin(), mask.end()), {c.train.steps * G, T});
  }

  std::vector<int32_t> inputs(B * T), targets(B * T);
  std::vector<uint8_t> mask(B * T, 1);
  if (data.masks_targets()) data.target_mask(0, B, mask.data());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      inputs[b * T + t] = tokens[b * (T + 1) + t];
      targets[b * T + t] = mask[b * T + t] ? tokens[b * (T + 1) + t + 1] : kIgnoredTarget;
    }
  trainer.model().set_tokens(0, inputs.data(), targets.data());
  if (c.task == "reward") {
    // The scores need the targets' mask (it places them); the forward's loss sums are dropped.
    trainer.model().forward(0, false, 0.0f, UnitDone{});
    dump.add("scores0", trainer.model().last_scores(), {B});
    trainer.model().zero_loss_sums();
  } else {
    dump.add("logits0", trainer.model().forward_logits(0), {B * T, V});
  }

  for (const auto& [name, v] : gather_params(trainer.model(), g).tensors) {
    const ParamInfo& p = trainer.model().layout().get(name);
    dump.add("param." + name, v, p.global_shape);
  }
  std::vector<float> losses, lrs, norms, accuracy, margin, chosen, rejected;
  for (int s = 0; s < c.train.steps; ++s) {
    StepStats st = trainer.train_step(s);
    losses.push_back(static_cast<float>(st.loss));
    lrs.push_back(static_cast<float>(st.lr));
    norms.push_back(static_cast<float>(st.grad_norm));
    accuracy.push_back(static_cast<float>(st.accuracy));
    margin.push_back(static_cast<float>(st.margin));
    chosen.push_back(static_cast<float>(st.chosen_reward));
    rejected.push_back(static_cast<float>(st.rejected_reward));
    if (s == 0) {
      trainer.sync_parameters();
      for (const auto& [name, v] : gather_like_params(trainer.model(), trainer.model().grads(), g).tensors)
        dump.add("grad." + name, v, trainer.model().layout().get(name).global_shape);
    }
  }
  dump.add("losses", losses, {c.train.steps});
  dump.add("lrs", lrs, {c.train.steps});
  dump.add("grad_norms", norms, {c.train.steps});
  if (c.task == "dpo") {
    dump.add("accuracy", accuracy, {c.train.steps});
    dump.add("margins", margin, {c.train.steps});
    dump.add("chosen_rewards", chosen, {c.train.steps});
    dump.add("rejected_rewards", rejected, {c.train.steps});
  }
  dump.finish();
  std::printf("dump_reference: wrote %s (losses %.6f -> %.6f)\n", dir.c_str(), losses.front(), losses.back());
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string model = argc > 4 ? argv[4] : "gpt2";
  if (argc < 2 || argc > 5 ||
      (model != "gpt2" && model != "llama" && model != "llama-qkv-bias" && model != "llama-sft" &&
       model != "llama-dpo" && model != "llama-ipo" && model != "llama-reward")) {
    std::fprintf(stderr, "usage: dump_reference OUTPUT_DIR [cpu|cuda] [STEPS] "
                         "[gpt2|llama|llama-qkv-bias|llama-sft|llama-dpo|llama-ipo|llama-reward]\n");
    return 2;
  }
  if ((model == "llama-dpo" || model == "llama-ipo") && argc > 2 && std::string(argv[2]) != "cpu") {
    std::fprintf(stderr, "dump_reference: %s runs on the cpu backend only (its reference weights are fp32)\n",
                 model.c_str());
    return 2;
  }
  run(argv[1], argc > 2 ? argv[2] : "cpu", argc > 3 ? std::atoi(argv[3]) : 10, model);
  MPI_Finalize();
  return 0;
}
