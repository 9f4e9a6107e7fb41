// Validation of a RunConfig before anything is allocated: each failure names the option,
// its value and the fix, in one line.
#include <climits>
#include <cmath>
#include <cstdint>

#include "trident/config/blend_spec.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

// Bounds far above any model trident trains, so that size arithmetic cannot overflow; whether a
// size within them fits the machine is the memory estimate's call (check_memory_fits).
constexpr int kMaxLayers = 4096;
constexpr int kMaxEmbd = 1 << 18;
constexpr int kMaxSeqLen = 1 << 24;
constexpr int64_t kMaxMicroBatches = 1 << 20;

template <class T>
void require(bool ok, const char* option, const T& value, const std::string& fix) {
  if (!ok) throw InputError(str(option, " = ", value, ": ", fix));
}

void validate_model(const ModelConfig& m) {
  require(m.n_layer >= 1 && m.n_layer <= kMaxLayers, "model.n_layer", m.n_layer,
          str("must be between 1 and ", kMaxLayers));
  require(m.n_head >= 1, "model.n_head", m.n_head, "must be at least 1");
  require(m.n_embd >= 1 && m.n_embd <= kMaxEmbd, "model.n_embd", m.n_embd, str("must be between 1 and ", kMaxEmbd));
  require(m.n_embd % m.n_head == 0, "model.n_embd", m.n_embd,
          str("must be divisible by model.n_head = ", m.n_head, " (head size = n_embd / n_head)"));
  require(m.vocab_size >= 2 && m.vocab_size <= (1 << 30), "model.vocab_size", m.vocab_size,
          "must be between 2 and 2^30");
  require(m.seq_len >= 1 && m.seq_len <= kMaxSeqLen, "model.seq_len", m.seq_len,
          str("must be between 1 and ", kMaxSeqLen));
  require(m.n_positions >= 0 && m.n_positions <= kMaxSeqLen, "model.n_positions", m.n_positions,
          str("must be between 0 (= seq_len) and ", kMaxSeqLen));
  require(m.seq_len <= m.positions(), "model.seq_len", m.seq_len,
          str("exceeds the position table model.n_positions = ", m.positions(),
              "; lower seq_len or raise n_positions"));
  require(m.init_std > 0, "model.init_std", m.init_std, "must be > 0");
  require(m.norm_eps > 0, "model.norm_eps", m.norm_eps, "must be > 0");
  require(m.arch == "gpt2" || m.arch == "llama", "model.arch", m.arch, "must be gpt2 or llama");
  require(m.tie_embeddings == "auto" || m.tie_embeddings == "true" || m.tie_embeddings == "false",
          "model.tie_embeddings", m.tie_embeddings, "must be true, false or auto");
  require(m.n_kv_head >= 0, "model.n_kv_head", m.n_kv_head, "must be >= 0 (0 = model.n_head)");
  require(m.ffn_hidden_size >= 0 && m.ffn_hidden_size <= 64 * kMaxEmbd, "model.ffn_hidden_size",
          m.ffn_hidden_size, str("must be between 0 (= 4*n_embd) and ", 64 * kMaxEmbd));
  if (!m.llama()) {
    // GPT-2's block has no place for these: refuse them rather than ignore them.
    require(m.kv_heads() == m.n_head, "model.n_kv_head", m.n_kv_head,
            "needs model.arch = llama (gpt2 has one key/value head per query head); remove it or set arch");
    require(m.ffn() == 4 * m.n_embd, "model.ffn_hidden_size", m.ffn_hidden_size,
            "needs model.arch = llama (gpt2's MLP is 4*n_embd wide); remove it or set arch");
    require(m.tied(), "model.tie_embeddings", m.tie_embeddings,
            "= false needs model.arch = llama (gpt2's head is its token embedding)");
    require(!m.qkv_bias, "model.qkv_bias", "true", "needs model.arch = llama (gpt2 has every bias already)");
    return;
  }
  require(m.n_head % m.kv_heads() == 0, "model.n_kv_head", m.n_kv_head,
          str("must divide model.n_head = ", m.n_head, " (each key/value head serves n_head/n_kv_head query heads)"));
  require(m.head_size() % 2 == 0, "model.n_embd", m.n_embd,
          str("/ model.n_head = ", m.head_size(), " must be even for rotary embeddings"));
  require(m.rope_theta > 1 && std::isfinite(m.rope_theta), "model.rope_theta", m.rope_theta, "must be > 1");
}

// Products of layout sizes are taken in 64 bits: tp = pp = 65536 would wrap an int to 0.
void validate_parallel(ParallelConfig& p, const ModelConfig& m, int world) {
  require(p.tp >= 1, "parallel.tp", p.tp, "must be at least 1");
  require(p.pp >= 1, "parallel.pp", p.pp, "must be at least 1");
  require(p.dp >= 0, "parallel.dp", p.dp, "must be >= 0 (0 = world size / (tp*pp))");
  const int64_t tp_pp = int64_t{p.tp} * p.pp;
  require(tp_pp <= world, "parallel.tp*parallel.pp", tp_pp,
          str("exceeds the number of ranks ", world, "; launch a multiple of tp*pp ranks or lower tp or pp"));
  if (p.dp == 0) {
    require(world % tp_pp == 0, "parallel.tp*parallel.pp", tp_pp,
            str("does not divide the world size ", world, "; launch a multiple of tp*pp ranks"));
    p.dp = static_cast<int>(world / tp_pp);
  }
  const int64_t ranks = p.dp * tp_pp;
  require(ranks == world, "parallel.dp*tp*pp", ranks,
          str("must equal the number of ranks ", world, "; launch ", ranks, " ranks or change the layout"));
  require(m.n_head % p.tp == 0, "parallel.tp", p.tp,
          str("must divide model.n_head = ", m.n_head, " (heads are split across TP ranks)"));
  // Key/value heads are split across TP ranks, or, with fewer of them than ranks, each is held
  // by tp / n_kv_head ranks (Megatron's replication).
  require(m.kv_heads() % p.tp == 0 || p.tp % m.kv_heads() == 0, "parallel.tp", p.tp,
          str("must divide model.n_kv_head = ", m.kv_heads(), " or be a multiple of it (key/value heads are split "
              "across TP ranks or replicated)"));
  require(m.ffn() % p.tp == 0, "parallel.tp", p.tp,
          str("must divide model.ffn_hidden_size = ", m.ffn(), " (the MLP is split across TP ranks)"));
  require(p.recompute == "none" || p.recompute == "selective" || p.recompute == "full", "parallel.recompute",
          p.recompute, "must be none, selective or full");
  require(p.recompute_layers >= 0 && p.recompute_layers <= m.n_layer, "parallel.recompute_layers",
          p.recompute_layers, str("must be between 0 (all blocks of a stage) and model.n_layer = ", m.n_layer));
  // The recomputed forward is the plain one or sequence parallelism's: the TP variants that
  // split a block's sums into halves or partials have no recompute yet.
  require(p.recompute == "none" || p.tp == 1 || (!p.tp_overlap && (!p.tp_fused_sum || p.sequence_parallel)),
          "parallel.recompute", p.recompute,
          "cannot be combined with parallel.tp_overlap, nor with tp_fused_sum without sequence_parallel, yet; turn "
          "those off");
  require(m.padded_vocab(p.tp) % p.tp == 0, "parallel.tp", p.tp, "must divide the padded vocabulary");
  require(m.n_layer % p.pp == 0, "parallel.pp", p.pp,
          str("must divide model.n_layer = ", m.n_layer, " (each stage holds n_layer/pp blocks)"));
  require(p.schedule == "gpipe" || p.schedule == "1f1b" || p.schedule == "interleaved" || p.schedule == "zero_bubble",
          "parallel.schedule", p.schedule, "must be gpipe, 1f1b, interleaved or zero_bubble");
  const bool interleaved = p.schedule == "interleaved";
  require(p.virtual_stages >= 1, "parallel.virtual_stages", p.virtual_stages, "must be at least 1");
  require(interleaved || p.virtual_stages == 1, "parallel.virtual_stages", p.virtual_stages,
          "applies to parallel.schedule = interleaved only; set it to 1 or use interleaved");
  require(!interleaved || p.pp >= 2, "parallel.schedule", p.schedule,
          "needs parallel.pp >= 2 (it interleaves model chunks across pipeline ranks)");
  require(!interleaved || p.virtual_stages >= 2, "parallel.virtual_stages", p.virtual_stages,
          "must be at least 2 with parallel.schedule = interleaved (one chunk per rank is 1f1b)");
  require(m.n_layer % (int64_t{p.pp} * p.virtual_stages) == 0, "parallel.virtual_stages", p.virtual_stages,
          str("times parallel.pp = ", p.pp, " must divide model.n_layer = ", m.n_layer,
              " (each rank holds virtual_stages chunks of n_layer/(pp*virtual_stages) blocks)"));
  require(p.zero >= 0 && p.zero <= 3, "parallel.zero", p.zero, "must be 0, 1, 2 or 3");
  require(p.zero < 3 || p.dp == 1 || p.schedule == "gpipe" || p.schedule == "1f1b", "parallel.zero", p.zero,
          str("(parameters gathered block by block) runs under the gpipe and 1f1b schedules, not ", p.schedule,
              "; use parallel.zero = 2"));
  require(p.bucket_mb > 0, "parallel.bucket_mb", p.bucket_mb, "must be > 0");
  require(p.timeout_s > 0, "parallel.timeout_s", p.timeout_s, "must be > 0");
  require(p.tp_sm_margin >= 0 && p.tp_sm_margin <= 64, "parallel.tp_sm_margin", p.tp_sm_margin,
          "must be between 0 and 64");
  require(p.tp_comm_ctas >= 0 && p.tp_comm_ctas <= 64, "parallel.tp_comm_ctas", p.tp_comm_ctas,
          "must be between 0 and 64 (0: NCCL's choice)");
  require(p.dp_comm_ctas >= 0 && p.dp_comm_ctas <= 64, "parallel.dp_comm_ctas", p.dp_comm_ctas,
          "must be between 0 and 64 (0: NCCL's choice)");
  require(p.gpus_per_node >= 0, "parallel.gpus_per_node", p.gpus_per_node,
          "must be at least 1 (ranks per node), or 0 for the machines as they are");
  require(p.gpus_per_node == 0 || world % p.gpus_per_node == 0, "parallel.gpus_per_node", p.gpus_per_node,
          str("must divide the number of ranks ", world, " (nodes of equal size)"));
}

void validate_train(const TrainConfig& t, const ParallelConfig& p) {
  require(t.steps >= 0, "train.steps", t.steps, "must be >= 0");
  require(t.micro_batch_size >= 1, "train.micro_batch_size", t.micro_batch_size, "must be at least 1");
  require(t.global_batch_size >= 1, "train.global_batch_size", t.global_batch_size, "must be at least 1");
  const int64_t per_round = int64_t{t.micro_batch_size} * p.dp;
  require(t.global_batch_size % per_round == 0, "train.global_batch_size", t.global_batch_size,
          str("must be a multiple of micro_batch_size*dp = ", t.micro_batch_size, "*", p.dp, " = ",
              per_round));
  require(!p.tp_overlap || p.tp == 1 || t.micro_batch_size % 2 == 0, "train.micro_batch_size", t.micro_batch_size,
          "must be even with parallel.tp_overlap (the forward splits each micro-batch into two halves)");
  require(!p.sequence_parallel || p.tp == 1 || !p.tp_overlap || t.micro_batch_size % (2 * p.tp) == 0,
          "train.micro_batch_size", t.micro_batch_size,
          str("must divide by 2 x parallel.tp = ", 2 * p.tp, " with parallel.tp_overlap and sequence_parallel (each "
              "TP rank's rows are split into two halves of whole sequences); turn tp_overlap off or change it"));
  require(!p.tp_fused_sum || p.tp <= 2 || p.sequence_parallel, "parallel.tp_fused_sum", "true",
          str("needs parallel.sequence_parallel = true with tp = ", p.tp,
              " (beyond two ranks the partial sums are exchanged by rows); turn one on or this off"));
  require(!p.tp_fused_sum || p.tp <= 8, "parallel.tp_fused_sum", "true",
          str("needs tp <= 8 (the GPUs of one node), not tp = ", p.tp, "; turn it off"));
  require(!p.tp_split_layernorm_bwd || p.tp <= 2, "parallel.tp_split_layernorm_bwd", "true",
          str("needs tp = 2, not tp = ", p.tp, " (sequence_parallel runs every norm on own rows); turn it off"));
  require(!p.tp_split_layernorm_bwd || p.tp == 1 || p.tp_fused_sum, "parallel.tp_split_layernorm_bwd", "true",
          "needs parallel.tp_fused_sum = true");
  const int64_t n_micro = t.global_batch_size / per_round;
  // The schedule holds a few actions per micro-batch: a step of billions of micro-batches would
  // exhaust memory while it is planned.
  require(n_micro <= kMaxMicroBatches, "train.global_batch_size", t.global_batch_size,
          str("gives ", n_micro, " micro-batches per step, more than ", kMaxMicroBatches,
              "; raise train.micro_batch_size"));
  require((p.schedule != "1f1b" && p.schedule != "zero_bubble") || n_micro >= p.pp, "train.global_batch_size",
          t.global_batch_size,
          str("gives ", n_micro, " micro-batches per step but ", p.schedule, " with pp = ", p.pp, " needs at least ",
              p.pp, "; use global_batch_size >= ", p.pp * per_round, " or parallel.schedule = gpipe"));
  // Megatron's interleaved schedule sends the micro-batches through the chunks in rounds of pp.
  require(p.schedule != "interleaved" || n_micro % p.pp == 0, "train.global_batch_size", t.global_batch_size,
          str("gives ", n_micro, " micro-batches per step but interleaved needs a multiple of pp = ", p.pp,
              "; use a global_batch_size that is a multiple of ", p.pp * per_round));
  require(t.lr > 0 && std::isfinite(t.lr), "train.lr", t.lr, "must be > 0");
  require(t.min_lr >= 0 && t.min_lr <= t.lr, "train.min_lr", t.min_lr, "must be between 0 and train.lr");
  require(t.warmup_steps >= 0, "train.warmup_steps", t.warmup_steps, "must be >= 0");
  require(t.lr_schedule == "cosine" || t.lr_schedule == "linear" || t.lr_schedule == "wsd" ||
              t.lr_schedule == "constant",
          "train.lr_schedule", t.lr_schedule, "must be cosine, linear, wsd or constant");
  require(t.lr_decay_steps >= 0, "train.lr_decay_steps", t.lr_decay_steps, "must be >= 0 (0 = train.steps)");
  require(t.lr_wsd_decay_fraction > 0 && t.lr_wsd_decay_fraction <= 1, "train.lr_wsd_decay_fraction",
          t.lr_wsd_decay_fraction, "must be in (0, 1]");
  require(t.epochs >= 0 && std::isfinite(t.epochs), "train.epochs", t.epochs, "must be >= 0 (0 = use train.steps)");
  require(t.epochs == 0 || t.tokens == 0, "train.epochs", t.epochs,
          "and train.tokens both set the length of training; give one of them");
  require(t.weight_decay >= 0, "train.weight_decay", t.weight_decay, "must be >= 0");
  require(t.beta1 >= 0 && t.beta1 < 1, "train.beta1", t.beta1, "must be in [0, 1)");
  require(t.beta2 >= 0 && t.beta2 < 1, "train.beta2", t.beta2, "must be in [0, 1)");
  require(t.eps > 0, "train.eps", t.eps, "must be > 0");
  require(t.grad_clip >= 0, "train.grad_clip", t.grad_clip, "must be >= 0 (0 = no clipping)");
  require(t.eval_every >= 0, "train.eval_every", t.eval_every, "must be >= 0 (0 = no evaluation)");
  require(t.eval_steps >= 1, "train.eval_steps", t.eval_steps, "must be at least 1");
  require(t.max_skipped >= 1, "train.max_skipped", t.max_skipped, "must be at least 1");
  require(t.spike_zscore >= 0 && std::isfinite(t.spike_zscore), "train.spike_zscore", t.spike_zscore,
          "must be >= 0 (0 = no spike detection)");
}

// The files themselves are opened later (open_data); an empty data.train is allowed here so that
// commands that never read data (plan, doctor) validate the rest.
void validate_data(const DataConfig& d) {
  parse_blend_spec("data.train", d.train);
  parse_blend_spec("data.val", d.val);
  require(d.split > 0 && d.split <= 1, "data.split", d.split,
          "must be in (0, 1]: the fraction of each dataset's documents used for training");
  require(d.val.empty() || d.split == 1, "data.split", d.split,
          "holds out validation documents only when data.val is empty; set data.val or data.split, not both");
}

// Online RL's options (tasks grpo and ppo), and the layout its generation needs (run after validate_parallel has
// resolved parallel.dp).
void validate_rl(const RunConfig& cfg) {
  const RlConfig& r = cfg.rl;
  const bool ppo = cfg.task == "ppo";
  require(!r.prompts.empty(), "rl.prompts", "(empty)",
          str("task ", cfg.task, " needs a JSON Lines file of prompts and answers"));
  if (ppo)
    require(r.group >= 1, "rl.group", r.group, "must be at least 1 (answers sampled per prompt)");
  else
    require(r.group >= 2, "rl.group", r.group, "must be at least 2: advantages are relative to the group");
  require(r.max_new_tokens >= 1 && r.max_new_tokens < cfg.model.seq_len, "rl.max_new_tokens", r.max_new_tokens,
          str("must be in [1, model.seq_len = ", cfg.model.seq_len, "): the prompt and the answer share a sequence"));
  require(r.temperature > 0 && std::isfinite(r.temperature), "rl.temperature", r.temperature, "must be > 0");
  require(cfg.parallel.schedule != "interleaved", "parallel.schedule", cfg.parallel.schedule,
          str("is not supported with task ", cfg.task, " (generation passes the rows through the pipeline ranks once, "
              "not around their model chunks); use parallel.schedule = 1f1b"));
  require(r.generation_batch >= 1, "rl.generation_batch", r.generation_batch, "must be at least 1");
  require(r.prefill_tokens >= 1, "rl.prefill_tokens", r.prefill_tokens, "must be at least 1");
  require(r.top_k >= 0, "rl.top_k", r.top_k, "must be >= 0 (0 = all tokens)");
  require(r.top_p > 0 && r.top_p <= 1, "rl.top_p", r.top_p, "must be in (0, 1]");
  require(r.reward == "exact_match" || r.reward == "model", "rl.reward", r.reward, "must be exact_match or model");
  require(r.reward != "model" || !r.reward_model.empty(), "rl.reward_model", "(empty)",
          "rl.reward = model needs a reward model's checkpoint");
  require(std::isfinite(r.format_reward), "rl.format_reward", r.format_reward, "must be finite");
  require(r.clip_eps > 0 && r.clip_eps < 1, "rl.clip_eps", r.clip_eps, "must be in (0, 1)");
  require(r.kl_beta >= 0 && std::isfinite(r.kl_beta), "rl.kl_beta", r.kl_beta, "must be >= 0");
  require(r.ppo_epochs >= 1, "rl.ppo_epochs", r.ppo_epochs, "must be at least 1");
  require(r.loss_norm == "sequence" || r.loss_norm == "token", "rl.loss_norm", r.loss_norm, "must be sequence or token");
  require(r.adv_eps > 0 && std::isfinite(r.adv_eps), "rl.adv_eps", r.adv_eps, "must be > 0");
  require(r.gamma > 0 && r.gamma <= 1, "rl.gamma", r.gamma, "must be in (0, 1]");
  require(r.lambda >= 0 && r.lambda <= 1, "rl.lambda", r.lambda, "must be in [0, 1]");
  require(r.value_clip > 0 && std::isfinite(r.value_clip), "rl.value_clip", r.value_clip, "must be > 0");
  require(r.value_lr >= 0 && std::isfinite(r.value_lr), "rl.value_lr", r.value_lr, "must be >= 0 (0 = train.lr)");
  require(r.kl_target >= 0 && std::isfinite(r.kl_target), "rl.kl_target", r.kl_target,
          "must be >= 0 (0 = a fixed rl.kl_beta)");
  require(r.kl_horizon > 0 && std::isfinite(r.kl_horizon), "rl.kl_horizon", r.kl_horizon, "must be > 0");
  require(r.kl_target == 0 || (ppo && r.kl_beta > 0), "rl.kl_target", r.kl_target,
          ppo ? "adapts rl.kl_beta, which is 0: give rl.kl_beta > 0 as the starting coefficient"
              : "is task ppo's adaptive KL control; task grpo's rl.kl_beta is fixed");
  require(ppo || r.value_from.empty(), "rl.value_from", r.value_from, "is task ppo's value model; leave it empty");
  require(cfg.parallel.pp == 1 || r.reward != "model", "parallel.pp", cfg.parallel.pp,
          "must be 1 with rl.reward = model: the reward model scores the answers on one pipeline stage "
          "(use tp and dp, or rl.reward = exact_match)");
  const int64_t per_rank = cfg.train.global_batch_size / cfg.parallel.dp;
  require(per_rank % r.group == 0, "rl.group", r.group,
          str("must divide the ", per_rank, " sequences of each data-parallel rank (train.global_batch_size / dp): "
              "a prompt's answers are generated and normalised on one rank"));
}

}  // namespace

void validate_run_config(RunConfig& cfg, int world_size) {
  require(cfg.backend == "auto" || cfg.backend == "cpu" || cfg.backend == "cuda", "backend", cfg.backend,
          "must be auto, cpu or cuda");
  const std::string& task = cfg.task;
  require(task == "pretrain" || task == "sft" || task == "dpo" || task == "reward" || task == "grpo" || task == "ppo",
          "task", task, "must be pretrain, sft, dpo, reward, grpo or ppo");
  cfg.model.score_head = cfg.task == "reward";
  require(!cfg.data.pack || cfg.task == "sft", "data.pack", "true",
          "packs fine-tuning records: use it with task = sft (pre-training windows are full; preference pairs "
          "are not packed)");
  require(cfg.dpo.beta > 0 && std::isfinite(cfg.dpo.beta), "dpo.beta", cfg.dpo.beta, "must be > 0");
  require(cfg.dpo.label_smoothing >= 0 && cfg.dpo.label_smoothing < 0.5, "dpo.label_smoothing",
          cfg.dpo.label_smoothing, "must be in [0, 0.5)");
  require(cfg.dpo.loss == "sigmoid" || cfg.dpo.loss == "ipo", "dpo.loss", cfg.dpo.loss, "must be sigmoid or ipo");
  require(cfg.dpo.loss != "ipo" || cfg.dpo.label_smoothing == 0, "dpo.label_smoothing", cfg.dpo.label_smoothing,
          "is cDPO's, of the sigmoid loss: set it to 0 with dpo.loss = ipo");
  require(cfg.dpo.reference == "model" || cfg.dpo.reference == "precomputed", "dpo.reference", cfg.dpo.reference,
          "must be model or precomputed");
  const std::string& kernels = cfg.cuda.attention_kernels;
  require(kernels == "auto" || kernels == "wgmma" || kernels == "mma", "cuda.attention_kernels", kernels,
          "must be auto, wgmma or mma");
  require(cfg.cuda.attention_dkv_parts >= 0, "cuda.attention_dkv_parts", cfg.cuda.attention_dkv_parts,
          "must be 0 (by shape) or a positive number of parts");
  validate_model(cfg.model);
  validate_parallel(cfg.parallel, cfg.model, world_size);
  validate_train(cfg.train, cfg.parallel);
  if (cfg.online_rl()) validate_rl(cfg);
  // ZeRO-3's stage holds no whole parameters for generation or for a reference model to copy.
  const bool zero3 = cfg.parallel.zero >= 3 && cfg.parallel.dp > 1;
  require(!zero3 || !cfg.online_rl(), "parallel.zero", cfg.parallel.zero,
          str("is not supported with task ", cfg.task, " (its generation reads whole parameters); use parallel.zero = 2"));
  require(!zero3 || cfg.task != "dpo" || cfg.dpo.reference != "model", "parallel.zero", cfg.parallel.zero,
          "is not supported with dpo.reference = model (the reference copies whole parameters); use "
          "dpo.reference = precomputed or parallel.zero = 2");
  require(!cfg.preference_task() || cfg.train.micro_batch_size % 2 == 0, "train.micro_batch_size",
          cfg.train.micro_batch_size,
          str("must be even for task ", cfg.task, ": a micro-batch holds whole preference pairs (chosen, rejected)"));
  const ParallelConfig& p = cfg.parallel;
  const int64_t rows = int64_t{cfg.train.micro_batch_size} * cfg.model.seq_len;
  // The backend's ops take the rows of a micro-batch (N) as an int.
  require(rows <= INT32_MAX, "train.micro_batch_size", cfg.train.micro_batch_size,
          str("times model.seq_len = ", cfg.model.seq_len, " gives ", rows,
              " rows per micro-batch, more than 2^31 - 1; lower one of them"));
  require(!p.sequence_parallel || rows % p.tp == 0, "parallel.sequence_parallel", "true",
          str("splits the micro_batch_size*seq_len = ", rows, " rows of a micro-batch over tp = ", p.tp,
              ", which does not divide them; change train.micro_batch_size or model.seq_len"));
  require(!p.tp_split_layernorm_bwd || p.tp == 1 || rows % 2 == 0, "parallel.tp_split_layernorm_bwd", "true",
          str("splits the micro_batch_size*seq_len = ", rows, " rows of a micro-batch in two halves; make it even"));
  validate_data(cfg.data);
  require(cfg.log.every >= 1, "log.every", cfg.log.every, "must be at least 1");
  require(cfg.log.memory_warning > 0 && cfg.log.memory_warning <= 1, "log.memory_warning", cfg.log.memory_warning,
          "must be in (0, 1]");
  require(cfg.checkpoint.every >= 0, "checkpoint.every", cfg.checkpoint.every, "must be >= 0 (0 = only at the end)");
  require(cfg.checkpoint.keep >= 1, "checkpoint.keep", cfg.checkpoint.keep, "must be at least 1");
  require(!cfg.checkpoint.resume.empty(), "checkpoint.resume", "''", "must be auto, none or a checkpoint file");
}

}  // namespace trident
