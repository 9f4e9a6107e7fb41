// Layout planner: memory from the same ParamLayout, arena plans and schedule plans the trainer
// uses; time from FLOPs, communication volumes and the pipeline bubble (docs/OPERATIONS.md).
#include "trident/train/planner.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "trident/backend/cuda_backend.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/arena.hpp"
#include "trident/core/error.hpp"
#include "trident/model/layout.hpp"
#include "trident/parallel/pair_exchange.hpp"
#include "trident/parallel/topology.hpp"
#include "trident/model/generator.hpp"
#include "trident/model/gpt.hpp"
#include "trident/train/executor.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/trainer.hpp"
#include "trident/train/optimizer.hpp"
#include "trident/train/sharded_params.hpp"
#include "trident/train/zero_shards.hpp"

namespace trident {

namespace {

size_t product(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

ParamLayout single_stage_layout(const ModelConfig& m, int tp) {
  return ParamLayout(m, StageInfo::of(m, 0, 1), tp, 0, 1, bucket_elements(ParallelConfig{}));
}

DType act_dtype(const Hardware& hw) { return hw.act_bytes == 4 ? DType::F32 : DType::BF16; }

// Elements the optimizer of one rank updates: whole buckets, or their DP shard under ZeRO.
size_t updated_elements(const ParamLayout& layout, const ParallelConfig& p) {
  size_t state = 0;
  for (const Bucket& b : layout.buckets()) state += p.zero ? b.size / p.dp : b.size;
  return state;
}

MemoryEstimate stage_memory(const RunConfig& cfg, const Hardware& hw, int stage) {
  const ModelConfig& m = cfg.model;
  const ParallelConfig& p = cfg.parallel;
  const StageInfo st = StageInfo::of(m, stage, p.pp, p.virtual_stages);
  const ParamLayout layout(m, st, p.tp, 0, p.dp, bucket_elements(p));
  const DType act = act_dtype(hw);
  const int B = cfg.train.micro_batch_size;

  MemoryEstimate e;
  e.stage = stage;
  e.params = static_cast<double>(layout.total()) * dtype_size(act);
  e.grads = static_cast<double>(layout.total()) * sizeof(float);
  const size_t state = updated_elements(layout, p);
  e.optimizer = 3.0 * state * sizeof(float);
  // ZeRO-2: no fp32 gradient of the whole stage but the reduced shards and the staging buffers
  // (ZeroShards), and the parameter shards AdamW writes before the all-gathers.
  if (p.zero >= 2 && p.dp > 1) {
    e.grads = static_cast<double>(state + ZeroShards::staging_elements(layout)) * sizeof(float);
    e.params += static_cast<double>(state) * dtype_size(act);
  }
  // ZeRO-3: the parameter shards and the buffers the buckets are gathered into (ShardedParams),
  // no whole parameters.
  if (p.zero >= 3 && p.dp > 1)
    e.params = static_cast<double>(state + ShardedParams::gathered_elements(layout)) * dtype_size(act);
  // parallel.offload_optimizer: the state moves to host memory with a copy of the gradients it
  // reads and the parameters it writes (Optimizer's host buffers).
  if (p.offload_optimizer) {
    e.host = e.optimizer + static_cast<double>(state) * (sizeof(float) + dtype_size(act));
    e.optimizer = 0;
  }
  const std::vector<Action> plan =
      make_plan(parse_schedule(p.schedule), p.pp, stage, cfg.micro_batches_per_step(), p.virtual_stages);
  // The slots and weight-gradient stashes the trainer allocates for this plan (zero_bubble holds a
  // slot until the weight-gradient pass and keeps, per micro-batch between its input- and
  // weight-gradient passes, the output gradients the weight GEMMs read: GptStage::stash_bytes).
  e.in_flight = PipelineExecutor::slots_needed(plan);
  const ActivationOptions acts = activation_options(cfg);
  // An interleaved plan counts model chunks; a slot holds one chunk's activations.
  e.activations = static_cast<double>(e.in_flight) * GptStage::slot_bytes(m, st, p.tp, B, act, acts);
  e.stashed = PipelineExecutor::stashes_needed(plan);
  if (PipelineExecutor::receives_into_inbox(plan)) e.activations += static_cast<double>(GptStage::inbox_bytes(m, B, act));
  e.activations += static_cast<double>(e.stashed) * GptStage::stash_bytes(m, st, p.tp, B, act, acts);
  e.scratch = static_cast<double>(GptStage::scratch_bytes(m, st, p.tp, B, act, acts));
  // parallel.tp_fused_sum: the other ranks' partials, kPartialSlots slots from each
  // (PairExchange::enable_partials).
  if (p.tp_fused_sum && p.tp >= 2)
    e.scratch += static_cast<double>(kPartialSlots) * (p.tp - 1) *
                 static_cast<double>(GptStage::partial_slot_bytes(B, m.seq_len, m.n_embd, p.tp, act));
  // As the trainer allocates them: inputs, targets and document starts of every micro-batch of the
  // step (I32), its step statistics (f32), and the optimizer's piece tables of the DP rank with
  // the most (shard boundaries cut parameters into slightly different numbers of pieces).
  size_t tables = 0;
  for (int r = 0; r < p.dp; ++r) tables = std::max(tables, Optimizer::table_bytes(layout, p.dp, r, p.zero >= 1));
  e.trainer = 3.0 * cfg.micro_batches_per_step() * B * m.seq_len * sizeof(int32_t) +
              Trainer::kStepStats * sizeof(float) + static_cast<double>(tables);
  // Task dpo (and grpo with rl.kl_beta > 0): ReferenceModel's stage (forward only, its forward
  // plan's slots, no recompute, the run's sequence parallelism) and its NLLs of every micro-batch
  // (per sequence; grpo: per token); with a precomputed reference only those NLLs (read from its file).
  if (cfg.task == "dpo" && cfg.dpo.reference == "precomputed") {
    e.reference = st.last() ? static_cast<double>(cfg.micro_batches_per_step()) * B * sizeof(float) : 0.0;
  } else if (cfg.has_reference()) {
    const int n_micro = cfg.micro_batches_per_step();
    const int ref_slots = std::max(1, peak_in_flight(make_forward_plan(p.pp, stage, n_micro, p.virtual_stages)));
    const ActivationOptions ref_acts{RecomputePlan{}, acts.sequence_parallel};
    const int per_sequence_nlls = cfg.online_rl() ? m.seq_len : 1;   // dpo: one per sequence; online RL: per token
    // Its parameters whole (no ZeRO-2 shard beside them, unlike the policy's e.params).
    e.reference = static_cast<double>(layout.total()) * dtype_size(act) +
                  static_cast<double>(ref_slots) * GptStage::slot_bytes(m, st, p.tp, B, act, ref_acts) +
                  static_cast<double>(GptStage::scratch_bytes(m, st, p.tp, B, act, ref_acts)) +
                  (st.last() ? static_cast<double>(n_micro) * B * per_sequence_nlls * sizeof(float) : 0.0);
  }
  // Online RL: the answer tokens' loss inputs (old log-probabilities, weights, weighted advantages)
  // of every micro-batch, and the generator the rollouts run on the policy.
  if (cfg.online_rl()) {
    e.trainer += 3.0 * cfg.micro_batches_per_step() * B * m.seq_len * sizeof(float);
    e.generation = static_cast<double>(Generator::device_bytes(m, st, p.tp, layout.vocab_local(), act,
                                                               rollout_generation_slots(cfg), m.seq_len,
                                                               rollout_feed_rows(cfg)));
  }
  // Task ppo: the value model is a trained model of its own (value_config's) beside the policy:
  // everything such a model holds but the workspace, which they share, and its host memory.
  if (cfg.task == "ppo") {
    RunConfig value = value_config(cfg);
    value.task = "reward";   // a trained score-head model alone: no reference, generator or value model
    value.rl.kl_beta = 0;
    MemoryEstimate v = stage_memory(value, hw, stage);
    // Its per-token head inputs (old values, returns, weights) instead of a reward model's nothing.
    v.trainer += 3.0 * cfg.micro_batches_per_step() * B * m.seq_len * sizeof(float);
    e.value_model = v.arenas();
    e.host += v.host;
  }
  if (hw.device) {
    e.cuda_context = hw.cuda_context_gib * double(1 << 30);
    e.gemm_workspace = static_cast<double>(kGemmWorkspaceBytes);
    e.nccl_buffers = nccl_buffer_bytes(cfg, hw, stage);
  }
  return e;
}


// Whether some group along `axis` holds ranks of different nodes (nodes of gpus_per_node ranks).
bool spans_nodes(const Topology& topo, Axis axis, int gpus_per_node) {
  for (int r = 0; r < topo.world(); ++r) {
    std::vector<int> g = topo.group(axis, r);
    if (g.front() != r) continue;   // each group once, from its first member
    for (int q : g)
      if (q / gpus_per_node != r / gpus_per_node) return true;
  }
  return false;
}

// Ring all-reduce moves 2(n-1)/n of the buffer through each rank's link (nccl-tests' bus factor).
double ring_factor(int n) { return 2.0 * (n - 1) / n; }

// Parameters of one block: GPT-2's 12 C^2 + 13 C, or Llama's q, k, v (NKV heads), o, gate, up,
// down and two RMSNorm weights (and the q/k/v biases).
double block_param_count(const ModelConfig& m) {
  const double C = m.n_embd, HS = m.head_size(), Q = m.n_head * HS, KV = m.kv_heads() * HS, F = m.ffn();
  if (!m.llama()) return 12 * C * C + 13 * C;
  return C * (Q + 2 * KV) + Q * C + 3 * C * F + 2 * C + (m.qkv_bias ? Q + 2 * KV : 0);
}

// Forward + backward FLOPs per token of one block: 6 per parameter of its GEMMs and 12*T*C for the
// attention scores and the weighted sum.
double block_flops_per_token(const ModelConfig& m) {
  return 6 * block_param_count(m) + 12.0 * m.seq_len * m.n_embd;
}

// Forward + backward GEMM FLOPs per token of one stage, all TP ranks together: its blocks and the
// head over the padded vocabulary on the last stage.
double stage_flops_per_token(const ModelConfig& m, const StageInfo& st, int tp) {
  const double C = m.n_embd;
  double f = st.n_layers() * block_flops_per_token(m);
  if (st.last()) f += 6.0 * m.padded_vocab(tp) * C;
  return f;
}

// The weight-gradient GEMMs' share of stage_flops_per_token: 2 FLOPs per GEMM parameter (of 6)
// in its blocks and the head; what a split backward's W pass computes. The forward (F) has as
// many plus the attention's 4*T*C, the input-gradient pass (B) as many plus its 8*T*C.
double stage_weight_flops_per_token(const ModelConfig& m, const StageInfo& st, int tp) {
  double f = 2 * st.n_layers() * block_param_count(m);
  if (st.last()) f += 2.0 * m.padded_vocab(tp) * m.n_embd;
  return f;
}

// ZeRO-3: seconds of one step's parameter all-gathers that the stage's compute does not hide,
// replayed as ShardedParams does them under `plan`. A pass over the blocks (forward, or backward)
// gathers a bucket of blocks into its rotating buffer unless that buffer still holds it (buckets
// take the buffers in turn, so a backward finds the last buckets of the forward before it, and a
// forward the first buckets of the backward before it). Each gather but a pass's first is
// prefetched one block ahead, beside that block (forward: `block_forward_s`, backward twice that),
// and shows only beyond it. The buckets the blocks do not use (head, embedding, tied embedding)
// are gathered once per step after the update: the one the forward reads first in full, the
// others beside a block's forward. `element_s`: the all-gather's seconds per gathered element.
double zero3_gather_seconds(const ParamLayout& layout, const StageInfo& st, const std::vector<Action>& plan,
                            double element_s, double block_forward_s) {
  const ZeroShards::BufferPlan buffers = ShardedParams::buffer_plan(layout);
  const std::vector<char> kept = ShardedParams::kept_gathered(layout);
  auto gather_s = [&](int b) { return element_s * static_cast<double>(layout.buckets()[b].size); };
  const int first = layout.bucket_of_unit(layout.first_forward_unit());
  double s = 0;
  std::vector<int> held(buffers.elements.size(), -1);
  for (int b = 0; b < static_cast<int>(kept.size()); ++b) {
    if (!kept[b]) continue;
    held[buffers.buffer_of[b]] = b;   // blocks in a kept bucket (the head's) find it gathered
    s += b == first ? gather_s(b) : std::max(0.0, gather_s(b) - block_forward_s);
  }
  std::vector<int> bucket_of_block;   // forward order
  for (int i = 0; i < st.n_layers(); ++i)
    bucket_of_block.push_back(layout.bucket_of_unit(layout.block_unit(st.layer(i))));
  const int n = static_cast<int>(bucket_of_block.size());
  auto pass = [&](bool forward, double hidden_s) {
    int previous = -1;
    for (int k = 0; k < n; ++k) {
      const int b = bucket_of_block[forward ? k : n - 1 - k];
      if (b == previous) continue;
      const bool prefetched = previous >= 0;
      previous = b;
      int& holds = held[buffers.buffer_of[b]];
      if (holds == b) continue;
      holds = b;
      s += prefetched ? std::max(0.0, gather_s(b) - hidden_s) : gather_s(b);
    }
  };
  for (const Action& a : plan) {
    if (a.kind == Action::Fwd) pass(true, block_forward_s);
    if (a.kind == Action::Bwd || a.kind == Action::BwdInput) pass(false, 2 * block_forward_s);
  }
  return s;
}

}  // namespace

int64_t logical_param_count(const ModelConfig& m) {
  const ParamLayout layout = single_stage_layout(m, 1);
  int64_t n = 0;
  for (const ParamInfo& p : layout.params()) n += static_cast<int64_t>(product(p.global_shape));
  return n;
}

int64_t stored_param_count(const ModelConfig& m, int tp) {
  const ParamLayout layout = single_stage_layout(m, tp);
  int64_t n = 0;
  for (const ParamInfo& p : layout.params()) n += static_cast<int64_t>(p.numel);
  return n;
}

double flops_per_token(const ModelConfig& m) {
  return m.n_layer * block_flops_per_token(m) + 6.0 * m.vocab_size * m.n_embd;
}

double block_activation_bytes(const ModelConfig& m, int tp, int micro_batch, int act_bytes, bool sequence_parallel,
                              bool selective, bool full) {
  const BlockDims d = block_dims(m, tp);
  const double N = double(micro_batch) * m.seq_len, a = act_bytes;
  const double rows = sequence_parallel && tp > 1 ? N / tp : N;   // of the residual stream and the norms
  if (full) return a * rows * d.C;                                 // the block output x3
  const double residual = (selective ? 2 : 4) * a * rows * d.C;    // x2, x3 (and ln1, ln2)
  // Over tp: qkv, atty, fch, and fcg unless selective drops it (a Llama's SwiGLU product; GPT-2
  // keeps its GELU output, which the fc GEMM's epilogue computes).
  const double split = a * N * (d.qkv + d.att + d.fc + (selective && d.arch->separate_activation() ? 0 : d.fc_act));
  const double stats = 4.0 * rows * (d.arch->norm_centers() ? 4 : 2) + 4.0 * N * d.NHl;   // norm mean/rstd, attention lse
  return residual + split + stats;
}

double nccl_buffer_bytes(const RunConfig& cfg, const Hardware& hw, int stage) {
  if (!hw.device) return 0;
  const ParallelConfig& p = cfg.parallel;
  // A collective communicator's ring: each channel receives from one neighbour and sends to the
  // other; maxCTAs (tp_comm_ctas, dp_comm_ctas) caps its channels.
  auto ring = [&](int ranks, int ctas) {
    if (ranks < 2) return 0.0;
    return double(ctas > 0 ? std::min(ctas, hw.nccl_channels) : hw.nccl_channels) * kNcclChannelPeerBytes;
  };
  const bool tied_pair = p.pp > 1 && (stage == 0 || stage == p.pp - 1);
  const int pp_peers = (stage > 0) + (stage < p.pp - 1);   // sends and receives with each neighbour
  return ring(p.dp * p.tp * p.pp, 0) + ring(p.tp, p.tp_comm_ctas) + ring(p.dp, p.dp_comm_ctas) +
         (tied_pair ? ring(2, 0) : 0.0) + double(pp_peers) * hw.nccl_channels * kNcclChannelPeerBytes;
}

double offload_seconds(double state, double last_bucket, double micro_compute_s, int ranks_per_host,
                       const Hardware& hw) {
  const double pcie = hw.pcie_gbps * 1e9;
  const double gradients_down =
      std::max(last_bucket * sizeof(float) / pcie, state * sizeof(float) / pcie - 2.0 / 3.0 * micro_compute_s);
  const double update = state * (7 * sizeof(float) + hw.act_bytes) / (hw.host_adamw_gbps * 1e9 / ranks_per_host);
  const double parameters_up = state * hw.act_bytes / pcie;
  return gradients_down + std::max(update, parameters_up);
}

double parameter_pass_seconds(const ParamLayout& layout, const ParallelConfig& p, int n_micro, const Hardware& hw) {
  const double updated = double(updated_elements(layout, p)), f32 = sizeof(float);
  double bytes = (p.offload_optimizer ? 0.0 : updated * (7 * f32 + hw.act_bytes)) + updated * f32;
  if (p.zero >= 2 && p.dp > 1) {
    const std::vector<char> once = ZeroShards::reduced_once(layout);
    // Zeroed per reduction; the reduced share added to the shard from the second on.
    for (size_t b = 0; b < once.size(); ++b) {
      const double size = double(layout.buckets()[b].size), reductions = once[b] ? 1 : n_micro;
      bytes += reductions * size * f32 + (reductions - 1) * 3 * f32 * size / p.dp;
    }
  } else {
    bytes += double(layout.total()) * f32;
  }
  return bytes / (hw.hbm_gbps * 1e9);
}

double pipeline_bubble(int pp, int n_micro, int virtual_stages) {
  const double fill = double(pp - 1) / virtual_stages;
  return fill / (n_micro + fill);
}

MemoryEstimate estimate_memory(const RunConfig& cfg, const Hardware& hw) {
  MemoryEstimate worst;
  for (int s = 0; s < cfg.parallel.pp; ++s) {
    MemoryEstimate e = stage_memory(cfg, hw, s);
    if (s == 0 || e.total() > worst.total()) worst = e;
  }
  return worst;
}

TimeEstimate estimate_time(const RunConfig& cfg, const Hardware& hw) {
  const ModelConfig& m = cfg.model;
  const ParallelConfig& p = cfg.parallel;
  const int B = cfg.train.micro_batch_size, n_micro = cfg.micro_batches_per_step();
  const double tokens_micro = double(B) * m.seq_len;
  const double act_msg = tokens_micro * m.n_embd * hw.act_bytes;   // one (B, T, C) activation
  const Topology topo(p.dp, p.tp, p.pp);
  const double nvlink = hw.nvlink_gbps * 1e9, ib = hw.ib_gbps * 1e9;
  auto bandwidth = [&](Axis a) { return spans_nodes(topo, a, hw.gpus_per_node) ? ib : nvlink; };
  const double bw_tp = bandwidth(Axis::TP), bw_pp = bandwidth(Axis::PP), bw_dp = bandwidth(Axis::DP);

  TimeEstimate t;
  double micro_s = 0, micro_compute = 0, micro_tp = 0, micro_pp = 0, micro_weight = 0, dp_s = 0, offload_s = 0,
         memory_s = 0;
  const double rate = hw.gemm_tflops * 1e12;
  const ScheduleKind schedule = parse_schedule(p.schedule);
  // The host memory the host AdamWs of a node's ranks share.
  const int ranks_per_host = std::max(1, std::min(p.dp * p.tp * p.pp, hw.gpus_per_node));
  for (int s = 0; s < p.pp; ++s) {
    const StageInfo st = StageInfo::of(m, s, p.pp);
    // Fully recomputed blocks run their forward (a third of their training FLOPs) twice.
    const double recomputed = cfg.recompute_plan().full / 3.0 * block_flops_per_token(m);
    // Tasks dpo, grpo and ppo: the frozen reference's forward (a third of the stage's training
    // FLOPs; none when precomputed or without a KL penalty) and the head's second pass over the
    // logits (its forward GEMM again) on the last stage. Online RL's generation is not counted.
    const bool in_step = cfg.has_reference() && !(cfg.task == "dpo" && cfg.dpo.reference == "precomputed");
    const bool two_pass_head = cfg.task == "dpo" || cfg.online_rl();
    // Task ppo: the value model's training and its forward over the rollout (its head is a dot
    // product per token: not counted).
    const double value_model = cfg.task == "ppo" ? 4.0 / 3.0 * st.n_layers() * block_flops_per_token(m) : 0.0;
    const double reference = (in_step ? stage_flops_per_token(m, st, p.tp) / 3.0 : 0.0) +
                             (two_pass_head && st.last() ? 2.0 * m.padded_vocab(p.tp) * m.n_embd : 0.0) + value_model;
    const double compute = (stage_flops_per_token(m, st, p.tp) + recomputed + reference) * tokens_micro / p.tp / rate;
    const double weight = stage_weight_flops_per_token(m, st, p.tp) * tokens_micro / p.tp / rate;
    // Per layer two all-reduces of (B, T, C) forward (attention and MLP outputs), exposed (with
    // parallel.tp_overlap alone too: on H100 what they save the GEMMs beside them lose, 73.2%
    // against 73.0% tp2 scaling; with tp_fused_sum the copy engines move them beside other work,
    // which keeps every SM, and they are not counted: with tp_overlap beside the other half's,
    // under sequence parallelism beside the GEMMs of the other ranks' rows); the
    // embedding sum on the first stage; on the last the head's input gradient and the fp32 row
    // max and softmax statistics (3 floats a token). Per layer two more backward (the
    // LayerNorms' input gradients), each beside the weight-gradient GEMMs of its part and exposed
    // only beyond them: fcproj's and fc's (16 C^2 FLOPs a token over tp), proj's and qkv's (8 C^2).
    double tp_s = 0;
    if (p.tp > 1) {
      const bool forward_hidden = p.tp_fused_sum && (p.tp_overlap || p.sequence_parallel);
      const double tp_bytes = ((forward_hidden ? 0 : 2.0 * st.n_layers()) + st.first() + st.last()) * act_msg +
                              (st.last() ? 12 * tokens_micro : 0);
      const double all_reduce = ring_factor(p.tp) * act_msg / bw_tp;
      const double dw_flops = double(m.n_embd) * m.n_embd * tokens_micro / p.tp;
      tp_s = ring_factor(p.tp) * tp_bytes / bw_tp +
             st.n_layers() * (std::max(0.0, all_reduce - 16 * dw_flops / rate) +
                              std::max(0.0, all_reduce - 8 * dw_flops / rate));
    }
    // An activation forward and a gradient backward cross each stage boundary per micro-batch.
    const double pp_s = p.pp > 1 ? 2 * act_msg / bw_pp : 0;
    // The host update runs after the step's gradients are final, on every stage at once: the
    // stage with the most to update sets the time.
    const ParamLayout layout(m, st, p.tp, 0, p.dp, bucket_elements(p));
    memory_s = std::max(memory_s, parameter_pass_seconds(layout, p, n_micro, hw));
    if (p.offload_optimizer) {
      const Bucket& last = layout.buckets()[layout.bucket_of_unit(layout.first_forward_unit())];
      offload_s = std::max(offload_s, offload_seconds(double(updated_elements(layout, p)),
                                                      double(p.zero ? last.size / p.dp : last.size), compute,
                                                      ranks_per_host, hw));
    }
    if (compute + tp_s + pp_s > micro_s) {
      micro_s = compute + tp_s + pp_s;
      micro_compute = compute;
      micro_tp = tp_s;
      micro_pp = pp_s;
      micro_weight = weight;
    }
    if (p.dp > 1) {
      const double grad_bytes = layout.total() * 4.0, param_bytes = double(layout.total()) * hw.act_bytes;
      const double shard = double(p.dp - 1) / p.dp;
      // Buckets reduce while the last micro-batch's backward (about 2/3 of its compute) runs.
      // Under ZeRO-1 the all-gather of the bucket the forward reads first follows the optimizer;
      // the others run beside the next step's first forward (about 1/3).
      const double reduce = (p.zero ? shard : ring_factor(p.dp)) * grad_bytes / bw_dp;
      // ZeRO-2 reduce-scatters the buckets of blocks on every micro-batch, each micro-batch's
      // beside its own backward: the earlier micro-batches' transfers add what they do not hide.
      double staged = 0;
      if (p.zero >= 2) {
        const std::vector<char> once = ZeroShards::reduced_once(layout);
        double staged_bytes = 0;
        for (size_t b = 0; b < once.size(); ++b)
          if (!once[b]) staged_bytes += 4.0 * layout.buckets()[b].size;
        staged = (n_micro - 1) * std::max(0.0, shard * staged_bytes / bw_dp - 2.0 / 3.0 * compute);
      }
      const double first_bytes =
          double(layout.buckets()[layout.bucket_of_unit(layout.first_forward_unit())].size) * hw.act_bytes;
      double gather = p.zero ? shard * first_bytes / bw_dp +
                                   std::max(0.0, shard * (param_bytes - first_bytes) / bw_dp - compute / 3.0)
                             : 0;
      // ZeRO-3 gathers no whole stage after the update but each bucket of blocks where a forward
      // or backward needs it.
      if (p.zero >= 3) {
        const std::vector<Action> plan = make_plan(schedule, p.pp, s, n_micro);
        const double block_forward_s = block_flops_per_token(m) / 3 * tokens_micro / p.tp / rate;
        gather = zero3_gather_seconds(layout, st, plan, shard * hw.act_bytes / bw_dp, block_forward_s);
      }
      dp_s = std::max(dp_s, std::max(0.0, reduce - 2.0 / 3.0 * compute) + gather + staged);
    }
  }
  // The tied embedding's gradient is summed between the first and the last stage.
  const double embed_s =
      p.pp > 1 ? double(m.padded_vocab(p.tp)) / p.tp * m.n_embd * sizeof(float) * ring_factor(2) / bw_pp : 0;

  // The slowest stage sets the pace: n_micro micro-batch slots plus pp-1 slots of fill and drain
  // (of one model chunk each, 1/virtual_stages of a micro-batch's, when interleaved). ZB-H1 fills
  // the drain with weight-gradient passes: (pp-1)(F + B - W) idle per step against 1F1B's
  // (pp-1)(F + B + W), with F + B + W the micro-batch's time and W its weight-gradient GEMMs'.
  t.bubble_s = schedule == ScheduleKind::ZeroBubble ? (p.pp - 1) * (micro_s - 2 * micro_weight)
                                                    : micro_s * (p.pp - 1) / p.virtual_stages;
  t.bubble = t.bubble_s / (n_micro * micro_s + t.bubble_s);
  t.compute_s = micro_compute * n_micro;
  t.tp_s = micro_tp * n_micro;
  t.pp_s = micro_pp * n_micro + embed_s;
  t.dp_s = dp_s;
  t.offload_s = offload_s;
  t.memory_s = memory_s;
  t.step_s = t.compute_s + t.tp_s + t.pp_s + t.dp_s + t.bubble_s + t.offload_s + t.memory_s;
  t.tokens_per_s = double(cfg.train.global_batch_size) * m.seq_len / t.step_s;
  return t;
}

void apply_layout(RunConfig& cfg, const Layout& l) {
  cfg.parallel.dp = l.dp;
  cfg.parallel.tp = l.tp;
  cfg.parallel.pp = l.pp;
  cfg.parallel.zero = l.zero;
  cfg.parallel.schedule = l.schedule;
  cfg.parallel.virtual_stages = 1;   // the layouts searched run gpipe, 1f1b or zero_bubble: one model chunk per rank
  cfg.train.micro_batch_size = l.micro_batch_size;
}

std::vector<Candidate> rank_layouts(const RunConfig& base, const Hardware& hw) {
  std::vector<Candidate> out;
  const int n = hw.gpus, G = base.train.global_batch_size;
  for (int tp = 1; tp <= n; ++tp) {
    if (n % tp) continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp) continue;
      const int dp = n / (tp * pp);
      if (G % dp) continue;
      // validate_run_config drops what does not combine (ZeRO-3 runs under gpipe and 1f1b only).
      for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero)
        for (const char* schedule : {"1f1b", "gpipe", "zero_bubble"}) {
          if (pp == 1 && std::string(schedule) != "1f1b") continue;   // one stage: the same plan
          for (int B = 1; B <= G / dp; ++B) {
            if ((G / dp) % B) continue;
            Candidate c;
            c.layout = Layout{dp, tp, pp, zero, B, schedule};
            RunConfig cfg = base;
            apply_layout(cfg, c.layout);
            try {
              validate_run_config(cfg, n);
            } catch (const InputError&) {
              continue;
            }
            c.memory = estimate_memory(cfg, hw);
            c.time = estimate_time(cfg, hw);
            c.fits = c.memory.total() <= hw.memory_gib * double(1 << 30);
            out.push_back(c);
          }
        }
    }
  }
  // Throughputs within a relative 1e-6 are ties (equal up to rounding), broken as documented.
  auto key = [](const Candidate& c) {
    const Layout& l = c.layout;
    return std::make_tuple(!c.fits, -std::llround(std::log(c.time.tokens_per_s) * 1e6), -l.micro_batch_size,
                           c.memory.total(), l.tp, l.pp, l.zero, l.schedule);
  };
  std::stable_sort(out.begin(), out.end(), [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  return out;
}

void explain_no_valid_layout(const RunConfig& base, int gpus) {
  RunConfig simplest = base;
  apply_layout(simplest, Layout{gpus, 1, 1, 0, 1, "1f1b"});
  validate_run_config(simplest, gpus);
  throw InputError(str("no valid layout of ", gpus, " ranks for this model and train.global_batch_size = ",
                       base.train.global_batch_size, " (tp must divide model.n_head, pp model.n_layer, and ",
                       "micro_batch_size*dp train.global_batch_size)"));
}

}  // namespace trident
