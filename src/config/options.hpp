// The one list of run options: name, field and help. Parsing, help and to_ini all visit it.
#pragma once

#include "trident/config/run_config.hpp"

namespace trident {

template <class Visitor>
void visit_run_options(RunConfig& c, Visitor&& v) {
  v.section("", "General");
  v("backend", c.backend, "compute backend: auto (CUDA when GPUs are visible), cpu or cuda");
  v("task", c.task, "pretrain (token windows of data.train, every token trained), sft (supervised fine-tuning: "
    "one conversation of a chat dataset per sequence, loss over the assistant's tokens only), dpo (direct "
    "preference optimisation on a preference dataset against the frozen init.from weights) or reward (a reward "
    "model: score head instead of the LM head, pairwise loss on a preference dataset); docs/FINE_TUNING.md; or grpo "
    "(online RL: the policy answers rl.prompts, a verifier scores the answers; docs/RL.md) or ppo (the same with a "
    "value model trained alongside, GAE advantages and a KL-shaped reward)");

  v.section("model", "Model [model]");
  v("model.arch", c.model.arch, "architecture: gpt2 (LayerNorm, GELU MLP, learned positions) or llama (RMSNorm, "
    "SwiGLU MLP, rotary positions, grouped-query attention)");
  v("model.n_layer", c.model.n_layer, "transformer blocks (L)");
  v("model.n_head", c.model.n_head, "attention heads (NH); must divide n_embd and be divisible by parallel.tp");
  v("model.n_embd", c.model.n_embd, "channels (C)");
  v("model.vocab_size", c.model.vocab_size, "vocabulary size (V); padded internally to a multiple of 128*tp");
  v("model.seq_len", c.model.seq_len, "tokens per training sequence (T)");
  v("model.n_positions", c.model.n_positions, "rows of the learned position table; 0 = seq_len");
  v("model.init_std", c.model.init_std, "standard deviation of the N(0, std) weight initialisation");
  v("model.norm_eps", c.model.norm_eps, "LayerNorm (gpt2) or RMSNorm (llama) epsilon");
  v("model.n_kv_head", c.model.n_kv_head,
    "llama: key/value heads of grouped-query attention; must divide n_head; 0 = n_head");
  v("model.ffn_hidden_size", c.model.ffn_hidden_size, "llama: SwiGLU width (F); 0 = 4*n_embd");
  v("model.rope_theta", c.model.rope_theta, "llama: rotary position embedding base");
  v("model.tie_embeddings", c.model.tie_embeddings,
    "true: the LM head is the token embedding; false: its own matrix; auto: true for gpt2, false for llama");
  v("model.qkv_bias", c.model.qkv_bias, "llama: biases on the q, k, v projections (Qwen2 style)");

  v.section("parallel", "Parallelism [parallel]");
  v("parallel.tp", c.parallel.tp, "tensor-parallel size (ranks per TP group, consecutive ranks)");
  v("parallel.pp", c.parallel.pp, "pipeline-parallel stages; must divide model.n_layer");
  v("parallel.dp", c.parallel.dp, "data-parallel size; 0 = world size / (tp*pp)");
  v("parallel.schedule", c.parallel.schedule,
    "pipeline schedule: gpipe, 1f1b, interleaved (Megatron's interleaved 1F1B over parallel.virtual_stages model "
    "chunks per rank: bubble (pp-1)/(virtual_stages*micro-batches), micro-batches per DP rank a multiple of pp) or "
    "zero_bubble (ZB-H1 of Qi et al.: the backward split into an input-gradient and a weight-gradient pass, the "
    "weight passes filling the cool-down bubble; needs micro-batches per DP rank >= pp, not with parallel.zero = "
    "3)");
  v("parallel.virtual_stages", c.parallel.virtual_stages,
    "with parallel.schedule = interleaved, model chunks per pipeline rank (>= 2; pp*virtual_stages must divide "
    "model.n_layer); 1 otherwise");
  v("parallel.zero", c.parallel.zero,
    "1 shards fp32 master weights and Adam moments across DP (ZeRO-1); 2 also the fp32 gradients, reduce-scattered "
    "bucket by bucket on every micro-batch (ZeRO-2); 3 also the parameters, each block's bucket all-gathered just "
    "before the forward or backward uses it (ZeRO-3; gpipe and 1f1b schedules)");
  v("parallel.bucket_mb", c.parallel.bucket_mb, "size of a data-parallel gradient bucket in MiB (fp32)");
  v("parallel.timeout_s", c.parallel.timeout_s, "a collective that does not finish in this many seconds aborts the job");
  v("parallel.tp_overlap", c.parallel.tp_overlap,
    "with tp > 1, run the forward as two half micro-batches so that each TP all-reduce overlaps the other half's "
    "work (experimental; needs an even train.micro_batch_size, with parallel.sequence_parallel one that divides by "
    "2 x tp: each TP rank's rows in two halves, all-gathers and reduce-scatters beside the other half's GEMMs)");
  v("parallel.tp_fused_sum", c.parallel.tp_fused_sum,
    "exchange the TP partial sums that a norm (LayerNorm or RMSNorm) reads instead of all-reducing them, and add "
    "them inside the norm kernels (same values); on GPUs the copy engines move them, leaving every SM to the "
    "compute beside (the GPUs of a TP group must share a node with peer access). Without "
    "parallel.sequence_parallel tp must be 2 (best with parallel.tp_overlap); with it any tp up to 8: its "
    "reduce-scatters and all-gathers go the same way, each rank's rows to every other rank, and the forward's "
    "GEMMs run by rank beside them");
  v("parallel.tp_split_layernorm_bwd", c.parallel.tp_split_layernorm_bwd,
    "with parallel.tp_fused_sum, run the backward's norms on each TP rank's half of the rows (the residual "
    "gradient's rows gathered beside a weight-gradient GEMM) instead of on all of them on both");
  v("parallel.sequence_parallel", c.parallel.sequence_parallel,
    "with tp > 1, run the LayerNorms and residual adds on 1/tp of the rows per TP rank (Megatron's sequence "
    "parallelism; the TP all-reduces become reduce-scatters and all-gathers); each rank keeps only its 1/tp of the "
    "residual stream's and the norms' activations, gathering the norm outputs again in the backward; "
    "micro_batch_size*seq_len must divide by tp");
  v("parallel.recompute", c.parallel.recompute,
    "activation recompute, memory for time with gradients bit for bit the same: none; selective (every block "
    "drops its norm outputs and, for llama, its SwiGLU product, which the backward redoes from the saved norm "
    "inputs and gate|up output: elementwise passes, no GEMM); or full (the backward recomputes a block's activations from its "
    "input, which is all a recomputed block keeps from the forward)");
  v("parallel.recompute_layers", c.parallel.recompute_layers,
    "with recompute = full, the first N blocks of each pipeline stage (of each model chunk when interleaved) are "
    "recomputed fully (0: all of them); with "
    "recompute = selective, the first N blocks fully and the others selectively (0: all selectively)");
  v("parallel.tp_sm_margin", c.parallel.tp_sm_margin,
    "with tp > 1, streaming multiprocessors that the GEMMs running beside a TP all-reduce leave to it (the "
    "tp_overlap forward, the backward's weight-gradient GEMMs); 0 = the GEMMs use all of them; no effect on the "
    "sums that parallel.tp_fused_sum moves by copy engine");
  v("parallel.tp_comm_ctas", c.parallel.tp_comm_ctas,
    "with NCCL, the most CTAs (SMs) a TP collective may hold; 0 = NCCL's choice");
  v("parallel.offload_optimizer", c.parallel.offload_optimizer,
    "keep the fp32 master weights and Adam moments (this rank's ZeRO shard with parallel.zero >= 1) in pinned host "
    "memory and run AdamW on the host's cores (OMP_NUM_THREADS threads; ZeRO-Offload): each bucket's gradients go "
    "to the host beside the rest of the backward and its bf16 parameters come back after the update; GPU memory "
    "drops by 12 bytes per updated parameter, the same values as the update on the GPU's cores up to rounding "
    "(bit for bit on the CPU backend)");
  v("parallel.dp_comm_ctas", c.parallel.dp_comm_ctas,
    "with NCCL, the most CTAs (SMs) a data-parallel gradient reduction or ZeRO-1 gather may hold; 0 = NCCL's choice");
  v("parallel.gpus_per_node", c.parallel.gpus_per_node,
    "treat each run of this many consecutive ranks as one node (inside the machines MPI reports): the placement "
    "parallel.auto plans for and the peer-to-peer fast path (tp_fused_sum), which needs both GPUs of a node; with "
    "tools/perf/emulate_nodes.sh NCCL also sees those nodes (multi-node behaviour on one machine); 0 = the "
    "machines as they are");
  v("parallel.auto", c.parallel.auto_layout,
    "choose tp, pp, zero and micro_batch_size with the planner (trident plan) for the launched ranks");

  v.section("train", "Training [train]");
  v("train.steps", c.train.steps, "optimizer steps to run (or give train.epochs or train.tokens instead)");
  v("train.epochs", c.train.epochs,
    "in place of train.steps: passes over the training data (steps = ceil(epochs * training sequences / "
    "global_batch_size)); 0 = use train.steps");
  v("train.tokens", c.train.tokens,
    "in place of train.steps: training tokens (steps = ceil(tokens / (global_batch_size * seq_len))); 0 = use "
    "train.steps");
  v("train.micro_batch_size", c.train.micro_batch_size, "sequences per micro-batch per DP rank (B)");
  v("train.global_batch_size", c.train.global_batch_size, "sequences per optimizer step over all DP ranks");
  v("train.lr", c.train.lr, "peak learning rate");
  v("train.min_lr", c.train.min_lr, "learning rate at the end of the decay");
  v("train.warmup_steps", c.train.warmup_steps, "steps of linear warm-up from 0 to train.lr");
  v("train.lr_schedule", c.train.lr_schedule,
    "after the warm-up: cosine (to min_lr), linear (to min_lr), wsd (warm-up, stable at lr, then a linear decay "
    "to min_lr over the last lr_wsd_decay_fraction of lr_decay_steps) or constant");
  v("train.lr_decay_steps", c.train.lr_decay_steps,
    "the update at which the decay reaches min_lr (min_lr after it); 0 = train.steps. A resumed run whose "
    "train.steps differs from its checkpoint's keeps the checkpoint's length unless this is set");
  v("train.lr_wsd_decay_fraction", c.train.lr_wsd_decay_fraction,
    "wsd: the share of lr_decay_steps at its end in which the learning rate decays");
  v("train.weight_decay", c.train.weight_decay, "AdamW decoupled weight decay (matrices only)");
  v("train.beta1", c.train.beta1, "AdamW beta1");
  v("train.beta2", c.train.beta2, "AdamW beta2");
  v("train.eps", c.train.eps, "AdamW epsilon");
  v("train.grad_clip", c.train.grad_clip, "clip the global gradient norm to this value; 0 = off");
  v("train.seed", c.train.seed, "seed of the initialisation and the data order");
  v("train.eval_every", c.train.eval_every, "validation loss and perplexity every N steps; 0 = never");
  v("train.eval_steps", c.train.eval_steps, "global batches of validation data per evaluation");
  v("train.max_skipped", c.train.max_skipped,
    "a step whose loss or gradient norm is not finite (or a loss spike) is not applied; this many such steps in a "
    "row stop the run with a checkpoint of the last good state");
  v("train.spike_zscore", c.train.spike_zscore,
    "skip a step whose loss is more than this many standard deviations above the mean of the last 100 applied "
    "steps (after 20); 0 = off");

  v.section("data", "Data [data]");
  v("data.train", c.data.train,
    "training data: a Megatron indexed dataset prefix (PREFIX.bin + PREFIX.idx), or a blend "
    "'W1 PREFIX1 W2 PREFIX2 ...' of datasets drawn in proportion to the weights");
  v("data.val", c.data.val, "validation data, same syntax as data.train; empty = the documents data.split holds out");
  v("data.split", c.data.split,
    "fraction of each training dataset's documents used for training when data.val is empty; the remaining "
    "documents are the validation data (1 = no validation data)");
  v("data.tokenizer", c.data.tokenizer,
    "the Hugging Face tokenizer.json (or its directory) the data was tokenized with: the checkpoints keep it, "
    "so convert --to-hf writes it and generate uses it; empty = the one of the resumed checkpoint or init.from, "
    "if any");
  v("data.pack", c.data.pack,
    "task sft: pack consecutive records greedily into each sequence of seq_len + 1 tokens instead of one record "
    "padded per sequence; each record keeps its own positions and attends only to itself, so its loss is unchanged");

  v.section("checkpoint", "Checkpoints [checkpoint]");
  v("checkpoint.dir", c.checkpoint.dir, "directory of step_<n>.h5 checkpoints and the 'latest' pointer; empty = none");
  v("checkpoint.every", c.checkpoint.every, "save every N steps (0 = only at the end and on SIGTERM/SIGUSR1)");
  v("checkpoint.keep", c.checkpoint.keep, "keep the newest K checkpoints; older ones are pruned after a save");
  v("checkpoint.resume", c.checkpoint.resume, "auto (latest in checkpoint.dir if present), none, or a checkpoint file");
  v("checkpoint.overwrite", c.checkpoint.overwrite,
    "let this run replace checkpoints in checkpoint.dir that it did not resume from (another run's, or later "
    "steps than the one resumed); without it such a directory is refused");

  v.section("init", "Initial weights [init]");
  v("init.from", c.init.from,
    "start a new run from these weights instead of a random initialisation, with a fresh optimizer at step 0 "
    "(fine-tuning): a trident checkpoint (.h5, e.g. from trident convert) or a Hugging Face model directory "
    "(config.json + safetensors, converted in memory); the [model] settings must match its model; a run that "
    "resumes from checkpoint.dir ignores it, but for task dpo, which needs it and reads it again as the frozen "
    "reference model");

  v.section("dpo", "Direct preference optimisation [dpo] (task = dpo)");
  v("dpo.beta", c.dpo.beta,
    "beta of the DPO loss -log sigmoid(beta * ((log pi - log ref)(chosen) - (log pi - log ref)(rejected))): "
    "larger keeps the policy closer to the reference (the init.from weights)");
  v("dpo.label_smoothing", c.dpo.label_smoothing,
    "conservative DPO (cDPO): the share of preference labels taken to be flipped, in [0, 0.5); 0 = plain DPO");
  v("dpo.loss", c.dpo.loss,
    "sigmoid (DPO, with dpo.label_smoothing cDPO) or ipo (IPO, Azar et al. 2023, as TRL computes it: "
    "(h - 1/(2 beta))^2 with h the difference of the chosen and rejected log-ratios, each divided by its "
    "response's trained tokens)");
  v("dpo.reference", c.dpo.reference,
    "where the reference log-probabilities come from: model (a frozen copy of init.from's weights, run forward "
    "in every step) or precomputed (read from PREFIX_dpo_ref.bin beside each preference dataset; a run that "
    "finds none computes it from init.from's weights before its first step and writes it there)");

  v.section("rl", "Online reinforcement learning [rl] (task = grpo or ppo)");
  v("rl.prompts", c.rl.prompts,
    "JSON Lines of {\"prompt\": ..., \"answer\": ...}: each step samples rl.group answers to each of "
    "train.global_batch_size / rl.group prompts (in a shuffled order per pass over the file)");
  v("rl.tokenizer", c.rl.tokenizer,
    "the tokenizer of the prompts and answers: byte, gpt2, a Hugging Face tokenizer.json (or its directory), or "
    "auto (the run's: data.tokenizer, the resumed checkpoint's or init.from's)");
  v("rl.chat_template", c.rl.chat_template,
    "how a prompt is rendered, as the user turn of a conversation up to the assistant's answer: plain, chatml or "
    "llama3 (as trident tokenize --chat-template); an answer ends at the template's end-of-turn token");
  v("rl.group", c.rl.group, "answers sampled per prompt (G); their rewards are normalised within the group");
  v("rl.max_new_tokens", c.rl.max_new_tokens, "longest answer in tokens; prompt plus answer must fit model.seq_len");
  v("rl.generation_batch", c.rl.generation_batch,
    "answers a rank decodes at once (continuous batching: a finished one's slot takes the next prompt); each "
    "holds a KV cache of model.seq_len positions");
  v("rl.prefill_tokens", c.rl.prefill_tokens,
    "most tokens one generation step feeds (prompts are prefilled in steps of this many, beside running answers)");
  v("rl.temperature", c.rl.temperature, "sampling temperature of the answers (> 0)");
  v("rl.top_k", c.rl.top_k, "sample among the k most likely tokens; 0 = all");
  v("rl.top_p", c.rl.top_p, "sample among the fewest tokens whose probability reaches p; 1 = all");
  v("rl.reward", c.rl.reward,
    "the reward of an answer: exact_match (1 when the answer text, without its end-of-turn token and surrounding "
    "whitespace, equals the record's \"answer\", else 0) or model (rl.reward_model's score of prompt and answer)");
  v("rl.reward_model", c.rl.reward_model,
    "rl.reward = model: a reward model's checkpoint (trident train --task reward, or convert --from-hf of a "
    "*ForSequenceClassification), run on the policy's layout; its vocabulary must be the policy's");
  v("rl.format_pattern", c.rl.format_pattern,
    "a format reward: an ECMAScript regular expression the whole answer text must match to earn rl.format_reward; "
    "empty = none");
  v("rl.format_reward", c.rl.format_reward, "reward added for an answer that matches rl.format_pattern");
  v("rl.clip_eps", c.rl.clip_eps, "the policy ratio is clipped to [1 - eps, 1 + eps]");
  v("rl.kl_beta", c.rl.kl_beta,
    "weight of the KL penalty to the frozen init.from weights: grpo's k3 estimator in the loss, ppo's k1 "
    "(log pi_old - log pi_ref) subtracted from each answer token's reward (the initial coefficient under "
    "rl.kl_target); 0 = no reference model");
  v("rl.ppo_epochs", c.rl.ppo_epochs,
    "optimizer updates on each generated batch; the ratio is against the generation-time log-probabilities");
  v("rl.loss_norm", c.rl.loss_norm,
    "sequence: mean over each answer's tokens, then over the answers (GRPO); token: mean over all answer tokens "
    "of the global batch (DAPO)");
  v("rl.adv_eps", c.rl.adv_eps, "grpo: advantage = (reward - group mean) / (group std + adv_eps)");
  v("rl.gamma", c.rl.gamma, "ppo: GAE's discount per answer token, in (0, 1]");
  v("rl.lambda", c.rl.lambda, "ppo: GAE's lambda, in [0, 1]");
  v("rl.value_clip", c.rl.value_clip,
    "ppo: the value loss is 0.5 max((V - R)^2, (V_old + clip(V - V_old, +-value_clip) - R)^2)");
  v("rl.value_lr", c.rl.value_lr,
    "ppo: the value model's peak learning rate (its own AdamW, train.lr's schedule); 0 = train.lr");
  v("rl.value_from", c.rl.value_from,
    "ppo: the value model's initial weights, a trident checkpoint or Hugging Face directory of the same model "
    "shape: a reward model's (task reward: its score head too) or a language model's transformer with a fresh "
    "value head; empty = init.from's transformer");
  v("rl.kl_target", c.rl.kl_target,
    "ppo: adaptive KL control (Ziegler et al.): the KL per answer the coefficient steers to, starting from "
    "rl.kl_beta; 0 = rl.kl_beta stays fixed");
  v("rl.kl_horizon", c.rl.kl_horizon, "ppo: adaptive KL control's horizon, in answers");

  v.section("log", "Logging [log]");
  v("log.every", c.log.every,
    "print the progress line (loss, lr, grad norm, tokens/s, MFU, memory, comm wait, elapsed, ETA) every N steps");
  v("log.metrics", c.log.metrics, "append one JSON object per optimizer step to this file; empty = off");
  v("log.tensorboard", c.log.tensorboard,
    "write the step metrics as TensorBoard scalars to a new event file in this directory; empty = off");
  v("log.summary", c.log.summary,
    "write the end-of-run performance summary (printed always) as JSON to this file; empty = off");
  v("log.memory_warning", c.log.memory_warning,
    "a rank whose memory in use (GPU: cudaMemGetInfo; CPU: resident set of the node's memory) passes this share "
    "of its capacity at a printed step prints a warning");

  v.section("cuda", "CUDA backend [cuda] (comparisons and debugging; the defaults are the fast path)");
  v("cuda.attention_kernels", c.cuda.attention_kernels,
    "tensor-core attention kernels: auto (the wgmma engine on H100/H200, with the warp-specialized forward at "
    "head size 64; mma.sync elsewhere), wgmma (the wgmma engine's single-warpgroup forward) or mma (the mma.sync "
    "engine everywhere)");
  v("cuda.attention_dkv_parts", c.cuda.attention_dkv_parts,
    "the attention backward's dK/dV blocks: at most this many parts of a key/value group's query heads, a block "
    "each, their sums added in part order (the largest divisor of the group up to it); 0 splits a group only where "
    "its blocks would not fill the GPU (a small batch of few key/value heads)");
  v("cuda.side_stream", c.cuda.side_stream,
    "run side ops (e.g. the fc bias gradient) on a second stream beside the main work; false queues them in order");
  v("cuda.graphs", c.cuda.graphs,
    "replay generation's decode steps (the blocks, the head) as CUDA graphs, one launch each; false queues every op "
    "every step");
  v("cuda.gemm_autotune", c.cuda.gemm_autotune,
    "time cuBLASLt's candidates per GEMM shape and keep the fastest that gives the same bits as the heuristic's "
    "first choice; false uses that first choice");
  v("cuda.gemm_log", c.cuda.gemm_log, "print each GEMM shape's candidates, their times and the choice");
  v("cuda.sync_launches", c.cuda.sync_launches,
    "wait for every kernel to finish, so that an asynchronous fault names the launch that caused it (slow; for "
    "debugging)");
}

}  // namespace trident
