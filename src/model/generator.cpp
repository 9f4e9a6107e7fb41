// KV-cache decoding and token sampling.
#include "trident/model/generator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "trident/core/arena.hpp"
#include "trident/model/tp_regions.hpp"

namespace trident {

int32_t sample_token(const std::vector<float>& logits, const SamplingParams& p, Rng& rng) {
  const int V = static_cast<int>(logits.size());
  if (p.temperature <= 0) return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  // Most likely first; ties by id, so the candidate set does not depend on the sort.
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  const int k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<double> prob(k);
  const double top = logits[ids[0]] / p.temperature;
  double total = 0;
  for (int i = 0; i < k; ++i) total += prob[i] = std::exp(logits[ids[i]] / p.temperature - top);
  int keep = k;
  if (p.top_p < 1.0) {
    double cum = 0;
    for (keep = 0; keep < k;) {
      cum += prob[keep++] / total;
      if (cum >= p.top_p) break;
    }
    total = std::accumulate(prob.begin(), prob.begin() + keep, 0.0);
  }
  double u = rng.uniform() * total;
  for (int i = 0; i < keep; ++i) {
    u -= prob[i];
    if (u <= 0) return ids[i];
  }
  return ids[keep - 1];
}

Generator::Generator(GptStage& model, int max_len) : model_(model), max_len_(max_len) {
  const ModelConfig& m = model.config();
  const ParallelGroups& g = model.groups();
  TRIDENT_CHECK(model.stage().first() && model.stage().last(), "generation needs a single pipeline stage (pp = 1)");
  TRIDENT_CHECK(max_len >= 1 && max_len <= m.positions(), str("generation length ", max_len, " outside [1, ",
                                                              m.positions(), "]"));
  Backend& be = model.backend();
  const DType act = be.compute_dtype();
  const BlockDims d = block_dims(m, g.topo.tp());
  const size_t N = max_len, C = m.n_embd, NKVl = d.NKVl, HS = d.HS;

  // The cache holds this rank's key/value heads only (n_kv_head / tp of them, grouped-query).
  ArenaLayout cache;
  k_cache_.resize(m.n_layer);
  v_cache_.resize(m.n_layer);
  for (int l = 0; l < m.n_layer; ++l) {
    cache.want(&k_cache_[l], act, NKVl * N * HS);
    cache.want(&v_cache_[l], act, NKVl * N * HS);
  }
  cache_buf_ = Buffer(be, cache.bytes());
  cache.bind(cache_buf_.get());

  ArenaLayout a;
  a.want(&x_, act, N * C);
  a.want(&tokens_, DType::I32, N);
  plan_block_acts(a, acts_, act, N, d, 0, false);
  act_buf_ = Buffer(be, a.bytes());
  a.bind(act_buf_.get());
  acts_.x3 = x_;   // each block writes its output over its input (see block_forward)
}

Generator::~Generator() = default;

std::vector<float> Generator::feed(const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  TRIDENT_CHECK(n >= 1 && pos_ + n <= max_len_, str("feeding ", n, " tokens at position ", pos_, " of ", max_len_));
  const ModelConfig& m = model_.config();
  const ParallelGroups& g = model_.groups();
  model_.need_all_params();
  const StageTensors& w = model_.weights();
  const ParamLayout& layout = model_.layout();
  Backend& be = model_.backend();
  const int C = m.n_embd;
  const BlockShape shape = model_.block_shape(n);
  const BlockDims& d = shape.d;
  const BlockActs acts = block_rows(acts_, 0, n, d, 0);

  be.copy_from_host(tokens_.slice(0, n), tokens.data());
  TensorView x = x_.slice(0, static_cast<size_t>(n) * C);
  // Positions [pos_, pos_ + n): the position table (gpt2) is entered at row pos_, the RoPE table
  // (llama) read from there.
  const bool wpe = g.coord.tp == 0 && !w.wpe.empty();
  be.encoder_fwd(x, tokens_.as<int32_t>(), w.wte,
                 wpe ? w.wpe.slice(static_cast<size_t>(pos_) * C, static_cast<size_t>(n) * C) : TensorView{}, 1, n, C,
                 layout.vocab_start(), layout.vocab_local(), nullptr);
  reduce_from_tp_region_fwd(*g.tp, x, be.stream());
  for (int l = 0; l < m.n_layer; ++l) {
    auto attention = [&](const BlockActs& a) {
      if (d.llama) be.rope_fwd(a.qkv, model_.rope(), 1, n, d.NHl, d.NKVl, d.HS, pos_, nullptr);
      be.attention_decode(a.atty, k_cache_[l], v_cache_[l], a.qkv, 1, n, pos_, max_len_, d.NHl, d.NKVl, d.HS);
    };
    block_forward(be, *g.tp, w.blocks[l], acts, x, TpSum{}, shape, attention);
  }
  pos_ += n;
  return model_.head_logits(x.slice(static_cast<size_t>(n - 1) * C, C), 1);
}

}  // namespace trident
