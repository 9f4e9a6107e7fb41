// Construction of the per-rank parameter layout: names, global shapes, TP hyperslabs, units,
// flat offsets and DP buckets.
#include "trident/model/layout.hpp"

#include <algorithm>
#include <cmath>

#include "trident/core/error.hpp"

namespace trident {

StageInfo StageInfo::of(const ModelConfig& m, int stage, int n_stages, int virtual_stages) {
  StageInfo s;
  s.stage = stage;
  s.n_stages = n_stages;
  s.n_chunks = virtual_stages;
  int per = m.n_layer / (n_stages * virtual_stages);
  s.layer_begin = stage * per;
  s.layer_end = s.layer_begin + per;
  return s;
}

int StageInfo::layer(int i) const {
  const int per = chunk_layers();
  return per == 0 ? layer_begin : layer_begin + (i / per) * n_stages * per + i % per;
}

StageInfo StageInfo::chunk(int c) const {
  StageInfo s;
  s.stage = c * n_stages + stage;
  s.n_stages = n_stages * n_chunks;
  s.layer_begin = layer(c * chunk_layers());
  s.layer_end = s.layer_begin + chunk_layers();
  return s;
}

std::vector<int64_t> ParamInfo::local_shape() const {
  std::vector<int64_t> s = global_shape;
  if (split_dim >= 0) s[split_dim] = split_size;
  return s;
}

// Called once per element (initialisation, gathers): no allocation. The last dimension varies
// fastest; each local index is offset by split_begin along split_dim.
int64_t ParamInfo::global_index(size_t i) const {
  const int dims = static_cast<int>(global_shape.size());
  int64_t g = 0, stride = 1;
  size_t rem = i;
  for (int d = dims - 1; d >= 0; --d) {
    const int64_t extent = d == split_dim ? split_size : global_shape[d];
    int64_t gi = static_cast<int64_t>(rem % static_cast<size_t>(extent));
    rem /= static_cast<size_t>(extent);
    if (d == split_dim) gi += split_begin;
    if (gi >= global_shape[d]) return -1;
    g += gi * stride;
    stride *= global_shape[d];
  }
  return g;
}

namespace {

size_t product(const std::vector<int64_t>& s) {
  size_t n = 1;
  for (int64_t d : s) n *= static_cast<size_t>(d);
  return n;
}

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

}  // namespace

void ParamLayout::add(ParamInfo p) {
  p.numel = product(p.local_shape());
  params_.push_back(std::move(p));
}

ParamLayout::ParamLayout(const ModelConfig& m, const StageInfo& stage, int tp, int tp_rank, int dp,
                         size_t bucket_elems)
    : bucket_elems_(bucket_elems), stage_(stage) {
  const int64_t C = m.n_embd, NH = m.n_head, HS = m.head_size(), L = m.n_layer, F = m.ffn();
  const int64_t NHl = NH / tp, Cl = C / tp, Fl = F / tp, Vp = m.padded_vocab(tp);
  vocab_local_ = static_cast<int>(Vp / tp);
  vocab_start_ = tp_rank * vocab_local_;
  vocab_valid_ = std::clamp(m.vocab_size - vocab_start_, 0, vocab_local_);
  const int64_t NKV = m.kv_heads();
  kv_replicas_ = NKV >= tp ? 1 : static_cast<int>(tp / NKV);
  kv_local_ = m.kv_heads_per_rank(tp);
  const double proj_std = m.init_std / std::sqrt(2.0 * L);
  const bool replica = tp_rank != 0;   // TP-replicated tensors are counted in the norm on tp rank 0 only

  auto replicated = [&](std::string name, std::vector<int64_t> shape, int unit, bool decay, double std_,
                        double value) {
    ParamInfo p;
    p.name = std::move(name);
    p.global_shape = std::move(shape);
    p.unit = unit;
    p.decay = decay;
    p.count_in_norm = !replica;
    p.init_std = std_;
    p.init_value = value;
    add(std::move(p));
  };
  auto split = [&](std::string name, std::vector<int64_t> shape, int dim, int64_t local, int unit, bool decay,
                   double std_) {
    ParamInfo p;
    p.name = std::move(name);
    p.global_shape = std::move(shape);
    p.split_dim = dim;
    p.split_size = local;
    p.split_begin = tp_rank * local;
    p.unit = unit;
    p.decay = decay;
    p.init_std = std_;
    add(std::move(p));
  };
  // Llama's q, k, v (and gate, up) are separate tensors, as in Hugging Face checkpoints, packed
  // one after the other into one GEMM operand. Key/value heads: this rank's kv_local_ heads, or
  // with replication the one head its group of kv_replicas_ ranks shares (saved by the first).
  auto packed = [&](std::string name, std::vector<int64_t> shape, int64_t local, int unit, bool decay, double std_) {
    split(std::move(name), std::move(shape), 0, local, unit, decay, std_);
    params_.back().packed = true;
  };
  auto kv = [&](std::string name, std::vector<int64_t> shape, int unit, bool decay, double std_) {
    packed(std::move(name), std::move(shape), kv_local_, unit, decay, std_);
    ParamInfo& p = params_.back();
    p.split_begin = (tp_rank / kv_replicas_) * kv_local_;
    p.count_in_norm = tp_rank % kv_replicas_ == 0;
  };

  const bool llama = m.llama(), tied = m.head_is_wte();
  int unit = 0;
  if (stage.last()) {
    head_unit_ = unit++;
    replicated("lnf.weight", {C}, head_unit_, false, 0, 1);
    if (!llama) replicated("lnf.bias", {C}, head_unit_, false, 0, 0);
    // A reward model's score head, Hugging Face's *ForSequenceClassification score with one label.
    if (m.score_head) replicated("score.weight", {1, C}, head_unit_, true, m.init_std, 0);
    else if (!tied) split("lm_head", {m.vocab_size, C}, 0, vocab_local_, head_unit_, true, m.init_std);
  }
  first_block_unit_ = unit;
  for (int i = stage.n_layers() - 1; i >= 0; --i) {
    const int l = stage.layer(i);
    int u = unit++;
    std::string b = str("blocks.", l, ".");
    if (llama) {
      replicated(b + "ln1.weight", {C}, u, false, 0, 1);
      split(b + "attn.q.weight", {NH, HS, C}, 0, NHl, u, true, m.init_std);
      kv(b + "attn.k.weight", {NKV, HS, C}, u, true, m.init_std);
      kv(b + "attn.v.weight", {NKV, HS, C}, u, true, m.init_std);
      if (m.qkv_bias) {
        split(b + "attn.q.bias", {NH, HS}, 0, NHl, u, false, 0);
        kv(b + "attn.k.bias", {NKV, HS}, u, false, 0);
        kv(b + "attn.v.bias", {NKV, HS}, u, false, 0);
      }
      split(b + "attn.proj.weight", {C, NH * HS}, 1, NHl * HS, u, true, proj_std);
      replicated(b + "ln2.weight", {C}, u, false, 0, 1);
      split(b + "mlp.gate.weight", {F, C}, 0, Fl, u, true, m.init_std);
      packed(b + "mlp.up.weight", {F, C}, Fl, u, true, m.init_std);
      split(b + "mlp.down.weight", {C, F}, 1, Fl, u, true, proj_std);
      continue;
    }
    replicated(b + "ln1.weight", {C}, u, false, 0, 1);
    replicated(b + "ln1.bias", {C}, u, false, 0, 0);
    split(b + "attn.qkv.weight", {3, NH, HS, C}, 1, NHl, u, true, m.init_std);
    split(b + "attn.qkv.bias", {3, NH, HS}, 1, NHl, u, false, 0);
    split(b + "attn.proj.weight", {C, C}, 1, Cl, u, true, proj_std);
    replicated(b + "attn.proj.bias", {C}, u, false, 0, 0);
    replicated(b + "ln2.weight", {C}, u, false, 0, 1);
    replicated(b + "ln2.bias", {C}, u, false, 0, 0);
    split(b + "mlp.fc.weight", {4 * C, C}, 0, 4 * Cl, u, true, m.init_std);
    split(b + "mlp.fc.bias", {4 * C}, 0, 4 * Cl, u, false, 0);
    split(b + "mlp.proj.weight", {C, 4 * C}, 1, 4 * Cl, u, true, proj_std);
    replicated(b + "mlp.proj.bias", {C}, u, false, 0, 0);
  }
  if (stage.first() && (!llama || !tied)) {
    embed_unit_ = unit++;
    if (!llama) replicated("wpe", {m.positions(), C}, embed_unit_, true, m.init_std, 0);
    if (!tied) split("wte", {m.vocab_size, C}, 0, vocab_local_, embed_unit_, true, m.init_std);
  }
  if (tied && (stage.first() || stage.last())) {
    tied_unit_ = unit++;
    split("wte", {m.vocab_size, C}, 0, vocab_local_, tied_unit_, true, m.init_std);
    // The last stage's copy of the tied embedding is counted (and saved) on the first stage.
    if (!stage.first()) params_.back().count_in_norm = false;
  }
  n_units_ = unit;

  // Flat offsets in unit order; buckets close at unit boundaries once they reach bucket_elems,
  // and the tied unit always gets a bucket of its own.
  const size_t bucket_align = kAlign * dp;
  size_t off = 0;
  Bucket cur;
  auto close_bucket = [&](int unit_end) {
    cur.size = round_up(off - cur.offset, bucket_align);
    cur.unit_end = unit_end;
    off = cur.offset + cur.size;
    if (cur.size > 0) buckets_.push_back(cur);
    cur = Bucket{};
    cur.offset = off;
    cur.unit_begin = unit_end;
  };
  // The unit of each chunk's first block, where a bucket must close (the head's bucket may hold
  // the last chunk's top blocks: they are the first to finish backward).
  auto chunk_starts_after = [&](int u) {
    const int i = stage.n_layers() - 1 - (u - first_block_unit_);   // local block of unit u
    return stage.n_chunks > 1 && u >= first_block_unit_ && i >= 0 && i % stage.chunk_layers() == 0;
  };
  size_t pi = 0;
  for (int u = 0; u < n_units_; ++u) {
    if (u == tied_unit_ && off > cur.offset) close_bucket(u);
    for (; pi < params_.size() && params_[pi].unit == u; ++pi) {
      if (params_[pi].packed) off = params_[pi - 1].offset + params_[pi - 1].numel;
      params_[pi].offset = off;
      off = round_up(off + params_[pi].numel, kAlign);
    }
    if (off - cur.offset >= bucket_elems || u == n_units_ - 1 || chunk_starts_after(u)) close_bucket(u + 1);
  }
  total_ = off;
}

int ParamLayout::block_unit(int global_layer) const {
  const int per = stage_.chunk_layers(), virtual_stage = per > 0 ? global_layer / per : -1;
  const int chunk = virtual_stage / stage_.n_stages;
  TRIDENT_CHECK(global_layer >= 0 && per > 0 && virtual_stage % stage_.n_stages == stage_.stage &&
                    chunk < stage_.n_chunks,
                str("layer ", global_layer, " not on stage ", stage_.stage));
  const int i = chunk * per + global_layer % per;   // local block
  return first_block_unit_ + (stage_.n_layers() - 1 - i);
}

int ParamLayout::first_forward_unit() const {
  if (embed_unit_ >= 0) return tied_unit_ >= 0 ? tied_unit_ : embed_unit_;
  return block_unit(stage_.layer_begin);
}

int ParamLayout::bucket_of_unit(int unit) const {
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (unit >= buckets_[b].unit_begin && unit < buckets_[b].unit_end) return static_cast<int>(b);
  TRIDENT_FATAL(str("unit ", unit, " is in no bucket"));
}

const ParamInfo* ParamLayout::find(const std::string& name) const {
  for (const ParamInfo& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const ParamInfo& ParamLayout::get(const std::string& name) const {
  const ParamInfo* p = find(name);
  TRIDENT_CHECK(p != nullptr, str("no parameter '", name, "' on this rank"));
  return *p;
}

}  // namespace trident
