// GptStage: the transformer blocks (GPT-2 or Llama, model.arch) of this rank's pipeline stage and
// TP shard, with forward and backward of one micro-batch written once against Backend& and the
// TP/stage communicators.
// Parameters (compute dtype) and gradients (fp32) are single flat buffers laid out by
// ParamLayout; activations of each in-flight micro-batch live in a "slot".
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "trident/backend/backend.hpp"
#include "trident/core/arena.hpp"
#include "trident/config/run_config.hpp"
#include "trident/model/block.hpp"
#include "trident/model/layout.hpp"
#include "trident/model/tp_strategy.hpp"
#include "trident/parallel/groups.hpp"

namespace trident {

struct StageTensors {
  TensorView wte, wpe, lnf_w, lnf_b;   // empty where this stage does not hold them (llama: wpe, lnf_b)
  TensorView lm_head;                  // the head's (V/tp, C) matrix: wte when the embeddings are tied
  TensorView score_w;                  // a reward model's (1, C) score head (it has no lm_head)
  std::vector<BlockTensors> blocks;    // this stage's blocks in forward order
};

// The head's sums over the micro-batches since they were last zeroed: of the token losses (LM head)
// or the pair losses (tasks reward and dpo); for a preference task the pairs whose chosen answer
// is ahead and the sum of the margins, score(chosen) - score(rejected) for a reward model and the
// implicit rewards' difference for dpo; for dpo also the sums of the chosen and rejected rewards.
// On the device the same five values are a (kLossSums) f32 accumulator in this order.
struct LossSums {
  double loss = 0, correct = 0, margin = 0, chosen = 0, rejected = 0;
};
constexpr int kLossSums = 5;

// Called with a unit id as soon as that unit's gradients are final for the step.
using UnitDone = std::function<void(int unit)>;

// Parameters that may still be on their way after an update (ZeRO-1 gathers each bucket's
// updated shards lazily) or that are not held at all between uses (ZeRO-3 gathers a bucket of
// blocks again for each forward and backward). The forward and the backward call need(unit)
// before their first op that reads the unit's parameters and prefetch(unit) where starting their
// transfer overlaps well; a need() also ends the use of the parameters needed before it, except
// those of the head, the embedding and the tied embedding.
class ParamFetch {
 public:
  virtual ~ParamFetch() = default;
  virtual void need(int unit) = 0;       // ops queued from now on see the unit's current values
  virtual void prefetch(int unit) = 0;   // start bringing them; no wait
};

// How a stage keeps its activations for the backward; both options decide the sizes of its slots.
struct ActivationOptions {
  // parallel.recompute: the first `full` blocks of the stage keep only their output from the
  // forward, and the backward recomputes the rest from their input; with `selective` the others
  // keep all but their norm outputs and MLP activation, which the backward redoes from the norms'
  // saved inputs and the MLP's pre-activation. Recomputed activations live in one shared set, and
  // gradients are bit for bit those without recompute.
  RecomputePlan recompute;
  // parallel.sequence_parallel (no effect with tp = 1): each TP rank runs the norms, residual adds
  // and the row-parallel bias and norm gradients on its own 1/tp of the rows (N = B*T must divide
  // by tp), and its slots keep only those rows of the residual stream (x2, x3, the stage
  // boundary's activation) and of the norms' outputs and statistics (Korthikanti et al. 2022); the
  // norm outputs are all-gathered for the column-parallel GEMMs, forward and again backward, and
  // the TP all-reduces become reduce-scatters into own rows.
  bool sequence_parallel = false;
  // parallel.schedule = zero_bubble: the weight-gradient stashes of the split backward, one per
  // micro-batch between its backward_input and its backward_weight (PipelineExecutor::
  // stashes_needed of the plan); 0 for the other schedules.
  int weight_stashes = 0;
  // A (B, T, C) buffer that receives the previous stage's activation until the forward copies it
  // into the micro-batch's slot (PipelineExecutor::receives_into_inbox: zero_bubble, whose next
  // input arrives before the deferred weight pass frees a slot).
  bool recv_inbox = false;
};

// The initial values of this rank's shard of p (GptStage::init_params) into dst (p.numel): each
// element a pure function of (seed, name, global index); padding elements are left as they are.
void init_param_values(const ParamInfo& p, uint64_t seed, float* dst);

// Where the backward writes parameter gradients when the stage has no gradient buffer of its own
// (ZeRO-2: the gradients of whole buckets of blocks are staged in a few reused buffers and reduced
// over DP on every micro-batch). grad_view gives the views once, at construction; the backward
// calls begin_unit before it writes a block unit's gradients (also before the next block's
// LayerNorm backward writes this one's output bias) and end_unit once they are complete for the
// micro-batch, at the point where it would announce the unit.
class GradStaging {
 public:
  virtual ~GradStaging() = default;
  // fp32 gradients of flat elements [offset, offset + n) of ParamLayout (one parameter or a packed group).
  virtual TensorView grad_view(size_t offset, size_t n) const = 0;
  // Whether the unit's gradients are reduced on every micro-batch (else once, on the last).
  virtual bool per_micro(int unit) const = 0;
  virtual void begin_unit(int unit) = 0;
  virtual void end_unit(int unit) = 0;
};

// Where the parameters live when the stage has no whole parameter buffer of its own (ZeRO-3:
// each DP rank keeps its shard of every bucket, and a bucket is gathered whole into a reused
// buffer when the forward or backward asks for its units, see ParamFetch). param_view gives the
// views once, at construction.
class ParamStore {
 public:
  virtual ~ParamStore() = default;
  // Compute-dtype parameters of flat elements [offset, offset + n) of ParamLayout (one parameter or
  // a packed group): valid while ParamFetch::need of their unit holds.
  virtual TensorView param_view(size_t offset, size_t n) const = 0;
  // Sets flat elements [offset, offset + from.numel) from `from` (backend memory, fp32 or the
  // compute dtype, each element rounded once to the compute dtype).
  virtual void assign(size_t offset, TensorView from) = 0;
  // Every parameter's current value into `into` (layout().total() elements, compute dtype).
  // Collective over the DP group.
  virtual void copy_all(TensorView into) const = 0;
};

class GptStage {
 public:
  // Without `with_grads` there is no gradient buffer (grads() is empty): forward only, for
  // evaluation and generation, which save its fp32 copy of every parameter (and recompute
  // nothing). With `staging` (and with_grads) the gradients live where it says and grads() is empty;
  // with `store` the parameters do, and params() is empty.
  // With virtual_stages > 1 (parallel.schedule = interleaved) the stage holds that many model
  // chunks (StageInfo); a slot holds one chunk's activations, and forward and backward name the
  // chunk they run.
  GptStage(const ModelConfig& m, const ParallelGroups& groups, Backend& be, int micro_batch, int n_slots,
           size_t bucket_elems, bool with_grads = true, const ActivationOptions& acts = {},
           GradStaging* staging = nullptr, int virtual_stages = 1, ParamStore* store = nullptr);
  ~GptStage();
  GptStage(const GptStage&) = delete;
  GptStage& operator=(const GptStage&) = delete;

  const ModelConfig& config() const { return m_; }
  const StageInfo& stage() const { return stage_; }
  const ParamLayout& layout() const { return layout_; }
  Backend& backend() const { return be_; }
  int micro_batch() const { return B_; }
  int n_slots() const { return n_slots_; }
  TensorView params() const { return params_; }   // compute dtype, layout().total(); empty with a ParamStore
  TensorView grads() const { return grads_; }     // fp32, layout().total(); empty without with_grads or with staging

  // Bytes of one activation slot (one model chunk's) and of the scratch of a stage: the plans the
  // constructor allocates, so memory estimates (trident plan) are exact.
  static size_t slot_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                           const ActivationOptions& acts = {});
  static size_t scratch_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                              const ActivationOptions& acts = {});
  // Bytes of one weight-gradient stash of the split backward (backward_input) beside the slots:
  // per block the fp32 bias and norm gradients (6C + fc + qkv), and those of the two (N, C)
  // residual gradients and the (N, fc) and (N, qkv) GEMM output gradients that the micro-batch's
  // slot cannot hold in its dead activations (none without recompute and sequence parallelism).
  static size_t stash_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                            const ActivationOptions& acts = {});
  // Bytes of one slot of the fused TP sums (parallel.tp_fused_sum; PairExchange::enable_partials
  // reserves kPartialSlots of them per other rank): with tp = 2 a whole (B*T, C) partial (a
  // LayerNorm input gradient of the micro-batch), beyond (sequence parallelism) one rank's rows.
  static size_t partial_slot_bytes(int micro_batch, int seq_len, int C, int tp, DType act) {
    const size_t whole = static_cast<size_t>(micro_batch) * seq_len * C * dtype_size(act);
    return tp <= 2 ? whole : whole / static_cast<size_t>(tp);
  }
  // Bytes of the receive inbox (ActivationOptions::recv_inbox): one (B, T, C) activation.
  static size_t inbox_bytes(const ModelConfig& m, int micro_batch, DType act);
  // Bytes of this stage's activation slots and weight-gradient stashes, all of them (what the
  // constructor allocated).
  size_t activation_bytes() const { return act_buf_.bytes(); }
  int n_stashes() const;

  // Where the forward gets parameters that an update may not have delivered yet (none: they are
  // always current).
  void set_param_fetch(ParamFetch* fetch) { fetch_ = fetch; }
  // parallel.tp_overlap: with tp > 1 the forward runs each micro-batch as two halves so that
  // every TP all-reduce (with sequence parallelism: all-gather and reduce-scatter) runs beside the
  // other half's work (HalvesForward, SequenceHalvesForward in tp_overlap.cpp). Needs an even
  // micro-batch, with sequence parallelism one that divides by 2 tp; no effect with tp = 1.
  void set_tp_overlap(bool on);
  // parallel.tp_sm_margin: with tp > 1, the GEMMs that run beside a TP all-reduce (the
  // tp_overlap forward, the backward's weight-gradient GEMMs) leave this many SMs to it.
  void set_tp_sm_margin(int sms) {
    tp_sm_margin_ = g_.topo.tp() > 1 ? sms : 0;
    choose_tp_strategy();
  }
  // parallel.tp_fused_sum: with tp = 2, the TP sums that a norm reads (the blocks' forward
  // outputs and the backward's norm input gradients) are exchanged as partials (on GPUs by the
  // copy engines, no SM) and added inside the LayerNorm or RMSNorm kernels: same values as the
  // all-reduces (with sequence parallelism, the reduce-scatters and all-gathers: SequenceTp).
  // Collective over the TP group; an input error with the reason where the group cannot (two
  // nodes, no peer access).
  void set_tp_fused_sum(bool on);
  // parallel.tp_split_layernorm_bwd (with tp_fused_sum, so tp = 2): the backward's LayerNorms
  // run on this TP rank's half of the rows, as under sequence parallelism (each rank receives
  // the other's partial input gradient of its rows only; the row-parallel bias and LayerNorm
  // gradients are TP-summed at the step's end), and the residual gradient's rows are gathered
  // beside a weight-gradient GEMM. The forward stays replicated.
  void set_tp_split_layernorm_bwd(bool on);
  // Every parameter of the stage current for the ops queued next (for readers of weights()
  // other than the forward, which asks unit by unit).
  // Not with a ParamStore, whose reused buffers hold a few units at a time.
  void need_all_params() {
    TRIDENT_CHECK(!store_, "need_all_params: the parameters are sharded over DP (parallel.zero = 3)");
    for (int u = 0; u < layout_.n_units(); ++u) need(u);
  }
  // Sets flat elements [offset, offset + from.numel) of the parameters from `from` (backend memory,
  // fp32 or the compute dtype): into params(), or the ParamStore's shards.
  void assign_params(TensorView from, size_t offset = 0);
  // Every parameter's current value into `into` (layout().total(), compute dtype): params() copied,
  // or with a ParamStore gathered (collective over DP).
  void copy_params(TensorView into) const;

  // GPT-2 initialisation of this shard: each element is a pure function of (seed, name, global index).
  void init_params(uint64_t seed);
  // The parameters from this rank's layout().total() fp32 values on the host, each rounded once to
  // the compute dtype (a checkpoint's or converted weights); waits until they are in place.
  void set_params(const std::vector<float>& params);
  void zero_grads();

  // Stage boundary buffers of a slot (of the chunk it runs), (B, T, C) in the compute dtype; input
  // and output under sequence parallelism this rank's rows only, (B*T/tp, C).
  TensorView slot_input(int slot) const;    // received activation (or the embedding output on stage 0)
  TensorView slot_output(int slot) const;   // the last block's output, sent to the next stage
  TensorView slot_grad(int slot) const;     // gradient w.r.t. the output on entry to backward, w.r.t. the input on exit
  // ActivationOptions::recv_inbox: where the previous stage's activation is received, and its copy
  // into the slot that the micro-batch's forward takes.
  TensorView recv_inbox() const;
  void take_input(int slot);

  // Host tokens of one micro-batch: inputs on the first stage, targets on the last, (B, T) each.
  void set_tokens(int slot, const int32_t* inputs, const int32_t* targets);
  // The same from I32 tensors (B*T each) already in backend memory: queued, no host wait.
  void set_tokens(int slot, TensorView inputs, TensorView targets);
  // Packed sequences (data.pack): the micro-batch's doc_start (B*T I32 in backend memory, see
  // backend.hpp), read by every stage: positions restart and attention stays in each document.
  // An empty view makes the slot's sequences unpacked again (one document each).
  void set_doc_starts(int slot, TensorView doc_start);

  // Forward of one micro-batch through model chunk `chunk`. On the last stage's last chunk it also
  // computes the loss and, with `with_grad`, the backward of the head (dloss = d(total loss)/d(token
  // loss), or of a pair's loss for a reward model), leaving slot_grad ready.
  void forward(int slot, bool with_grad, float dloss, const UnitDone& unit_done, int chunk = 0);
  // Backward of one micro-batch through the chunk from slot_grad; parameter gradients accumulate (+=).
  void backward(int slot, const UnitDone& unit_done, int chunk = 0);
  // The same backward in two passes (parallel.schedule = zero_bubble, ZB-H1). backward_input
  // leaves the input gradient in slot_grad: everything of backward but the blocks' weight GEMMs
  // (qkv, proj, fc, fcproj), the embedding's backward included. It keeps those GEMMs' output
  // gradients, and the blocks' bias and norm gradients of the micro-batch, in weight-gradient
  // stash `stash`; backward_weight adds the latter to the parameter gradients and runs the
  // GEMMs with the slot's activations (redoing what recompute or sequence parallelism does not
  // keep whole) on the operands of backward's calls, so the gradients are the same bits. The
  // slot and the stash stay held until backward_weight; unit_done (the last micro-batch)
  // announces the block and embedding units from backward_weight, after their last contribution.
  void backward_input(int slot, int stash, const UnitDone& unit_done, int chunk = 0);
  void backward_weight(int slot, int stash, const UnitDone& unit_done, int chunk = 0);

  // The LossSums computed since the last call (zeros on stages without the head).
  LossSums take_loss_sums();
  // The same on the device: the (kLossSums) f32 accumulator (last stage only; empty elsewhere),
  // and its reset; neither waits for the host.
  TensorView loss_sums() const;
  void zero_loss_sums();
  // A reward model's scores (B) of the micro-batch the last forward ran (last stage; waits).
  std::vector<float> last_scores() const;

  // Task dpo: the head's loss is DPO's (Backend::dpo_loss, beta and label smoothing from a) over
  // the micro-batch's B/2 pairs, rows 2i (chosen) and 2i + 1 (rejected), against the reference
  // NLLs given by set_sequence_nll; forward()'s dloss is then d(total loss)/d(pair loss), and the
  // LossSums are those of pairs (see Backend::dpo_loss). The head computes its logits twice (see
  // head_forward).
  void set_dpo(const DpoArgs& a);
  // The slot's per-sequence sums of token losses (negative log-probabilities of the trained
  // targets), (B) f32 on the last stage: `reference` the frozen reference model's for the DPO
  // head to read, `out` where the head writes this model's; either may be empty.
  void set_sequence_nll(int slot, TensorView reference, TensorView out);
  // Task grpo: the head's loss is the clipped policy-ratio objective (Backend::policy_loss, clip
  // and KL weight from a) over the answer tokens that set_policy_inputs gives for each slot:
  // (B*T) f32 each, in backend memory, `ref_token_nll` empty without a KL penalty. forward()'s
  // dloss scales the weights; the LossSums are [loss, clipped tokens, sum of k3, sum of the
  // policy's exact entropies, 0] over the answer tokens. The head computes its logits twice (see
  // head_forward).
  void set_policy_loss(const PolicyArgs& a);
  void set_policy_inputs(int slot, TensorView old_logp, TensorView coef, TensorView coef_adv, TensorView ref_token_nll);
  // Task ppo's value model (a score head, model.score_head): the head gives a value at every
  // position (Backend::value_fwd) instead of a pair's scores, and its loss is PPO's clipped value
  // loss (clip from a) over the answer positions that set_value_inputs gives for each slot:
  // old_values, returns and coef (B*T) f32 in backend memory, or all three empty for the values
  // alone (forward only), which go to values_out (B*T) f32 when given. forward()'s dloss scales
  // the gradient; the LossSums are [loss, clipped positions, sum of coef (V - R)^2, 0, 0].
  void set_value_loss(const ValueArgs& a);
  void set_value_inputs(int slot, TensorView old_values, TensorView returns, TensorView coef, TensorView values_out);
  // Where the head writes the slot's per-position token losses (B*T) f32 (0 at ignored targets)
  // on the last stage: the reference model's per-token log-probabilities; empty: nowhere.
  void set_token_nll(int slot, TensorView out);
  // Full-vocabulary logits (B*T, V) of the slot's tokens, on every rank (single-stage layouts:
  // generation and reference tests). The TP shards are gathered.
  std::vector<float> forward_logits(int slot);
  // Final LayerNorm and full-vocabulary logits (rows, V) of final hidden states x (rows, C), on
  // every TP rank of the last stage.
  std::vector<float> head_logits(TensorView x, int rows);

  const StageTensors& weights() const { return p_; }
  const ParallelGroups& groups() const { return g_; }
  BlockShape block_shape(int rows) const;
  // Llama: the RoPE table (positions(), HS) f32 of rope_table(); empty for gpt2.
  TensorView rope() const { return rope_; }

 private:
  struct Slot;
  struct Scratch;
  struct Dims;
  struct BlockStash;
  class Pass;
  struct WeightStash;
  static void plan_slot(ArenaLayout& a, Slot& s, const Dims& d);
  static void plan_stash(ArenaLayout& a, WeightStash& w, const Dims& d);
  // Block i's stash for slot s's micro-batch: w's buffers, and the slot's activations where the
  // stash keeps gradients over them.
  BlockStash stash_views(const Slot& s, const WeightStash& w, int i) const;
  // backward and backward_input: `stash` -1 for the whole backward, else the stash that
  // backward_input keeps the weight GEMMs' operands in.
  void backward_pass(int slot, const UnitDone& unit_done, int chunk, int stash);
  static void plan_scratch(ArenaLayout& a, Scratch& sc, const Dims& d);
  // The chunk that forward and backward run: chunk_ is it as a stage of its own (embedding on
  // the first virtual stage, head on the last); block i of the chunk is the stage's block0_ + i,
  // with parameters block_w(i) and gradients block_g(i).
  void select_chunk(int chunk);
  const BlockTensors& block_w(int i) const { return p_.blocks[block0_ + i]; }
  const BlockTensors& block_g(int i) const { return gr_.blocks[block0_ + i]; }
  // Embedding (first stage) and blocks, the blocks by the forward strategy (tp_overlap_fwd_ or
  // tp_); returns the last output.
  TensorView forward_blocks(Slot& s);
  // Block i's input: the stage's (this rank's rows under sequence parallelism) or the output of
  // block i - 1.
  TensorView block_input(const Slot& s, int i) const;
  // Starts the TP sums of the replicated (LayerNorm, row-parallel bias) gradients of stage block
  // `block` (-1: the final LayerNorm), which sequence parallelism and the split LayerNorm
  // backward leave as partial sums over each rank's rows. Called once a step, after the last
  // micro-batch's contribution; wait_replicated_sums() before the gradients are announced.
  void sum_replicated_grads_over_tp(int block);
  void wait_replicated_sums();
  // The TP strategy of the options (tp_sm_margin_, fused_sum_, split_bwd_, tp_overlap_ and
  // sequence parallelism), picked again whenever one of them is set.
  void choose_tp_strategy();
  void prefetch_after_block(int i);
  void require_grads(const char* op) const;   // fatal for a stage built without gradients
  // Causal attention of a micro-batch of `batch` sequences: a.atty, a.lse from a.qkv (after the
  // architecture's position step on its q and k); the sequences start at row row0 of the micro-batch.
  void attend(const BlockActs& a, int batch, size_t row0 = 0);
  // doc_start of the micro-batch being computed from its row row0, nullptr when unpacked.
  const int32_t* doc_starts(size_t row0 = 0) const { return docs_ ? docs_ + row0 : nullptr; }
  // Llama with more TP ranks than key/value heads: the gradients of block i's K and V (each
  // rank's head shared by kv_replicas ranks) summed over the ranks that share them.
  void sum_kv_replicas(int block);
  // The activations block i's ops read and write: the slot's, with the shared ones where the
  // slot keeps none (a fully recomputed block's but its output x3; the norm outputs and MLP
  // activation under selective recompute) and the norm outputs whole (N, C) under sequence
  // parallelism, of which the slot keeps this rank's rows.
  BlockActs work_acts(const Slot& s, int i) const;
  // Recomputes block i's activations from its input x into the shared ones (parallel.recompute).
  BlockActs recompute_block(const Slot& s, int i, TensorView x);
  // Block i's activations for its backward, input x: recomputed (full), or the slot's with what it
  // does not keep redone (selective) and the norm outputs gathered whole again (sequence
  // parallelism; each gather runs beside the GEMMs before the weight-gradient GEMM that reads it,
  // which waits for it: wait_norm_gather). The norm outputs and the MLP activation feed only the
  // weight-gradient GEMMs: without `weights` (backward_input) they are neither redone nor gathered.
  BlockActs backward_acts(const Slot& s, int i, TensorView x, bool weights);
  // Orders the stream after the gather of a backward's LN2 (ln = 2) or LN1 (1) output, if one is
  // in flight.
  void wait_norm_gather(int ln);
  // before_attention runs just before the block's attention backward is queued; a holds the
  // block's activations (the slot's, or recomputed). With `stash` (backward_input) the weight
  // GEMMs are left out and their output gradients kept there, and the bias and norm gradients
  // are written there instead of to the parameter gradients.
  void block_backward(int i, Slot& s, const BlockActs& a, TensorView x, TensorView dres,
                      const std::function<void()>& before_attention, const WeightStash* stash = nullptr);
  void head_forward(Slot& s, TensorView x, bool with_grad, float dloss);
  void head_chunks(Slot& s, bool with_grad, float dloss, TensorView row_weights, TensorView entropy_sums = {});
  void score_head_forward(Slot& s, TensorView x, bool with_grad, float dloss);
  void value_head_forward(Slot& s, TensorView x, bool with_grad, float dloss);
  void final_norm_backward(Slot& s, TensorView x, TpSum dlnf_sum);
  StageTensors view_tensors(TensorView base) const;
  // The same with each parameter's view given by at(offset, numel).
  StageTensors view_tensors(const std::function<TensorView(size_t, size_t)>& at) const;
  // fp32 gradient of flat elements [offset, offset + n): in grads_ or where staging_ keeps it.
  TensorView grad_at(size_t offset, size_t n) const;

  ModelConfig m_;
  const ParallelGroups& g_;
  Backend& be_;
  StageInfo stage_;
  StageInfo chunk_;
  int block0_ = 0;
  ParamLayout layout_;
  int B_, T_, C_, n_slots_, logits_rows_;
  RecomputePlan recompute_;
  Request norm_gather_[2];   // backward_acts' all-gathers of LN1's and LN2's outputs, in flight
  Buffer param_buf_, grad_buf_, act_buf_, scratch_buf_;
  Buffer logits_gather_, logits_f32_;   // head_logits: gathered TP shards, grown on demand
  BlockDims bd_;
  Buffer rope_buf_, kv_sum_buf_;
  TensorView rope_;
  TensorView params_, grads_;
  StageTensors p_;   // parameter views (compute dtype)
  StageTensors gr_;  // gradient views (fp32)
  std::vector<Slot> slots_;
  std::vector<WeightStash> stashes_;
  TensorView inbox_;   // ActivationOptions::recv_inbox
  const int32_t* docs_ = nullptr;   // the doc_start of the slot that forward/backward computes
  // The head unit's completion, held back by forward() until the slot's backward reaches its
  // first attention backward (see backward()).
  int head_done_slot_ = -1;
  UnitDone head_done_;
  ParamFetch* fetch_ = nullptr;
  GradStaging* staging_ = nullptr;
  ParamStore* store_ = nullptr;
  bool with_grads_ = false;
  bool tp_overlap_ = false;
  bool dpo_ = false;
  DpoArgs dpo_args_;
  bool policy_ = false;
  PolicyArgs policy_args_;
  bool value_ = false;
  ValueArgs value_args_;
  bool fused_sum_ = false;
  bool split_bwd_ = false;
  std::vector<Request> replicated_sums_;   // sum_replicated_grads_over_tp's, in flight
  int tp_sm_margin_ = 0;
  bool sp_ = false;
  std::unique_ptr<TpStrategy> tp_;
  std::unique_ptr<TpForward> tp_overlap_fwd_;   // parallel.tp_overlap's forward; null without it
  void need(int unit) {
    if (fetch_ && unit >= 0) fetch_->need(unit);
  }
  void prefetch(int unit) {
    if (fetch_ && unit >= 0) fetch_->prefetch(unit);
  }
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace trident
