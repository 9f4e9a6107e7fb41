// A model stage (GPT-2 or Llama): memory plan, initialisation, and the forward/backward of one
// micro-batch; the block's architecture is BlockArch's, the TP modes are TpStrategy's.
#include "trident/model/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "trident/core/arena.hpp"
#include "trident/core/rng.hpp"
#include "trident/model/tp_regions.hpp"

namespace trident {

namespace {
// Bounds the (rows, V/tp) logits buffer. Every row chunk adds its share into the fp32 gradient
// of the tied embedding (V/tp x C), so each chunk reads and writes that whole matrix once: at
// 256 MiB GPT-2 124M with B = 32 took 13 chunks and ~4 GB of such traffic per step, at 1 GiB 4.
constexpr size_t kLogitsChunkBytes = size_t(1) << 30;

// Rows per logits chunk: the fewest chunks of about kLogitsChunkBytes, split evenly over N rows.
size_t logits_chunk_rows(size_t N, size_t row_bytes) {
  const size_t chunks = std::max<size_t>(1, (N * row_bytes + kLogitsChunkBytes - 1) / kLogitsChunkBytes);
  return std::max<size_t>(1, (N + chunks - 1) / chunks);
}

// A block's bias and norm gradients: what backward_input writes to its stash instead.
constexpr TensorView BlockTensors::*kBiasAndNormGrads[] = {
    &BlockTensors::ln1_w,  &BlockTensors::ln1_b,    &BlockTensors::ln2_w, &BlockTensors::ln2_b,
    &BlockTensors::proj_b, &BlockTensors::fcproj_b, &BlockTensors::fc_b,  &BlockTensors::qkv_b};

// Which of block i's stash tensors (of a chunk of n_layers blocks) backward_input writes into
// the micro-batch's own slot, over activations of the same size that nothing reads from that
// point to the slot's release (after backward_weight); the others get a buffer of the stash.
//   dx3 -> x3: read by the next block's LN1 backward (its backward_input runs first) and, under
//     recompute, by the next block's backward_weight, which redoes its forward or LN1 from it.
//   dx2 -> x2: read by the block's LN2 backward, and again by selective recompute's LN2.
//   dqkv -> qkv: read by the attention backward only (full recompute keeps no qkv in the slot).
//   dfch -> fch: read by the MLP activation's backward, and again by selective recompute of a
//     separate activation (SwiGLU).
// Under sequence parallelism x2 and x3 hold only this rank's rows.
struct StashInSlot {
  bool dx3, dx2, dqkv, dfch;
};
StashInSlot stash_in_slot(const RecomputePlan& rc, bool sp, const BlockArch& arch, int n_layers, int i) {
  const bool stored = i >= rc.full;   // the slot keeps the block's activations
  const bool next_reads_input = i + 1 < n_layers && (i + 1 < rc.full || rc.selective);
  return {!sp && !next_reads_input, !sp && stored && !rc.selective, stored,
          stored && !(rc.selective && arch.separate_activation())};
}

// A gradient computed into a scratch buffer goes into the slot by exchanging the two buffers: the
// slot's activation of the same size is dead (its last reader has run), so it becomes the
// scratch's, and the slot holds the gradient until backward_weight releases it. The slots and the
// scratch are the only owners of their views, which are never planned again.
void hand_to_slot(TensorView& slot_view, TensorView& scratch_view) {
  TRIDENT_CHECK(slot_view.numel == scratch_view.numel && slot_view.dtype == scratch_view.dtype,
                "weight-gradient stash: slot and scratch buffers differ in size");
  std::swap(slot_view, scratch_view);
}

uint64_t name_stream(const std::string& name) {   // FNV-1a: the RNG stream of a tensor
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

struct GptStage::Slot {
  TensorView input, grad;        // (B, T, C)
  TensorView tokens, targets;    // (B, T) int32
  TensorView doc_start;          // (B, T) int32, valid when packed
  bool packed = false;
  std::vector<BlockActs> layers;
  // Split LayerNorm backward: grad's rows being gathered (the head's, started in the forward,
  // which GPipe runs for every micro-batch before any backward; then each LayerNorm's).
  Request grad_gather;
  // Per-sequence sums of token losses (B) f32 (set_sequence_nll): the reference model's, which the
  // DPO head reads, and where the head writes this model's; empty when not used.
  TensorView ref_nll, nll_out;
  // Task grpo (set_policy_inputs): (B*T) f32 each; ref_token_nll empty without a KL penalty.
  TensorView old_logp, coef, coef_adv, ref_token_nll;
  TensorView token_nll_out;   // (B*T) f32: where the head writes each position's token loss; empty: nowhere
  // Task ppo's value model (set_value_inputs): (B*T) f32 each; value_coef empty: values only.
  TensorView old_values, returns, value_coef, values_out;
};

// What backward_input keeps of a block for backward_weight: the output gradients of its weight
// GEMMs, dL/dx3 (fcproj's, before LN2's backward adds to the residual gradient), dL/dx2 (proj's,
// before LN1's), the MLP's pre-activation gradient (fc's) and dqkv (qkv's), all rows, (N, C)
// (N, C) (N, fc) (N, qkv); and this micro-batch's gradients of its biases and norms (fp32, the
// model's non-empty ones: no weight matrices), which backward_weight adds to the parameter
// gradients, so that the input pass writes no block's parameter gradient (ZeRO-2 stages a
// bucket from the first write of a micro-batch's gradients to the last). A stash's own buffers
// are only those stash_in_slot leaves out of the slot (stash_views resolves the others).
struct GptStage::BlockStash {
  TensorView dx3, dx2, dfch, dqkv;
  BlockTensors grads;
};

struct GptStage::WeightStash {
  std::vector<BlockStash> blocks;   // of a model chunk, in forward order
};

struct GptStage::Scratch {
  TensorView dln, dqkv, datty, dfch, dfcg;     // block backward: (N,C) (N,qkv) (N,att) (N,fc) (N,fc_act) (SwiGLU)
  TensorView lnf, lnf_mean, lnf_rstd, dlnf;    // head: (N,C) (N) (N) (N,C)
  TensorView logits, rowmax, stats, losses;    // (R, V/tp) (R) (R,2) (N) f32; LM head
  TensorView seq_nll, row_weights;             // DPO: (B) this micro-batch's sequence NLLs, (N) gradient weights
  TensorView entropy_sums;                     // online RL: (N,2) f32, xent_entropy_sums of every position
  TensorView scores, dscores;                  // (B) (B) f32; score head (reward model)
  TensorView values, dvalues;                  // (N) (N) f32; the score head at every position (value model)
  TensorView loss_acc;                         // (kLossSums) f32 LossSums
  // The norm outputs whole, (N, C) each, where the slots do not keep them so: under recompute
  // (selective, or a fully recomputed block's) and sequence parallelism (gathered from the ranks'
  // rows); the MLP activation (N, fc_act) under recompute.
  TensorView ln1, ln2, fcg;
  TensorView partial;                          // sequence parallelism: a row-parallel GEMM's (N, C) output
  BlockActs recomputed;                        // the rest of the fully recomputed blocks' activations
};

// The memory plans of a stage, shared by the constructor and the static size queries, so that
// estimates (trident plan) are the allocation itself.
struct GptStage::Dims {
  DType act;
  BlockDims bd;
  size_t N, C, B, T, Vl, logits_rows;
  size_t rows;   // of the residual stream a slot keeps: N, or this rank's N/tp under sequence parallelism
  int n_layers;  // of a slot: one model chunk's
  RecomputePlan rc;
  bool sp, has_blocks, last, score_head;
  Dims(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType a, const ActivationOptions& o)
      : act(a),
        bd(block_dims(m, tp)),
        N(static_cast<size_t>(micro_batch) * m.seq_len),
        C(bd.C),
        B(micro_batch),
        T(m.seq_len),
        Vl(m.padded_vocab(tp) / tp),
        logits_rows(logits_chunk_rows(N, Vl * dtype_size(a))),
        n_layers(st.chunk_layers()),
        rc{std::min(o.recompute.full, st.chunk_layers()), o.recompute.selective},
        sp(o.sequence_parallel && tp > 1),
        has_blocks(st.chunk_layers() > 0),
        last(st.last()),
        score_head(m.score_head) {
    rows = sp ? N / tp : N;
  }
  size_t lse_elems() const { return B * bd.NHl * T; }   // (B, NHl, T) attention statistics of a block
  // What a slot keeps of a block that is not fully recomputed. Selective drops the MLP activation
  // where it is a separate op (BlockArch::separate_activation: SwiGLU) but keeps GELU's, which
  // the fc GEMM's epilogue computes and a redo would not reproduce bit for bit on a GPU.
  BlockActsPlan kept() const {
    return {lse_elems(), true, !rc.selective, !rc.selective || !bd.arch->separate_activation(), rows};
  }
};

// One slot's blocks of the model chunk being run, as the TP strategies' forwards see them.
class GptStage::Pass final : public BlockPass {
 public:
  Pass(GptStage& stage, const Slot& slot) : st_(stage), slot_(slot) {}
  int n_blocks() const override { return st_.chunk_.n_layers(); }
  int micro_batch() const override { return st_.B_; }
  int seq_len() const override { return st_.T_; }
  const BlockDims& dims() const override { return st_.bd_; }
  BlockShape shape(int rows) const override { return st_.block_shape(rows); }
  void need(int i) override { st_.need(st_.layout_.block_unit(st_.chunk_.layer_begin + i)); }
  bool need_ends_use() const override { return st_.store_ != nullptr; }
  void prefetch_after(int i) override { st_.prefetch_after_block(i); }
  const BlockTensors& weights(int i) const override { return st_.block_w(i); }
  BlockActs acts(int i) const override { return st_.work_acts(slot_, i); }
  const BlockActs& saved(int i) const override { return slot_.layers[i]; }
  TensorView input(int i) const override { return st_.block_input(slot_, i); }
  void attend(const BlockActs& a, int batch, size_t row0) override { st_.attend(a, batch, row0); }
  TensorView partial() const override { return st_.scratch_->partial; }

 private:
  GptStage& st_;
  const Slot& slot_;
};

void GptStage::plan_slot(ArenaLayout& a, Slot& s, const Dims& d) {
  const DType act = d.act;
  const size_t N = d.N, C = d.C;
  a.want(&s.input, act, N * C);
  a.want(&s.grad, act, N * C);
  a.want(&s.tokens, DType::I32, N);
  a.want(&s.targets, DType::I32, N);
  a.want(&s.doc_start, DType::I32, N);
  s.layers.resize(d.n_layers);
  for (int i = 0; i < d.n_layers; ++i) {
    if (i < d.rc.full)
      a.want(&s.layers[i].x3, act, d.rows * C);   // a recomputed block keeps its output only
    else
      plan_block_acts(a, s.layers[i], act, N, d.bd, d.kept());
  }
}

void GptStage::plan_stash(ArenaLayout& a, WeightStash& w, const Dims& d) {
  w.blocks.resize(d.n_layers);
  for (int i = 0; i < d.n_layers; ++i) {
    BlockStash& b = w.blocks[i];
    const StashInSlot in = stash_in_slot(d.rc, d.sp, *d.bd.arch, d.n_layers, i);
    if (!in.dx3) a.want(&b.dx3, d.act, d.N * d.C);
    if (!in.dx2) a.want(&b.dx2, d.act, d.N * d.C);
    if (!in.dfch) a.want(&b.dfch, d.act, d.N * d.bd.fc);
    if (!in.dqkv) a.want(&b.dqkv, d.act, d.N * d.bd.qkv);
    BlockTensors& g = b.grads;   // every architecture's (a few C each); the constructor drops the unused
    for (TensorView* v : {&g.ln1_w, &g.ln1_b, &g.ln2_w, &g.ln2_b, &g.proj_b, &g.fcproj_b}) a.want(v, DType::F32, d.C);
    a.want(&g.fc_b, DType::F32, d.bd.fc);
    a.want(&g.qkv_b, DType::F32, d.bd.qkv);
  }
}

void GptStage::plan_scratch(ArenaLayout& a, Scratch& sc, const Dims& d) {
  const DType act = d.act;
  const size_t N = d.N, C = d.C;
  if (d.has_blocks) {
    a.want(&sc.dln, act, N * C);
    a.want(&sc.dqkv, act, N * d.bd.qkv);
    a.want(&sc.datty, act, N * d.bd.att);
    a.want(&sc.dfch, act, N * d.bd.fc);
    if (d.bd.arch->separate_activation()) a.want(&sc.dfcg, act, N * d.bd.fc_act);
    if (d.rc.any() || d.sp) {
      a.want(&sc.ln1, act, N * C);
      a.want(&sc.ln2, act, N * C);
    }
    if (d.rc.any()) a.want(&sc.fcg, act, N * d.bd.fc_act);
    if (d.sp) a.want(&sc.partial, act, N * C);
    if (d.rc.full > 0) plan_block_acts(a, sc.recomputed, act, N, d.bd, {d.lse_elems(), false, false, false, d.rows});
  }
  if (d.last) {
    a.want(&sc.lnf, act, N * C);
    if (d.bd.arch->norm_centers()) a.want(&sc.lnf_mean, DType::F32, N);
    a.want(&sc.lnf_rstd, DType::F32, N);
    a.want(&sc.dlnf, act, N * C);
    if (d.score_head) {
      a.want(&sc.scores, DType::F32, d.B);
      a.want(&sc.dscores, DType::F32, d.B);
      a.want(&sc.values, DType::F32, d.N);
      a.want(&sc.dvalues, DType::F32, d.N);
    } else {
      a.want(&sc.logits, act, d.logits_rows * d.Vl);
      a.want(&sc.rowmax, DType::F32, d.logits_rows);
      a.want(&sc.stats, DType::F32, d.logits_rows * 2);
      a.want(&sc.losses, DType::F32, N);
      a.want(&sc.seq_nll, DType::F32, d.B);
      a.want(&sc.row_weights, DType::F32, N);
      a.want(&sc.entropy_sums, DType::F32, 2 * N);
    }
    a.want(&sc.loss_acc, DType::F32, kLossSums);
  }
}

size_t GptStage::slot_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                            const ActivationOptions& acts) {
  ArenaLayout a;
  Slot s;
  plan_slot(a, s, Dims(m, st, tp, micro_batch, act, acts));
  return a.bytes();
}

size_t GptStage::stash_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                             const ActivationOptions& acts) {
  ArenaLayout a;
  WeightStash w;
  plan_stash(a, w, Dims(m, st, tp, micro_batch, act, acts));
  return a.bytes();
}

size_t GptStage::inbox_bytes(const ModelConfig& m, int micro_batch, DType act) {
  ArenaLayout a;
  TensorView inbox;
  a.want(&inbox, act, size_t(micro_batch) * m.seq_len * m.n_embd);
  return a.bytes();
}

GptStage::BlockStash GptStage::stash_views(const Slot& s, const WeightStash& w, int i) const {
  BlockStash k = w.blocks[i];
  const StashInSlot in = stash_in_slot(recompute_, sp_, *bd_.arch, stage_.chunk_layers(), i);
  const BlockActs& l = s.layers[i];
  if (in.dx3) k.dx3 = l.x3;
  if (in.dx2) k.dx2 = l.x2;
  if (in.dfch) k.dfch = l.fch;
  if (in.dqkv) k.dqkv = l.qkv;
  return k;
}

int GptStage::n_stashes() const { return static_cast<int>(stashes_.size()); }

size_t GptStage::scratch_bytes(const ModelConfig& m, const StageInfo& st, int tp, int micro_batch, DType act,
                               const ActivationOptions& acts) {
  ArenaLayout a;
  Scratch sc;
  plan_scratch(a, sc, Dims(m, st, tp, micro_batch, act, acts));
  return a.bytes();
}

GptStage::GptStage(const ModelConfig& m, const ParallelGroups& groups, Backend& be, int micro_batch, int n_slots,
                   size_t bucket_elems, bool with_grads, const ActivationOptions& acts, GradStaging* staging,
                   int virtual_stages, ParamStore* store)
    : m_(m),
      g_(groups),
      be_(be),
      stage_(StageInfo::of(m, groups.coord.pp, groups.topo.pp(), virtual_stages)),
      chunk_(stage_.chunk(0)),
      layout_(m, stage_, groups.topo.tp(), groups.coord.tp, groups.topo.dp(), bucket_elems),
      B_(micro_batch),
      T_(m.seq_len),
      C_(m.n_embd),
      n_slots_(n_slots),
      staging_(with_grads ? staging : nullptr),
      store_(store),
      with_grads_(with_grads),
      scratch_(std::make_unique<Scratch>()) {
  const DType act = be.compute_dtype();
  const int tp = groups.topo.tp();
  TRIDENT_CHECK(!acts.sequence_parallel || (B_ * T_) % tp == 0,
                str("parallel.sequence_parallel splits the B*T = ", B_ * T_, " rows of a micro-batch over tp = ", tp,
                    ": they must divide evenly"));
  const Dims d(m, stage_, tp, micro_batch, act,
               ActivationOptions{with_grads ? acts.recompute : RecomputePlan{}, acts.sequence_parallel});
  logits_rows_ = static_cast<int>(d.logits_rows);
  recompute_ = d.rc;
  sp_ = d.sp;
  choose_tp_strategy();
  bd_ = d.bd;
  if (bd_.arch->rotary()) {
    std::vector<float> table(static_cast<size_t>(m.positions()) * bd_.HS);
    rope_table(table.data(), m.positions(), bd_.HS, static_cast<float>(m.rope_theta));
    rope_buf_ = Buffer(be, table.size() * sizeof(float));
    rope_ = rope_buf_.view(DType::F32).slice(0, table.size());
    be.copy_from_host(rope_, table.data());
  }
  if (layout_.kv_replicas() > 1 && with_grads)
    kv_sum_buf_ = Buffer(be, static_cast<size_t>(m.kv_heads()) * bd_.HS * C_ * sizeof(float));

  if (store_) {
    p_ = view_tensors([this](size_t offset, size_t n) { return store_->param_view(offset, n); });
  } else {
    param_buf_ = Buffer(be, layout_.total() * dtype_size(act));
    params_ = param_buf_.view(act).slice(0, layout_.total());
    p_ = view_tensors(params_);
  }
  if (staging_) {
    gr_ = view_tensors([this](size_t offset, size_t n) { return staging_->grad_view(offset, n); });
  } else if (with_grads) {
    grad_buf_ = Buffer(be, layout_.total() * sizeof(float));
    grads_ = grad_buf_.view(DType::F32).slice(0, layout_.total());
    gr_ = view_tensors(grads_);
  }

  // One allocation for the activations of every slot (and the split backward's stashes) and one
  // for the scratch.
  ArenaLayout slots;
  slots_.resize(n_slots);
  for (Slot& s : slots_) plan_slot(slots, s, d);
  stashes_.resize(with_grads ? acts.weight_stashes : 0);
  for (WeightStash& w : stashes_) plan_stash(slots, w, d);
  if (acts.recv_inbox) slots.want(&inbox_, d.act, d.N * d.C);
  act_buf_ = Buffer(be, slots.bytes());
  slots.bind(act_buf_.get());
  ArenaLayout scratch;
  plan_scratch(scratch, *scratch_, d);
  scratch_buf_ = Buffer(be, scratch.bytes());
  scratch.bind(scratch_buf_.get());
  // The stashed bias and norm gradients of the parameters the model has (those of gr_'s blocks).
  for (WeightStash& w : stashes_)
    for (BlockStash& b : w.blocks)
      for (auto field : kBiasAndNormGrads)
        if ((gr_.blocks.front().*field).empty()) b.grads.*field = TensorView{};
}

GptStage::~GptStage() = default;

StageTensors GptStage::view_tensors(TensorView base) const {
  return view_tensors([&](size_t offset, size_t n) { return base.slice(offset, n); });
}

StageTensors GptStage::view_tensors(const std::function<TensorView(size_t, size_t)>& at) const {
  auto v = [&](const std::string& name) {
    const ParamInfo& p = layout_.get(name);
    return at(p.offset, p.numel);
  };
  // A parameter, or a packed group (llama's q|k|v, gate|up): one view from the first's start over
  // all of them.
  auto span = [&](const std::string& first, const std::string& last) {
    const ParamInfo& a = layout_.get(first);
    const ParamInfo& b = layout_.get(last);
    return at(a.offset, b.offset + b.numel - a.offset);
  };
  StageTensors t;
  const bool tied = m_.head_is_wte();
  if (stage_.first() || (stage_.last() && tied)) t.wte = v("wte");
  if (stage_.first() && !bd_.arch->rotary()) t.wpe = v("wpe");
  if (stage_.last()) {
    t.lnf_w = v("lnf.weight");
    if (bd_.arch->norm_centers()) t.lnf_b = v("lnf.bias");
    if (m_.score_head)
      t.score_w = v("score.weight");
    else
      t.lm_head = tied ? t.wte : v("lm_head");
  }
  for (int i = 0; i < stage_.n_layers(); ++i)
    t.blocks.push_back(bd_.arch->block_tensors(span, str("blocks.", stage_.layer(i), "."), m_));
  return t;
}

void init_param_values(const ParamInfo& p, uint64_t seed, float* dst) {
  const uint64_t stream = name_stream(p.name);
  const long n = static_cast<long>(p.numel);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    int64_t gi = p.global_index(static_cast<size_t>(i));
    if (gi < 0) continue;  // padding rows of the vocabulary stay zero
    dst[i] = p.init_std > 0 ? static_cast<float>(p.init_std * normal_at(seed, stream, static_cast<uint64_t>(gi)))
                            : static_cast<float>(p.init_value);
  }
}

void GptStage::set_params(const std::vector<float>& params) {
  TRIDENT_CHECK(params.size() == layout_.total(), "GptStage::set_params: not this rank's layout");
  Buffer staging(be_, params.size() * sizeof(float));
  const TensorView f32 = staging.view(DType::F32).slice(0, params.size());
  be_.copy_from_host(f32, params.data());
  assign_params(f32);
  be_.synchronize();
}

void GptStage::assign_params(TensorView from, size_t offset) {
  TRIDENT_CHECK(offset + from.numel <= layout_.total(), "assign_params: past the end of this rank's layout");
  if (store_)
    store_->assign(offset, from);
  else
    be_.copy(params_.slice(offset, from.numel), from);
}

void GptStage::copy_params(TensorView into) const {
  TRIDENT_CHECK(into.numel == layout_.total(), "copy_params: not this rank's layout");
  if (store_)
    store_->copy_all(into);
  else
    be_.copy(into, params_);
}

void GptStage::init_params(uint64_t seed) {
  std::vector<float> host(layout_.total(), 0.0f);
  for (const ParamInfo& p : layout_.params()) init_param_values(p, seed, host.data() + p.offset);
  // Staged through the gradient buffer (fp32, same layout), which holds nothing yet, or where
  // there is none (staged gradients, forward only) one parameter at a time through a buffer of
  // the largest, so that no fp32 copy of the whole stage is ever allocated.
  if (grads_.numel) {
    be_.copy_from_host(grads_, host.data());
    assign_params(grads_);
    be_.zero(grads_);
  } else {
    size_t largest = 0;
    for (const ParamInfo& p : layout_.params()) largest = std::max(largest, p.numel);
    Buffer staging(be_, largest * sizeof(float));
    for (const ParamInfo& p : layout_.params()) {
      TensorView f32 = staging.view(DType::F32).slice(0, p.numel);
      be_.copy_from_host(f32, host.data() + p.offset);
      assign_params(f32, p.offset);
      be_.synchronize();   // before the next parameter overwrites the staging buffer
    }
  }
  be_.synchronize();
}

void GptStage::require_grads(const char* op) const {
  TRIDENT_CHECK(with_grads_, str(op, ": this model stage has no gradients (built for forward only)"));
}

void GptStage::zero_grads() {
  require_grads("zero_grads");
  if (!staging_) be_.zero(grads_);   // staged gradients are the staging's to reset
}

TensorView GptStage::grad_at(size_t offset, size_t n) const {
  return staging_ ? staging_->grad_view(offset, n) : grads_.slice(offset, n);
}

TensorView GptStage::slot_input(int slot) const { return block_input(slots_[slot], 0); }

// The inbox as a slot's input (this rank's rows under sequence parallelism).
TensorView GptStage::recv_inbox() const {
  TRIDENT_CHECK(!inbox_.empty() && !slots_.empty(), "the stage has no receive inbox (ActivationOptions::recv_inbox)");
  return inbox_.slice(0, slot_input(0).numel);
}

void GptStage::take_input(int slot) { be_.copy(slot_input(slot), recv_inbox()); }
TensorView GptStage::slot_grad(int slot) const { return slots_[slot].grad; }
TensorView GptStage::slot_output(int slot) const { return block_input(slots_[slot], stage_.chunk_layers()); }

TensorView GptStage::block_input(const Slot& s, int i) const {
  return i > 0 ? s.layers[i - 1].x3 : tp_->own_rows(s.input, C_);
}

void GptStage::set_tokens(int slot, const int32_t* inputs, const int32_t* targets) {
  Slot& s = slots_[slot];
  if (stage_.first()) be_.copy_from_host(s.tokens, inputs);
  if (stage_.last()) be_.copy_from_host(s.targets, targets);
}

void GptStage::set_tokens(int slot, TensorView inputs, TensorView targets) {
  Slot& s = slots_[slot];
  if (stage_.first()) be_.copy(s.tokens, inputs);
  if (stage_.last()) be_.copy(s.targets, targets);
}

void GptStage::set_doc_starts(int slot, TensorView doc_start) {
  Slot& s = slots_[slot];
  s.packed = !doc_start.empty();
  if (s.packed) be_.copy(s.doc_start, doc_start);
}

void GptStage::select_chunk(int chunk) {
  TRIDENT_CHECK(chunk >= 0 && chunk < stage_.n_chunks, str("model chunk ", chunk, " of ", stage_.n_chunks));
  chunk_ = stage_.chunk(chunk);
  block0_ = chunk * stage_.chunk_layers();
}

void GptStage::forward(int slot, bool with_grad, float dloss, const UnitDone& unit_done, int chunk) {
  if (with_grad) require_grads("forward with gradients");
  select_chunk(chunk);
  Slot& s = slots_[slot];
  TensorView x = forward_blocks(s);
  if (chunk_.last()) {
    head_forward(s, x, with_grad, dloss);
    if (with_grad && unit_done) {
      if (tp_->own_rows_backward()) sum_replicated_grads_over_tp(-1);
      if (head_done_slot_ >= 0) head_done_(layout_.head_unit());   // never dropped
      head_done_slot_ = slot;
      head_done_ = unit_done;
    }
  }
}

TensorView GptStage::forward_blocks(Slot& s) {
  docs_ = s.packed ? s.doc_start.as<int32_t>() : nullptr;
  if (chunk_.first()) {
    need(layout_.tied_unit());
    need(layout_.embedding_unit());
    // Vocab-parallel embedding: each TP rank looks up its rows (zeros elsewhere), rank 0 adds
    // the positions, and the reduction sums the shards.
    be_.encoder_fwd(s.input, s.tokens.as<int32_t>(), p_.wte, g_.coord.tp == 0 ? p_.wpe : TensorView{}, B_, T_, C_,
                    layout_.vocab_start(), layout_.vocab_local(), doc_starts());
    if (Request r = tp_->sum_over_tp(s.input)) r->wait(be_.stream());
  }
  TRIDENT_CHECK(!recompute_.any() || !(tp_overlap_ || (fused_sum_ && !sp_)),
                "parallel.recompute has no tp_overlap variant, nor a tp_fused_sum one without sequence parallelism");
  Pass pass(*this, s);
  return tp_overlap_fwd_ ? tp_overlap_fwd_->forward(pass) : tp_->forward(pass);
}

BlockActs GptStage::work_acts(const Slot& s, int i) const {
  const Scratch& sc = *scratch_;
  BlockActs a = i < recompute_.full ? sc.recomputed : s.layers[i];
  a.x3 = s.layers[i].x3;
  if (sp_ || a.ln1.empty()) {
    a.ln1 = sc.ln1;
    a.ln2 = sc.ln2;
  }
  if (a.fcg.empty()) a.fcg = sc.fcg;
  return a;
}

// The block's forward again from its complete input x (the previous block's output, completed in
// the forward by this block's first norm; or the stage input), up to the MLP activation (the
// down projection's output is not needed): the same ops on the same values give the same bits.
BlockActs GptStage::recompute_block(const Slot& s, int i, TensorView x) {
  const BlockActs a = work_acts(s, i);
  be_.side_join();   // the previous block's side work may still read the shared activations
  Pass pass(*this, s);
  tp_->recompute(pass, i, a, x);
  return a;
}

// Selective recompute redoes the norms from their saved inputs (rewriting the saved statistics
// with the same values) and the MLP activation from the saved pre-activation: the forward's ops
// on the same values. Under sequence parallelism each rank redoes its own rows of a norm, or
// copies those the slot kept, and the whole output is gathered beside the backward's GEMMs up to
// the weight-gradient GEMM that reads it.
BlockActs GptStage::backward_acts(const Slot& s, int i, TensorView x, bool weights) {
  if (i < recompute_.full) return recompute_block(s, i, x);
  const BlockActs a = work_acts(s, i);
  if (!weights) return a;   // the input gradients read the slot's residual rows and statistics only
  const BlockActs& kept = s.layers[i];
  const BlockTensors& p = block_w(i);
  const BlockShape shape = block_shape(B_ * T_);
  const int rows = tp_->own_row_count();
  be_.side_join();   // the previous block's side work may still read the shared activations
  auto redo = [&](int ln, TensorView out, TensorView kept_out, TensorView mean, TensorView rstd, TensorView in,
                  TensorView w, TensorView b) {
    if (kept_out.empty())
      norm_fwd(be_, shape, tp_->own_rows(out, C_), mean, rstd, in, w, b, rows);
    else if (sp_)
      be_.copy(tp_->my_rows(out, C_), kept_out);
    if (!sp_) return;
    TRIDENT_CHECK(!norm_gather_[ln - 1], str("the gather of LN", ln, "'s output of a block was left unfinished"));
    norm_gather_[ln - 1] = g_.tp->all_gather_async(out.data, size_t(rows) * C_, out.dtype, be_.stream());
  };
  redo(2, a.ln2, kept.ln2, a.ln2_mean, a.ln2_rstd, a.x2, p.ln2_w, p.ln2_b);
  redo(1, a.ln1, kept.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1_w, p.ln1_b);
  if (kept.fcg.empty()) mlp_activation(be_, shape, a, B_ * T_);
  return a;
}

void GptStage::wait_norm_gather(int ln) {
  Request& r = norm_gather_[ln - 1];
  if (!r) return;
  r->wait(be_.stream());
  r.reset();
}

void GptStage::set_tp_split_layernorm_bwd(bool on) {
  split_bwd_ = on && g_.topo.tp() > 1;
  TRIDENT_CHECK(!split_bwd_ || fused_sum_, "parallel.tp_split_layernorm_bwd needs parallel.tp_fused_sum");
  TRIDENT_CHECK(!split_bwd_ || (B_ * T_) % 2 == 0,
                str("parallel.tp_split_layernorm_bwd splits the B*T = ", B_ * T_, " rows in two: B*T must be even"));
  choose_tp_strategy();
}

void GptStage::choose_tp_strategy() {
  tp_ = make_tp_strategy(be_, *g_.tp, g_.coord.tp, B_ * T_, C_,
                         TpOptions{sp_, fused_sum_, split_bwd_, tp_sm_margin_});
  tp_overlap_fwd_ = tp_overlap_ ? make_overlap_forward(*tp_) : nullptr;
}

void GptStage::sum_replicated_grads_over_tp(int block) {
  Stream st = be_.stream();
  std::vector<TensorView> views;
  if (block < 0) {
    views = {gr_.lnf_w, gr_.lnf_b};
  } else {
    const BlockTensors& g = block_g(block);
    views = {g.ln1_w, g.ln1_b, g.ln2_w, g.ln2_b, g.proj_b, g.fcproj_b};
  }
  for (const TensorView& v : views)
    if (!v.empty()) replicated_sums_.push_back(g_.tp->all_reduce_async(v.data, v.numel, v.dtype, ReduceOp::Sum, st));
}

void GptStage::wait_replicated_sums() {
  for (Request& r : replicated_sums_) r->wait(be_.stream());
  replicated_sums_.clear();
}

void GptStage::set_tp_fused_sum(bool on) {
  fused_sum_ = on && g_.topo.tp() > 1;
  choose_tp_strategy();
  if (!fused_sum_) return;
  PairExchange* pair = g_.tp->pair_exchange();
  const size_t max_bytes = partial_slot_bytes(B_, T_, C_, g_.topo.tp(), be_.compute_dtype());
  const std::string why = pair ? pair->enable_partials(max_bytes)
                               : str("the ", g_.tp->name(), " communicator has no partial-sum exchange");
  if (!why.empty()) throw InputError(str("parallel.tp_fused_sum = true: ", why, "; set it to false"));
}

void GptStage::set_tp_overlap(bool on) {
  tp_overlap_ = on && g_.topo.tp() > 1 && stage_.n_layers() > 0;
  TRIDENT_CHECK(!tp_overlap_ || sp_ || B_ % 2 == 0,
                str("parallel.tp_overlap splits the micro-batch in two halves: train.micro_batch_size = ", B_,
                    " must be even"));
  TRIDENT_CHECK(!tp_overlap_ || !sp_ || B_ % (2 * g_.topo.tp()) == 0,
                str("parallel.tp_overlap with sequence_parallel splits each TP rank's rows in two halves of whole "
                    "sequences: train.micro_batch_size = ", B_, " must divide by 2 x tp = ", 2 * g_.topo.tp()));
  choose_tp_strategy();
}

// The parameters the forward reads after stage block i. Their transfer is started beside the
// attention kernels, whose short CTAs work around it (see backward() for why not beside the
// GEMMs).
void GptStage::prefetch_after_block(int i) {
  if (i + 1 == chunk_.n_layers()) {
    prefetch(layout_.head_unit());
    prefetch(layout_.tied_unit());
  } else {
    prefetch(layout_.block_unit(chunk_.layer_begin + i + 1));
  }
}

BlockShape GptStage::block_shape(int rows) const {
  BlockShape s{rows, C_, C_ / g_.topo.tp(), static_cast<float>(m_.norm_eps), g_.coord.tp == 0, false, bd_};
  return s;
}

void GptStage::attend(const BlockActs& a, int batch, size_t row0) {
  bd_.arch->position_fwd(be_, a.qkv, rope_, batch, T_, bd_.NHl, bd_.NKVl, bd_.HS, doc_starts(row0));
  be_.attention_fwd(a.atty, a.lse, a.qkv, batch, T_, bd_.NHl, bd_.NKVl, bd_.HS, doc_starts(row0));
}

// Each rank holds the gradient of its one key/value head from its own query heads only. An
// all-reduce over TP of an (NKV heads) buffer in which each rank has put its partial at its
// head's place sums each head over the ranks that share it; every rank takes its head back.
void GptStage::sum_kv_replicas(int block) {
  if (layout_.kv_replicas() == 1) return;
  const int head = g_.coord.tp / layout_.kv_replicas(), n_kv = m_.kv_heads();
  const std::string b = str("blocks.", chunk_.layer_begin + block, ".attn.");
  for (const char* name : {"k.weight", "v.weight", "k.bias", "v.bias"}) {
    const ParamInfo* p = layout_.find(b + name);
    if (!p) continue;
    TensorView mine = grad_at(p->offset, p->numel);
    TensorView all = kv_sum_buf_.view(DType::F32).slice(0, p->numel * n_kv);
    be_.zero(all);
    be_.copy(all.slice(head * p->numel, p->numel), mine);
    g_.tp->all_reduce(all.data, all.numel, DType::F32, ReduceOp::Sum, be_.stream());
    be_.copy(mine, all.slice(head * p->numel, p->numel));
  }
}

std::vector<float> GptStage::forward_logits(int slot) {
  TRIDENT_CHECK(stage_.first() && stage_.last(), "forward_logits needs a single pipeline stage (pp = 1)");
  TRIDENT_CHECK(!m_.score_head, "forward_logits: a reward model has no LM head");
  TRIDENT_CHECK(!sp_, "forward_logits: not with sequence parallelism");
  return head_logits(forward_blocks(slots_[slot]), B_ * T_);
}

std::vector<float> GptStage::head_logits(TensorView x, int rows) {
  TRIDENT_CHECK(stage_.last() && rows <= B_ * T_, str("head_logits of ", rows, " rows"));
  TRIDENT_CHECK(!m_.score_head, "head_logits: a reward model has no LM head");
  Scratch& sc = *scratch_;
  const int C = C_, Vl = layout_.vocab_local(), tp = g_.topo.tp(), V = m_.vocab_size;
  const size_t rc = static_cast<size_t>(rows) * C;
  TensorView lnf = sc.lnf.slice(0, rc);
  need(layout_.head_unit());
  need(layout_.tied_unit());
  norm_fwd(be_, block_shape(rows), lnf, sc.lnf_mean.empty() ? TensorView{} : sc.lnf_mean.slice(0, rows),
           sc.lnf_rstd.slice(0, rows), x.slice(0, rc), p_.lnf_w, p_.lnf_b, rows);
  // Each TP rank's (rows, V/tp) block lands at its rank's place in [tp][rows][V/tp]. The gather
  // buffers grow once to the largest chunk seen, so token-by-token decoding allocates nothing.
  const int chunk = std::min(logits_rows_, rows);
  std::vector<float> out(static_cast<size_t>(rows) * V), block(static_cast<size_t>(chunk) * Vl * tp);
  if (logits_gather_.bytes() < block.size() * dtype_size(be_.compute_dtype())) {
    logits_gather_ = Buffer(be_, block.size() * dtype_size(be_.compute_dtype()));
    logits_f32_ = Buffer(be_, block.size() * sizeof(float));
  }
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int R = std::min(chunk, rows - r0);
    const size_t n = static_cast<size_t>(R) * Vl;
    TensorView all = logits_gather_.view(be_.compute_dtype()).slice(0, n * tp);
    be_.matmul_fwd(all.slice(n * g_.coord.tp, n), lnf.slice(static_cast<size_t>(r0) * C, static_cast<size_t>(R) * C),
                   p_.lm_head, TensorView{}, R, C, Vl);
    if (tp > 1) g_.tp->all_gather(all.data, n, all.dtype, be_.stream());
    TensorView host_view = logits_f32_.view(DType::F32).slice(0, n * tp);
    be_.copy(host_view, all);
    be_.copy_to_host(block.data(), host_view);
    for (int k = 0; k < tp; ++k)
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < Vl && k * Vl + v < V; ++v)
          out[static_cast<size_t>(r0 + r) * V + k * Vl + v] = block[(static_cast<size_t>(k) * R + r) * Vl + v];
  }
  return out;
}

// A unit's completion is announced (and its gradient bucket's collective may start) when the
// backward reaches the next block's attention backward, not right after the unit. What follows
// a unit is the next block's MLP backward: cuBLASLt's persistent GEMMs, whose grid is one CTA
// per SM, wait for every SM that a collective's CTAs hold and take that much longer (dp2 on H200:
// the first MLP GEMMs of each block +0.19 ms). The attention backward's many short CTAs work
// around a collective instead.
void GptStage::backward(int slot, const UnitDone& unit_done, int chunk) { backward_pass(slot, unit_done, chunk, -1); }

void GptStage::backward_input(int slot, int stash, const UnitDone& unit_done, int chunk) {
  TRIDENT_CHECK(stash >= 0 && stash < n_stashes(), str("weight-gradient stash ", stash, " of ", n_stashes()));
  backward_pass(slot, unit_done, chunk, stash);
}

// backward_input: the blocks' input-gradient pass; the head unit's announcement (held since the
// forward) is the only one it makes. backward: the whole backward.
void GptStage::backward_pass(int slot, const UnitDone& unit_done, int chunk, int stash) {
  require_grads("backward");
  const bool split = stash >= 0;
  select_chunk(chunk);
  if (split)   // the kernels accumulate (+=) the bias and norm gradients they write
    for (int i = 0; i < chunk_.n_layers(); ++i)
      for (auto field : kBiasAndNormGrads)
        if (!(stashes_[stash].blocks[i].grads.*field).empty()) be_.zero(stashes_[stash].blocks[i].grads.*field);
  Slot& s = slots_[slot];
  docs_ = s.packed ? s.doc_start.as<int32_t>() : nullptr;
  int held = -1;   // a unit done but not yet announced
  if (head_done_slot_ == slot) {
    held = layout_.head_unit();
    head_done_slot_ = -1;
  }
  const UnitDone& announce_to = unit_done ? unit_done : head_done_;
  // The replicated gradients' TP sums run beside the next block's backward, and complete before
  // any unit is announced.
  int staged = -1;   // a staged unit complete for this micro-batch, not yet ended
  auto announce = [&] {
    wait_replicated_sums();
    if (held >= 0) announce_to(held);
    if (staged >= 0) staging_->end_unit(staged);
    held = staged = -1;
  };
  for (int i = chunk_.n_layers() - 1; i >= 0; --i) {
    const TensorView x = block_input(s, i);
    const int unit = layout_.block_unit(chunk_.layer_begin + i);
    // Block i's backward also writes block i - 1's output bias gradient (its ln1 backward). The
    // input pass writes no block's parameter gradient.
    if (staging_ && !split) staging_->begin_unit(unit);
    if (staging_ && !split && i > 0) staging_->begin_unit(layout_.block_unit(chunk_.layer_begin + i - 1));
    need(unit);   // the recompute and the input gradients read the block's weights
    // The next block's parameters come beside the attention backward, as in the forward.
    auto before_attention = [&] {
      announce();
      if (i > 0) prefetch(layout_.block_unit(chunk_.layer_begin + i - 1));
    };
    block_backward(i, s, backward_acts(s, i, x, !split), x, s.grad, before_attention,
                   split ? &stashes_[stash] : nullptr);
    if (split) continue;   // backward_weight completes the unit and announces it
    // unit_done comes with the step's last micro-batch (PipelineExecutor); a staged unit is
    // reduced on every one. Either way the replicated gradients are complete, and the sum runs
    // before the unit is announced to the DP sync.
    const bool reduced_now = unit_done || (staging_ && staging_->per_micro(unit));
    if (reduced_now && tp_->own_rows_backward()) sum_replicated_grads_over_tp(i);
    if (reduced_now) sum_kv_replicas(i);
    if (unit_done) held = unit;
    if (staging_) staged = unit;
  }
  tp_->finish_grad_gather(s.grad_gather);   // s.grad whole before it leaves the stage or meets the embedding
  be_.side_join();   // the last block's fc bias gradient, before its unit is announced
  announce();
  if (chunk_.first()) {
    // s.grad is replicated over TP (reduce_from_tp_region's backward is the identity; with
    // sequence parallelism its rows were gathered above), so every TP rank computes the same
    // position gradient and its own vocabulary rows.
    be_.encoder_bwd(gr_.wte, gr_.wpe, s.grad, s.tokens.as<int32_t>(), B_, T_, C_, layout_.vocab_start(),
                    layout_.vocab_local(), doc_starts());
    // Split: the embedding may share a bucket with the first block, whose weights come later.
    if (unit_done && !split && layout_.embedding_unit() >= 0) unit_done(layout_.embedding_unit());
  }
}

// Per block: the stashed bias and norm gradients added, the weight GEMMs as block_backward issues
// them without a stash (the dw_beside calls) on the stashed output gradients and the activations
// backward_acts gives again, then what backward does once a unit's gradients are complete for
// the micro-batch: on the last micro-batch (and on every one for a bucket ZeRO-2 reduces per
// micro-batch) the TP sums, the staged unit's end, the announcement. Plain GEMMs on the main
// stream, no SM margin: nothing runs beside them.
void GptStage::backward_weight(int slot, int stash, const UnitDone& unit_done, int chunk) {
  require_grads("backward_weight");
  TRIDENT_CHECK(stash >= 0 && stash < n_stashes(), str("weight-gradient stash ", stash, " of ", n_stashes()));
  select_chunk(chunk);
  const Slot& s = slots_[slot];
  docs_ = s.packed ? s.doc_start.as<int32_t>() : nullptr;   // full recompute runs the attention again
  const int N = B_ * T_, C = C_;
  const int QKV = static_cast<int>(bd_.qkv), ATT = static_cast<int>(bd_.att), FC = static_cast<int>(bd_.fc),
            FA = static_cast<int>(bd_.fc_act);
  for (int i = chunk_.n_layers() - 1; i >= 0; --i) {
    const int unit = layout_.block_unit(chunk_.layer_begin + i);
    need(unit);
    const BlockActs a = backward_acts(s, i, block_input(s, i), true);
    const BlockStash k = stash_views(s, stashes_[stash], i);
    const BlockTensors& p = block_w(i);
    const BlockTensors& g = block_g(i);
    if (staging_) staging_->begin_unit(unit);
    // The top block's output bias gradient comes from the final norm's backward (in the last
    // stage's forward), not from backward_input.
    const bool fcproj_bias_stashed = i + 1 < chunk_.n_layers() || !chunk_.last();
    for (auto field : kBiasAndNormGrads)
      if (!(k.grads.*field).empty() && (field != &BlockTensors::fcproj_b || fcproj_bias_stashed))
        be_.accumulate(g.*field, k.grads.*field);
    be_.matmul_bwd(TensorView{}, g.fcproj_w, TensorView{}, k.dx3, a.fcg, p.fcproj_w, N, FA, C);
    wait_norm_gather(2);
    be_.matmul_bwd(TensorView{}, g.fc_w, TensorView{}, k.dfch, a.ln2, p.fc_w, N, C, FC);
    be_.matmul_bwd(TensorView{}, g.proj_w, TensorView{}, k.dx2, a.atty, p.proj_w, N, ATT, C);
    wait_norm_gather(1);
    be_.matmul_bwd(TensorView{}, g.qkv_w, TensorView{}, k.dqkv, a.ln1, p.qkv_w, N, C, QKV);
    const bool reduced_now = unit_done || (staging_ && staging_->per_micro(unit));
    if (reduced_now && tp_->own_rows_backward()) sum_replicated_grads_over_tp(i);
    if (reduced_now) sum_kv_replicas(i);
    wait_replicated_sums();
    if (unit_done) unit_done(unit);
    if (staging_) staging_->end_unit(unit);
  }
  if (chunk_.first() && unit_done && layout_.embedding_unit() >= 0) unit_done(layout_.embedding_unit());
}

// dres enters as dL/dx3 and leaves as dL/dx (the residual stream's gradient, updated in place).
// The block's ops as a list: the TP strategy runs each norm's backward with the TP sum of its
// input gradient and the GEMMs it places beside that sum (NormBwdPart), and gives the rows that
// the row-wise ops run on (bwd_rows: this rank's where the norm backward is split).
void GptStage::block_backward(int i, Slot& s, const BlockActs& a, TensorView x, TensorView dres,
                              const std::function<void()>& before_attention, const WeightStash* stash) {
  const BlockTensors& p = block_w(i);
  const BlockStash kept = stash ? stash_views(s, *stash, i) : BlockStash{};
  const BlockStash* keep = stash ? &kept : nullptr;
  // The bias and norm gradients go to the stash with `keep` (which has no weight matrices' views).
  const BlockTensors& g = keep ? keep->grads : block_g(i);
  const TensorView prev_fcproj_b = i == 0 ? TensorView{} : stash ? stash->blocks[i - 1].grads.fcproj_b
                                                                 : block_g(i - 1).fcproj_b;
  Scratch& sc = *scratch_;
  TpStrategy& tp = *tp_;
  const BlockArch& arch = *bd_.arch;
  const int N = B_ * T_, C = C_, ln_rows = tp.bwd_row_count();
  const int QKV = static_cast<int>(bd_.qkv), ATT = static_cast<int>(bd_.att), FC = static_cast<int>(bd_.fc),
            FA = static_cast<int>(bd_.fc_act);
  const BlockShape shape = block_shape(N);
  // The proj and fcproj bias gradients are column sums of dres, which the norm backward that last
  // updated dres adds up (norm_bwd's dsum): LN2's for proj, the next block's LN1 (or the final
  // norm) for fcproj. Only the top block of a stage that is not the last receives dres from
  // elsewhere and sums it in its matmul backward (over own rows where the norm backward is
  // split, like the norms' sums).
  const bool fcproj_bias_done = i + 1 < chunk_.n_layers() || chunk_.last();
  const TensorView fcproj_bias = fcproj_bias_done || tp.own_rows_backward() ? TensorView{} : g.fcproj_b;
  // The input gradients first: with tp > 1 each weight-gradient GEMM runs beside a norm's TP sum
  // (dw_beside, placed by the strategy), accumulated from the same operands as in the tp = 1
  // order, where it runs inside the input-gradient call (dw_inline).
  // With `keep` (backward_input) none of the four weight GEMMs runs here: the output gradients
  // they would read are kept instead, dfch and dqkv written there directly and dres copied where
  // the dw_beside GEMMs would read it (all rows, before the norm backward updates it). Where the
  // stash keeps dfch and dqkv over the slot's fch and qkv (stash_in_slot), an activation backward
  // in the GEMM's epilogue and the attention backward, which may not write over their own inputs,
  // write to the scratch, whose buffer then becomes the slot's (hand_to_slot: no copy); a
  // separate activation's backward (SwiGLU) reads each pair of fch before it writes their
  // gradients, so it writes over fch directly.
  const bool dw_beside = tp.dw_beside_sums() && !keep;
  const bool dw_inline = !tp.dw_beside_sums() && !keep;
  const bool dfch_handed = keep && keep->dfch.data == a.fch.data && !arch.separate_activation();
  const bool dqkv_handed = keep && keep->dqkv.data == a.qkv.data;
  const TensorView dfch = keep && !dfch_handed ? keep->dfch : sc.dfch;
  const TensorView dqkv = keep && !dqkv_handed ? keep->dqkv : sc.dqkv;
  // dL/dx3 and dL/dx2 for the weight pass: with one TP rank the norm backward that updates dres in
  // place writes its old rows there as it reads them (din_keep); with more, a copy beside the TP
  // sum (the norm then runs with a peer partial, or on part of the rows).
  const bool keep_in_norm = keep && g_.topo.tp() == 1;
  auto weight_grad = [&](TensorView dw, TensorView dout, TensorView in, TensorView w, int K, int M) {
    be_.matmul_bwd(TensorView{}, dw, TensorView{}, dout, in, w, N, K, M);
  };

  // MLP: fcproj's input gradient through the activation, LN2's input gradient through fc, LN2.
  be_.side_join();   // the previous block's fc bias gradient has read dfch, written next
  tp.mlp_out_backward(s.grad_gather, [&](const RowView& rows, int n) {
    arch.mlp_bwd(be_, rows(dfch, FC), rows(sc.dfcg, FA), dw_inline ? g.fcproj_w : TensorView{}, fcproj_bias,
                 rows(dres, C), rows(a.fcg, FA), p.fcproj_w, rows(a.fch, FC), n, FA, C);
  });
  if (dfch_handed) hand_to_slot(s.layers[i].fch, sc.dfch);
  if (!fcproj_bias_done && tp.own_rows_backward() && !g.fcproj_b.empty())
    be_.matmul_bwd(TensorView{}, TensorView{}, g.fcproj_b, tp.bwd_rows(dres, C), tp.bwd_rows(a.fcg, FA), p.fcproj_w,
                   ln_rows, FA, C);
  be_.matmul_bwd(sc.dln, TensorView{}, TensorView{}, dfch, a.ln2, p.fc_w, N, C, FC);   // input gradient only
  tp.norm_backward({NormSite::mlp,
                    [&] {
                      if (dw_beside) weight_grad(g.fcproj_w, dres, a.fcg, p.fcproj_w, FA, C);
                      if (keep && !keep_in_norm) be_.copy(keep->dx3, dres);
                    },
                    [&] {
                      if (keep) return;
                      wait_norm_gather(2);
                      weight_grad(g.fc_w, dfch, a.ln2, p.fc_w, C, FC);
                    },
                    [&](TensorView dln_peer, PeerRelease release) {
                      norm_bwd_tp(be_, shape, tp.bwd_rows(dres, C), g.ln2_w, g.ln2_b, g.proj_b,
                                  tp.bwd_rows(sc.dln, C), dln_peer, tp.saved_rows(a.x2, C), p.ln2_w,
                                  tp.saved_rows(a.ln2_mean, 1), tp.saved_rows(a.ln2_rstd, 1), ln_rows, release,
                                  keep_in_norm ? keep->dx3 : TensorView{});
                    }},
                   sc.dln, dres, s.grad_gather);

  // Attention: proj's input gradient, the attention and position backward, LN1's input gradient
  // through qkv, LN1.
  tp.finish_grad_gather(s.grad_gather);
  be_.matmul_bwd(sc.datty, dw_inline ? g.proj_w : TensorView{}, TensorView{}, dres, a.atty, p.proj_w, N, ATT, C);
  before_attention();
  // The fc bias gradient (column sums of dfch: 4·N·C bf16 read, memory-bound) runs beside the
  // attention backward, which is bound by the tensor cores and shared memory.
  if (!g.fc_b.empty()) {
    be_.side_begin();
    be_.matmul_bwd(TensorView{}, TensorView{}, g.fc_b, dfch, a.ln2, p.fc_w, N, C, FC);
    be_.side_end();
  }
  // The qkv bias gradient comes out of the attention backward (summed while dqkv is on chip), or
  // after the rotary embedding's backward (which the attention backward applies) where the bias
  // is added before a rotation.
  const bool qkv_bias_in_attention = arch.qkv_bias_in_attention_bwd();
  be_.attention_bwd(dqkv, qkv_bias_in_attention ? g.qkv_b : TensorView{}, sc.datty, a.qkv, a.atty, a.lse, B_, T_,
                    bd_.NHl, bd_.NKVl, bd_.HS, doc_starts(), arch.rotary() ? rope_ : TensorView{});
  if (dqkv_handed) hand_to_slot(s.layers[i].qkv, sc.dqkv);
  be_.matmul_bwd(sc.dln, TensorView{}, qkv_bias_in_attention ? TensorView{} : g.qkv_b, dqkv, a.ln1, p.qkv_w, N, C,
                 QKV);   // input (and bias) gradient only
  tp.norm_backward({NormSite::attention,
                    [&] {
                      if (dw_beside) weight_grad(g.proj_w, dres, a.atty, p.proj_w, ATT, C);
                      if (keep && !keep_in_norm) be_.copy(keep->dx2, dres);
                    },
                    [&] {
                      if (keep) return;
                      wait_norm_gather(1);
                      weight_grad(g.qkv_w, dqkv, a.ln1, p.qkv_w, C, QKV);
                    },
                    [&](TensorView dln_peer, PeerRelease release) {
                      norm_bwd_tp(be_, shape, tp.bwd_rows(dres, C), g.ln1_w, g.ln1_b, prev_fcproj_b,
                                  tp.bwd_rows(sc.dln, C), dln_peer, tp.saved_rows(x, C), p.ln1_w,
                                  tp.saved_rows(a.ln1_mean, 1), tp.saved_rows(a.ln1_rstd, 1), ln_rows, release,
                                  keep_in_norm ? keep->dx2 : TensorView{});
                    }},
                   sc.dln, dres, s.grad_gather);
}

// Final LayerNorm, then the loss: a reward model's score head (score_head_forward), or the
// tied-embedding logits' cross-entropy (head_chunks), which task dpo turns into its pair loss.
// With gradients, the head's backward runs here too and leaves dL/dx in s.grad.
void GptStage::head_forward(Slot& s, TensorView x, bool with_grad, float dloss) {
  Scratch& sc = *scratch_;
  need(layout_.head_unit());
  need(layout_.tied_unit());
  // With sequence parallelism x is this rank's rows: the final LayerNorm runs there and its
  // output is gathered; the head's input gradient is reduce-scattered back.
  norm_fwd(be_, block_shape(B_ * T_), tp_->own_rows(sc.lnf, C_), tp_->own_rows(sc.lnf_mean, 1),
           tp_->own_rows(sc.lnf_rstd, 1), x, p_.lnf_w, p_.lnf_b, tp_->own_row_count());
  tp_->gather_rows(sc.lnf);
  if (m_.score_head) {
    if (value_)
      value_head_forward(s, x, with_grad, dloss);
    else
      score_head_forward(s, x, with_grad, dloss);
    return;
  }
  if (policy_) {
    // The weights depend on each token's log-probability under the current parameters: first the
    // token losses (no gradient), then the per-token loss and weights, then the weighted gradient.
    TRIDENT_CHECK(!s.coef.empty(), "policy head: no answer tokens set for this micro-batch (set_policy_inputs)");
    head_chunks(s, false, 0.0f, TensorView{}, sc.entropy_sums);
    PolicyArgs a = policy_args_;
    a.scale = dloss;
    be_.policy_loss(sc.loss_acc, with_grad ? sc.row_weights : TensorView{}, sc.losses, s.old_logp, s.coef,
                    s.coef_adv, s.ref_token_nll, sc.entropy_sums, B_ * T_, a);
    if (with_grad) head_chunks(s, true, 1.0f, sc.row_weights);
  } else if (dpo_) {
    // A sequence's loss couples all its tokens: first every token's loss (no gradient), then the
    // pair losses and each sequence's weight, then the logits again for the weighted gradient.
    TRIDENT_CHECK(!s.ref_nll.empty(), "DPO head: no reference log-probabilities for this micro-batch");
    head_chunks(s, false, 0.0f, TensorView{});
    be_.segment_sum(sc.seq_nll, sc.losses, B_, T_);
    DpoArgs a = dpo_args_;
    a.scale = dloss;
    be_.dpo_loss(sc.loss_acc, with_grad ? sc.row_weights : TensorView{}, sc.seq_nll, s.ref_nll,
                 s.targets.as<int32_t>(), B_ / 2, T_, a);
    if (with_grad) head_chunks(s, true, 1.0f, sc.row_weights);
  } else {
    head_chunks(s, with_grad, dloss, TensorView{});
    be_.sum(sc.loss_acc.slice(0, 1), sc.losses);
  }
  if (!s.nll_out.empty()) be_.segment_sum(s.nll_out, sc.losses, B_, T_);
  if (!s.token_nll_out.empty()) be_.copy(s.token_nll_out, sc.losses);
  if (!with_grad) return;
  final_norm_backward(s, x, tp_->start_sum(sc.dlnf));   // copy_to_tp_region's backward
}

// Logits of sc.lnf and vocab-parallel cross-entropy in row chunks, so the (rows, V/tp) logits
// never exceed kLogitsChunkBytes; full-vocabulary logits are never gathered. Token losses go to
// sc.losses; with gradients each chunk's logit gradient (scaled by row_weights where given) is
// multiplied back into sc.dlnf and the head's weight gradient. With entropy_sums (N,2) given, each
// row's xent_entropy_sums go there first (summed over TP), from the logits the cross-entropy then
// overwrites.
void GptStage::head_chunks(Slot& s, bool with_grad, float dloss, TensorView row_weights, TensorView entropy_sums) {
  Scratch& sc = *scratch_;
  const int N = B_ * T_, C = C_, Vl = layout_.vocab_local(), Vv = layout_.vocab_valid(), v0 = layout_.vocab_start();
  Stream st = be_.stream();
  Comm& tp = *g_.tp;
  for (int r0 = 0; r0 < N; r0 += logits_rows_) {
    const int R = std::min(logits_rows_, N - r0);
    TensorView logits = sc.logits.slice(0, static_cast<size_t>(R) * Vl);
    TensorView lnf = sc.lnf.slice(static_cast<size_t>(r0) * C, static_cast<size_t>(R) * C);
    TensorView rowmax = sc.rowmax.slice(0, R), stats = sc.stats.slice(0, 2 * static_cast<size_t>(R));
    const int32_t* targets = s.targets.as<int32_t>() + r0;

    be_.matmul_fwd(logits, lnf, p_.lm_head, TensorView{}, R, C, Vl);
    if (!entropy_sums.empty()) {
      const TensorView sums = entropy_sums.slice(2 * static_cast<size_t>(r0), 2 * static_cast<size_t>(R));
      be_.xent_max(rowmax, logits, R, Vl, Vv);
      if (tp.size() > 1) tp.all_reduce(rowmax.data, R, DType::F32, ReduceOp::Max, st);
      be_.xent_entropy_sums(sums, logits, rowmax, R, Vl, Vv);
      if (tp.size() > 1) tp.all_reduce(sums.data, sums.numel, DType::F32, ReduceOp::Sum, st);
    }
    if (tp.size() == 1) {
      be_.xent_fused(sc.losses.slice(r0, R), logits, rowmax, stats, targets, R, Vl, Vv, dloss);
    } else {
      be_.xent_max(rowmax, logits, R, Vl, Vv);
      tp.all_reduce(rowmax.data, R, DType::F32, ReduceOp::Max, st);
      be_.xent_stats(stats, logits, rowmax, targets, R, Vl, Vv, v0);
      tp.all_reduce(stats.data, 2 * static_cast<size_t>(R), DType::F32, ReduceOp::Sum, st);
      be_.xent_bwd(sc.losses.slice(r0, R), logits, rowmax, stats, targets, R, Vl, Vv, v0, dloss);
    }
    if (!row_weights.empty()) be_.scale_rows(logits, row_weights.slice(r0, R), R, Vl);
    if (with_grad)
      be_.matmul_bwd(sc.dlnf.slice(static_cast<size_t>(r0) * C, static_cast<size_t>(R) * C), gr_.lm_head,
                     TensorView{}, logits, lnf, p_.lm_head, R, C, Vl);
  }
}

// A reward model's head after the final norm: each sequence's score at its last token and the
// pairwise loss (pairs are rows 2i, 2i+1 of the micro-batch). The score is computed alike on
// every TP rank from the gathered norm output and the replicated score.weight, so dlnf is whole
// on each: no TP sum.
void GptStage::score_head_forward(Slot& s, TensorView x, bool with_grad, float dloss) {
  Scratch& sc = *scratch_;
  const int32_t* targets = s.targets.as<int32_t>();
  be_.reward_fwd(sc.scores, with_grad ? sc.dscores : TensorView{}, sc.loss_acc.slice(0, 3), sc.lnf, p_.score_w,
                 targets, B_, T_, C_, dloss);
  if (!with_grad) return;
  be_.reward_bwd(sc.dlnf, gr_.score_w, sc.dscores, sc.lnf, p_.score_w, targets, B_, T_, C_);
  final_norm_backward(s, x, TpSum{});
}

// A value model's head after the final norm: the score weight at every position, and with the
// slot's value inputs PPO's clipped value loss. As for the score head, dlnf is whole on every TP
// rank: no TP sum.
void GptStage::value_head_forward(Slot& s, TensorView x, bool with_grad, float dloss) {
  Scratch& sc = *scratch_;
  const int N = B_ * T_;
  TRIDENT_CHECK(!s.value_coef.empty() || !s.values_out.empty(),
                "value head: no value inputs set for this micro-batch (set_value_inputs)");
  TRIDENT_CHECK(!with_grad || !s.value_coef.empty(), "value head: a backward needs the value loss's inputs");
  ValueArgs a = value_args_;
  a.scale = dloss;
  const TensorView values = s.values_out.empty() ? sc.values : s.values_out;
  be_.value_fwd(values, with_grad ? sc.dvalues : TensorView{}, sc.loss_acc, sc.lnf, p_.score_w, s.old_values,
                s.returns, s.value_coef, N, C_, a);
  if (!with_grad) return;
  be_.value_bwd(sc.dlnf, gr_.score_w, sc.dvalues, sc.lnf, p_.score_w, N, C_);
  final_norm_backward(s, x, TpSum{});
}

// The final norm's backward from sc.dlnf (its TP sum `dlnf_sum` started, or none), into s.grad.
void GptStage::final_norm_backward(Slot& s, TensorView x, TpSum dlnf_sum) {
  Scratch& sc = *scratch_;
  const int C = C_;
  Stream st = be_.stream();
  be_.zero(s.grad);
  // The last block's fcproj bias gradient: the column sums of s.grad (see block_backward).
  const TensorView fcproj_bias = chunk_.n_layers() > 0 ? block_g(chunk_.n_layers() - 1).fcproj_b : TensorView{};
  const TensorView dlnf_peer = dlnf_sum.wait(st);
  TpStrategy& tp = *tp_;
  norm_bwd_tp(be_, block_shape(B_ * T_), tp.bwd_rows(s.grad, C), gr_.lnf_w, gr_.lnf_b, fcproj_bias,
              tp.bwd_rows(sc.dlnf, C), dlnf_peer, tp.saved_rows(x, C), p_.lnf_w, tp.bwd_rows(sc.lnf_mean, 1),
              tp.bwd_rows(sc.lnf_rstd, 1), tp.bwd_row_count(), dlnf_sum.release_in_op());
  dlnf_sum.done(st);
  if (tp.own_rows_backward()) tp.start_grad_gather(s.grad_gather, s.grad);
}

void GptStage::set_dpo(const DpoArgs& a) {
  TRIDENT_CHECK(B_ % 2 == 0, "set_dpo: a micro-batch of whole pairs needs an even micro-batch size");
  TRIDENT_CHECK(!m_.score_head, "set_dpo: a reward model has no language-model head to train with DPO");
  dpo_ = true;
  dpo_args_ = a;
}

void GptStage::set_policy_loss(const PolicyArgs& a) {
  TRIDENT_CHECK(!m_.score_head && !dpo_, "set_policy_loss: the head is a reward model's or DPO's");
  policy_ = true;
  policy_args_ = a;
}

void GptStage::set_policy_inputs(int slot, TensorView old_logp, TensorView coef, TensorView coef_adv,
                                 TensorView ref_token_nll) {
  Slot& s = slots_[slot];
  s.old_logp = old_logp;
  s.coef = coef;
  s.coef_adv = coef_adv;
  s.ref_token_nll = ref_token_nll;
}

void GptStage::set_value_loss(const ValueArgs& a) {
  TRIDENT_CHECK(m_.score_head, "set_value_loss: a value model has the score head (model.score_head)");
  value_ = true;
  value_args_ = a;
}

void GptStage::set_value_inputs(int slot, TensorView old_values, TensorView returns, TensorView coef,
                                TensorView values_out) {
  Slot& s = slots_[slot];
  s.old_values = old_values;
  s.returns = returns;
  s.value_coef = coef;
  s.values_out = values_out;
}

void GptStage::set_token_nll(int slot, TensorView out) { slots_[slot].token_nll_out = out; }

void GptStage::set_sequence_nll(int slot, TensorView reference, TensorView out) {
  Slot& s = slots_[slot];
  s.ref_nll = reference;
  s.nll_out = out;
}

TensorView GptStage::loss_sums() const { return stage_.last() ? scratch_->loss_acc : TensorView{}; }

void GptStage::zero_loss_sums() {
  if (stage_.last()) be_.zero(scratch_->loss_acc);
}

LossSums GptStage::take_loss_sums() {
  if (!stage_.last()) return {};
  float v[kLossSums] = {};
  be_.copy_to_host(v, scratch_->loss_acc);
  be_.zero(scratch_->loss_acc);
  return {v[0], v[1], v[2], v[3], v[4]};
}

std::vector<float> GptStage::last_scores() const {
  TRIDENT_CHECK(stage_.last() && m_.score_head, "last_scores: only the last stage of a reward model has scores");
  std::vector<float> out(B_);
  be_.copy_to_host(out.data(), scratch_->scores);
  return out;
}

}  // namespace trident
