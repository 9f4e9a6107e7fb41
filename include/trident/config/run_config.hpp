// RunConfig: every option of a run, grouped by INI section. Field names are the option names.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace trident {

struct ModelConfig {
  std::string arch = "gpt2";   // gpt2 | llama
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  int vocab_size = 50257;
  int seq_len = 1024;       // tokens per training sequence (T)
  int n_positions = 0;      // rows of the position table; 0 means seq_len
  double init_std = 0.02;
  double norm_eps = 1e-5;   // LayerNorm (gpt2) or RMSNorm (llama) epsilon
  // Llama family (arch = llama):
  int n_kv_head = 0;             // key/value heads of grouped-query attention; 0 = n_head
  int ffn_hidden_size = 0;       // SwiGLU width F; 0 = 4 * n_embd (gpt2's MLP width)
  double rope_theta = 10000.0;   // rotary embedding base
  std::string tie_embeddings = "auto";   // true | false | auto (tied for gpt2, untied for llama)
  bool qkv_bias = false;         // llama: biases on q, k, v (Qwen2); gpt2 has every bias
  // Not an option: set from task = reward (validate_run_config, parse_config_text). A reward
  // model's head is score.weight (C -> 1), read at each sequence's last token, and it has no LM head.
  bool score_head = false;

  bool llama() const { return arch == "llama"; }
  int head_size() const { return n_embd / n_head; }
  int kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  // Key/value heads on each of tp ranks: split, or with fewer heads than ranks one each, shared
  // by tp / kv_heads() ranks (Megatron's replication).
  int kv_heads_per_rank(int tp) const { return kv_heads() >= tp ? kv_heads() / tp : 1; }
  int ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * n_embd; }
  bool tied() const { return tie_embeddings == "auto" ? !llama() : tie_embeddings == "true"; }
  // The LM head is the token embedding; a reward model has no LM head, so its embedding is the
  // first stage's alone.
  bool head_is_wte() const { return tied() && !score_head; }
  bool has_qkv_bias() const { return !llama() || qkv_bias; }
  // Positions: the learned table's rows (gpt2) or the longest sequence RoPE is used at (llama).
  int positions() const { return n_positions > 0 ? n_positions : seq_len; }
  // Vocabulary padded to a multiple of 128*tp, so each TP shard is a multiple of 128 rows.
  int padded_vocab(int tp) const {
    int m = 128 * tp;
    return (vocab_size + m - 1) / m * m;
  }
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int dp = 0;                       // 0: world / (tp*pp)
  std::string schedule = "1f1b";    // gpipe | 1f1b | interleaved | zero_bubble (a plan only)
  int virtual_stages = 1;           // interleaved: model chunks per rank (virtual stage c*pp + rank)
  int zero = 0;                     // 0 | 1 | 2 (ZeRO stage)
  double bucket_mb = 25.0;          // DP gradient bucket size
  double timeout_s = 600.0;         // a collective that takes longer aborts the job
  bool auto_layout = false;         // parallel.auto: pick (tp, pp, zero, micro batch) with the planner
  bool tp_overlap = false;          // tp > 1: forward as two staggered half micro-batches (TP all-reduces beside work)
  bool tp_fused_sum = false;        // tp = 2: TP sums as exchanged partials added in the norms
  bool tp_split_layernorm_bwd = false;   // with tp_fused_sum: backward norms on half the rows each
  bool sequence_parallel = false;   // tp > 1: LayerNorms on 1/tp of the rows (reduce-scatter + all-gather)
  int tp_sm_margin = 0;             // tp > 1: SMs the GEMMs beside a TP all-reduce leave free (0: none)
  int tp_comm_ctas = 0;             // NCCL: most CTAs of a TP collective (0: NCCL's choice)
  int dp_comm_ctas = 0;             // NCCL: most CTAs of a DP collective (0: NCCL's choice)
  bool offload_optimizer = false;   // fp32 master weights and Adam moments in host memory, AdamW on the host
  int gpus_per_node = 0;            // > 0: consecutive world ranks of this many make a node (0: the machines)
  std::string recompute = "none";   // none | selective | full: what the backward recomputes
  int recompute_layers = 0;         // full: the first N blocks of each stage (0: all); selective: N blocks full
};

// Which blocks of a pipeline stage the backward recomputes: the first `full` keep only their
// output; with `selective` the others keep all but their norm outputs and MLP activation (the
// large activations that cost an elementwise pass to redo), else everything.
struct RecomputePlan {
  int full = 0;
  bool selective = false;
  bool any() const { return full > 0 || selective; }
};

struct TrainConfig {
  int steps = 100;
  double epochs = 0;       // > 0: steps from passes over the training data instead of train.steps
  uint64_t tokens = 0;     // > 0: steps from training tokens instead of train.steps
  int micro_batch_size = 4;
  int global_batch_size = 8;
  double lr = 6e-4;
  double min_lr = 6e-5;
  int warmup_steps = 10;
  std::string lr_schedule = "cosine";   // cosine | linear | wsd | constant (after the warm-up)
  int lr_decay_steps = 0;               // update at which the decay reaches min_lr; 0: train.steps
  double lr_wsd_decay_fraction = 0.2;   // wsd: share of lr_decay_steps spent decaying, at the end
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;
  uint64_t seed = 1337;
  int eval_every = 0;     // validation loss every N steps (0: never)
  int eval_steps = 10;    // global batches of validation data per evaluation
  int max_skipped = 10;        // consecutive skipped updates (non-finite, spikes) that stop the run
  double spike_zscore = 0;     // skip a step whose loss is this many standard deviations high (0: off)
};

struct DataConfig {
  std::string train;    // blend spec: PREFIX or "W1 PREFIX1 W2 PREFIX2 ..." (<prefix>.bin, <prefix>.idx)
  std::string val;      // blend spec of the validation data; empty: held out by split
  double split = 1.0;   // fraction of each train dataset's documents trained on when val is empty
  std::string tokenizer;   // tokenizer.json (or its directory) the checkpoints keep; empty: inherited, if any
  bool pack = false;    // task sft: records packed into each sequence, each attending to itself only
};

struct CheckpointConfig {
  std::string dir;                  // empty: no checkpoints
  int every = 0;                    // save every N steps (0: only at the end and on signals)
  int keep = 3;                     // checkpoints kept after a successful save
  std::string resume = "auto";      // auto (latest in dir, if any) | none | path of a checkpoint file
  bool overwrite = false;           // may replace checkpoints in dir that this run did not resume from
};

struct InitConfig {
  std::string from;   // a trident checkpoint (.h5) or a Hugging Face model directory; empty: random init
};

// Task dpo: direct preference optimisation against a frozen copy of the initial weights.
struct DpoConfig {
  double beta = 0.1;              // strength of the implicit KL penalty towards the reference
  double label_smoothing = 0;     // cDPO: the share of preference labels taken to be flipped, in [0, 0.5)
  std::string loss = "sigmoid";   // sigmoid (DPO, cDPO) | ipo (Azar et al.: squared, per-token log-ratios)
  std::string reference = "model";   // model (forward in each step) | precomputed (a file beside the data)
};

// Task grpo: online RL with group-relative advantages (DeepSeekMath's GRPO). Each step the policy
// generates rl.group answers to each of global_batch_size / rl.group prompts of rl.prompts, a
// verifier scores them, and the policy trains on them with the clipped ratio objective. Task ppo
// (InstructGPT's PPO) samples the same way and adds a value model, GAE and a KL-shaped reward.
struct RlConfig {
  std::string prompts;              // JSON Lines of {"prompt": ..., "answer": ...}
  std::string tokenizer = "auto";   // byte | gpt2 | a tokenizer.json; auto: the run's (data.tokenizer, kept ones)
  std::string chat_template = "plain";   // how a prompt is rendered as a user turn: plain | chatml | llama3
  int group = 8;                    // answers sampled per prompt
  int max_new_tokens = 32;
  int generation_batch = 64;        // answers a rank decodes at once (each holds a KV cache of seq_len)
  int prefill_tokens = 2048;        // most prompt tokens one generation step feeds
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  std::string reward = "exact_match";    // exact_match: 1 when the answer text equals the record's answer;
                                         // model: reward_model's score
  std::string reward_model;         // a reward model's checkpoint (task reward), for reward = model
  std::string format_pattern;       // ECMAScript regex the whole answer text must match for format_reward
  double format_reward = 0;
  double clip_eps = 0.2;
  double kl_beta = 0.04;            // weight of the k3 KL estimate to the frozen init.from weights; 0: no reference
  int ppo_epochs = 1;               // optimizer updates on each generated batch
  std::string loss_norm = "sequence";   // sequence | token
  double adv_eps = 1e-4;            // (r - mean) / (std + adv_eps)
  // Task ppo: the value model, GAE and the KL control (docs/RL.md).
  double gamma = 1.0;               // GAE's discount
  double lambda = 0.95;             // GAE's lambda
  double value_clip = 0.2;          // a value moves at most this far from its rollout-time value (clipped loss)
  double value_lr = 0;              // the value model's peak learning rate; 0: train.lr
  std::string value_from;           // the value model's initial weights; empty: init.from's transformer
  double kl_target = 0;             // adaptive KL control's target KL per answer; 0: rl.kl_beta stays fixed
  double kl_horizon = 10000;        // adaptive KL control's horizon in answers
};

struct LogConfig {
  std::string metrics;  // JSON Lines file, one object per optimizer step; empty = none
  std::string tensorboard;   // directory of TensorBoard event files; empty = none
  std::string summary;       // JSON file of the end-of-run performance summary; empty = none
  double memory_warning = 0.95;   // warn when a rank's memory in use passes this share of its capacity
  int every = 10;
};

// CUDA backend switches for comparisons and debugging; the defaults are the fast path.
struct CudaConfig {
  std::string attention_kernels = "auto";   // auto | wgmma | mma
  int attention_dkv_parts = 0;      // at most this many parts of a group's query heads per dK/dV block; 0 = by shape
  bool side_stream = true;          // false: side ops queued in order on the main stream
  bool graphs = true;               // false: generation's decode steps queue every op (no CUDA graphs)
  bool gemm_autotune = true;        // false: cuBLASLt's heuristic first choice
  bool gemm_log = false;            // print each GEMM shape's candidates and choice
  bool sync_launches = false;       // drain the device after every kernel (slow; finds faulting kernels)
};

struct RunConfig {
  ModelConfig model;
  ParallelConfig parallel;
  TrainConfig train;
  DataConfig data;
  CheckpointConfig checkpoint;
  InitConfig init;
  DpoConfig dpo;
  RlConfig rl;
  LogConfig log;
  CudaConfig cuda;
  std::string backend = "auto";     // auto | cpu | cuda
  std::string task = "pretrain";    // pretrain | sft (supervised fine-tuning on a chat dataset) | dpo | reward | grpo | ppo
  std::vector<std::string> config_files;

  // Tasks whose samples are preference pairs (PreferenceSource): a micro-batch holds whole pairs.
  bool preference_task() const { return task == "dpo" || task == "reward"; }
  // Tasks that keep a frozen copy of the initial weights (init.from) as a reference model.
  bool has_reference() const { return task == "dpo" || (online_rl() && rl.kl_beta > 0); }
  // Online RL: the policy generates its own samples each step (PromptRollouts).
  bool online_rl() const { return task == "grpo" || task == "ppo"; }

  // Resolved from the world size (parallel.dp = 0) by validate_run_config.
  int dp() const { return parallel.dp; }
  int micro_batches_per_step() const {
    return train.global_batch_size / (train.micro_batch_size * parallel.dp);
  }
  // What each pipeline stage's blocks keep for the backward (parallel.recompute, recompute_layers).
  RecomputePlan recompute_plan() const {
    const int per_stage = model.n_layer / parallel.pp, n = parallel.recompute_layers;
    RecomputePlan r;
    if (parallel.recompute == "full") r.full = n > 0 ? std::min(n, per_stage) : per_stage;
    if (parallel.recompute == "selective") {
      r.full = std::min(n, per_stage);
      r.selective = true;
    }
    return r;
  }
};

}  // namespace trident
