// Batched KV-cache decoding and token sampling.
#include "trident/model/generator.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "trident/core/arena.hpp"
#include "trident/core/rng.hpp"
#include "trident/model/tp_regions.hpp"

namespace trident {

namespace {

// log(sum_j exp(logits_j)) over a whole row, in double.
double logsumexp(const std::vector<float>& logits) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double s = 0;
  for (float z : logits) s += std::exp(z - mx);
  return mx + std::log(s);
}

}  // namespace

SampledToken sample_token(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed, uint64_t sequence,
                          uint64_t position) {
  const int V = static_cast<int>(logits.size());
  auto logprob = [&](int id) { return static_cast<float>(logits[id] - logsumexp(logits)); };
  if (p.temperature <= 0) {
    const int id = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    return {id, logprob(id)};
  }
  std::vector<int> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  // Most likely first; ties by id, so the candidate set does not depend on the sort. Only the
  // first top_k need ordering (a strict order: the same k ids in the same order as a full sort).
  int keep = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(),
                    [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  if (p.top_p < 1.0) {
    std::vector<double> prob(keep);
    const double top = logits[ids[0]] / p.temperature;
    double total = 0;
    for (int i = 0; i < keep; ++i) total += prob[i] = std::exp(logits[ids[i]] / p.temperature - top);
    double cum = 0;
    int n = 0;
    while (n < keep) {
      cum += prob[n++] / total;
      if (cum >= p.top_p) break;
    }
    keep = n;
  }
  // The same score as Backend::sample_shard, so both paths draw the same token from the same logits.
  const float temperature = static_cast<float>(p.temperature);
  int best = ids[0];
  float best_score = -INFINITY;
  for (int i = 0; i < keep; ++i) {
    const float score = logits[ids[i]] / temperature + gumbel_at(seed, sequence, position, ids[i]);
    if (score > best_score || (score == best_score && ids[i] < best)) {
      best_score = score;
      best = ids[i];
    }
  }
  return {best, logprob(best)};
}

SampledToken combine_sample_stats(const float* stats, int shards, size_t stride) {
  float mx = -INFINITY, best = -INFINITY, best_logit = 0;
  int best_id = -1;
  for (int k = 0; k < shards; ++k) {
    const float* s = stats + k * stride;
    mx = std::max(mx, s[0]);
    const int id = static_cast<int>(s[3]);
    if (id >= 0 && (best_id < 0 || s[2] > best || (s[2] == best && id < best_id))) {
      best = s[2];
      best_id = id;
      best_logit = s[4];
    }
  }
  double sum = 0;
  for (int k = 0; k < shards; ++k) {
    const float* s = stats + k * stride;
    if (static_cast<int>(s[3]) >= 0) sum += s[1] * std::exp(static_cast<double>(s[0]) - mx);
  }
  TRIDENT_CHECK(best_id >= 0, "combine_sample_stats: no shard has a candidate");
  return {best_id, static_cast<float>(best_logit - (mx + std::log(sum)))};
}

std::pair<size_t, size_t> prompt_share(size_t n, int rank, int dp) {
  return {n * rank / dp, n * (rank + 1) / dp};
}

int padded_rows(int rows) {
  constexpr int kQuantum = 64;
  if (rows > kQuantum) return (rows + kQuantum - 1) / kQuantum * kQuantum;
  int p = 1;
  while (p < rows) p *= 2;
  return p;
}

// The device buffers of a generator on pipeline stage st: the KV cache of the stage's blocks in
// `cache`, the rows of a feed (and on the last stage the head) in `a`, bound to v's views (the
// constructor) or only sized (device_bytes).
void Generator::plan(ArenaLayout& cache, ArenaLayout& a, Views& v, const ModelConfig& m, const StageInfo& st, int tp,
                     size_t vocab_local, DType act, int slots, int max_len, int rows_cap) {
  const BlockDims d = block_dims(m, tp);
  // The row buffers hold padded_rows of the most rows a feed or a head takes.
  const size_t S = slots, C = m.n_embd, NKVl = d.NKVl, HS = d.HS, T = max_len;
  const size_t Np = padded_rows(rows_cap), Sp = padded_rows(slots), Vl = vocab_local;
  // The cache holds this rank's key/value heads only (n_kv_head / tp of them, grouped-query).
  v.k_cache.resize(st.n_layers());
  v.v_cache.resize(st.n_layers());
  for (int l = 0; l < st.n_layers(); ++l) {
    cache.want(&v.k_cache[l], act, S * NKVl * T * HS);
    cache.want(&v.v_cache[l], act, S * NKVl * T * HS);
  }
  a.want(&v.x, act, Np * C);
  if (st.first()) a.want(&v.pe, act, Np * C);
  a.want(&v.index, DType::I32, 4 * Np + 2 * Sp);   // tokens, positions, (slot, position) rows; sampling keys
  if (d.arch->rotary()) a.want(&v.rope_rows, DType::F32, Np * HS);
  if (st.n_stages > 1) a.want(&v.drawn, DType::I32, 2 * S);
  if (st.last()) {
    a.want(&v.last, act, Sp * C);
    a.want(&v.lnf, act, Sp * C);
    a.want(&v.lnf_mean, DType::F32, Sp);
    a.want(&v.lnf_rstd, DType::F32, Sp);
    a.want(&v.logits, act, Sp * Vl);
    a.want(&v.stats, DType::F32, static_cast<size_t>(tp) * Sp * kSampleStats);
  }
  plan_block_acts(a, v.acts, act, Np, d, BlockActsPlan{0, false});
}

size_t Generator::device_bytes(const ModelConfig& m, const StageInfo& st, int tp, size_t vocab_local, DType act,
                               int slots, int max_len, int max_rows) {
  ArenaLayout cache, a;
  Views v;
  plan(cache, a, v, m, st, tp, vocab_local, act, slots, max_len, std::max(max_rows, slots + max_len));
  return cache.bytes() + a.bytes();
}

Generator::Generator(GptStage& model, int slots, int max_len, int max_rows)
    : model_(model), slots_(slots), max_len_(max_len), rows_cap_(std::max(max_rows, slots + max_len)),
      length_(slots, 0) {
  const ModelConfig& m = model.config();
  const ParallelGroups& g = model.groups();
  TRIDENT_CHECK(model.stage().n_chunks == 1, "generation needs one model chunk per pipeline rank (no interleaved schedule)");
  TRIDENT_CHECK(max_len >= 1 && max_len <= m.positions(), str("generation length ", max_len, " outside [1, ",
                                                              m.positions(), "]"));
  TRIDENT_CHECK(slots >= 1, str("generation batch ", slots, ": must be at least 1"));
  Backend& be = model.backend();
  ArenaLayout cache, a;
  plan(cache, a, v_, m, model.stage(), g.topo.tp(), model.layout().vocab_local(), be.compute_dtype(), slots, max_len,
       rows_cap_);
  cache_buf_ = Buffer(be, cache.bytes());
  cache.bind(cache_buf_.get());
  act_buf_ = Buffer(be, a.bytes());
  a.bind(act_buf_.get());
  if (model.stage().last()) be.zero(v_.last);   // its padding rows go through the head: defined values
  v_.acts.x3 = v_.x;   // each block writes its output over its input (see block_forward)
  if (block_dims(m, g.topo.tp()).arch->rotary()) {
    const int HS = block_dims(m, g.topo.tp()).HS;
    rope_host_.resize(static_cast<size_t>(max_len) * HS);
    rope_table(rope_host_.data(), max_len, HS, static_cast<float>(m.rope_theta));
  }
}

Generator::~Generator() = default;

StreamReplay& Generator::replay(std::unique_ptr<StreamReplay>& r) {
  if (!r) r = model_.groups().topo.tp() == 1 ? model_.backend().make_replay() : std::make_unique<PlainReplay>();
  return *r;
}

void Generator::feed(const std::vector<int>& slots, const std::vector<std::vector<int32_t>>& tokens) {
  TRIDENT_CHECK(slots.size() == tokens.size() && !slots.empty() && slots.size() <= static_cast<size_t>(slots_),
                str("feeding ", tokens.size(), " sequences to ", slots.size(), " slots of ", slots_));
  const ModelConfig& m = model_.config();
  const ParallelGroups& g = model_.groups();
  const StageTensors& w = model_.weights();
  const ParamLayout& layout = model_.layout();
  Backend& be = model_.backend();
  const int C = m.n_embd;

  int fed = 0;
  step_ = true;
  for (const std::vector<int32_t>& t : tokens) {
    fed += static_cast<int>(t.size());
    step_ = step_ && t.size() == 1;
  }
  TRIDENT_CHECK(fed <= rows_cap_, str("feeding ", fed, " tokens at once; the generator holds ", rows_cap_));
  // The blocks run on padded_rows(fed) rows, so that the GEMMs see a few row counts rather than a
  // new one (a new plan, autotuned on a GPU) at almost every step of a ragged batch. A decode step
  // also gives the padding rows tokens (id 0, at slot -1: attention skips them), so that every op
  // runs on np rows; a prompt feed runs its ops on the n fed rows and zeroes the rest.
  const int np = padded_rows(fed), n = step_ ? np : fed;
  // Host tables of the n rows: tokens (n), positions (n), (slot, position) pairs (n, 2).
  std::vector<int32_t>& index = index_host_;
  index.assign(4 * static_cast<size_t>(n), 0);
  for (int r = fed; r < n; ++r) index[2 * n + 2 * r] = -1;
  last_rows_.clear();
  int r = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int s = slots[i];
    TRIDENT_CHECK(s >= 0 && s < slots_ && !tokens[i].empty() && length_[s] + tokens[i].size() <= size_t(max_len_),
                  str("feeding ", tokens[i].size(), " tokens to slot ", s, " at position ", s >= 0 && s < slots_ ? length_[s] : -1,
                      " of ", max_len_));
    for (int32_t t : tokens[i]) {
      index[r] = t;
      index[n + r] = length_[s];
      index[2 * n + 2 * r] = s;
      index[2 * n + 2 * r + 1] = length_[s]++;
      ++r;
    }
    last_rows_.push_back(r - 1);
  }
  fed_slots_ = slots;
  be.copy_from_host(v_.index.slice(0, index.size()), index.data());
  const int32_t* tok = v_.index.as<int32_t>();
  const int32_t* pos = tok + n;
  const int32_t* rows = tok + 2 * n;
  const BlockShape shape = model_.block_shape(np);
  const BlockDims& d = shape.d;
  TensorView rope;
  if (d.arch->rotary()) {
    std::vector<float>& table = rope_rows_host_;
    table.resize(static_cast<size_t>(n) * d.HS);
    for (int i = 0; i < n; ++i)
      std::copy_n(rope_host_.begin() + static_cast<size_t>(index[n + i]) * d.HS, d.HS, table.begin() + static_cast<size_t>(i) * d.HS);
    rope = v_.rope_rows.slice(0, table.size());
    be.copy_from_host(rope, table.data());
  }
  model_.need_all_params();

  const BlockActs acts = block_rows(v_.acts, 0, np, d, 0);
  const TensorView padded = v_.x.slice(0, static_cast<size_t>(np) * C), x = padded.slice(0, static_cast<size_t>(n) * C);
  const size_t qkv_n = static_cast<size_t>(n) * (d.NHl + 2 * d.NKVl) * d.HS;   // the fed rows of qkv and atty
  const size_t atty_n = static_cast<size_t>(n) * d.NHl * d.HS;
  const StageInfo& st = model_.stage();
  Comm& pp = *g.pp;
  // Under pipeline parallelism a stage's rows come from the previous stage before its ops (the
  // same on each TP rank) and go to the next after them: the transfers are not replayed.
  if (!st.first()) pp.exchange({P2POp{P2POp::Recv, x.data, x.numel, x.dtype, pp.rank() - 1}}, be.stream());
  auto queue_ops = [&] {
    if (np > n) be.zero(padded.slice(static_cast<size_t>(n) * C, static_cast<size_t>(np - n) * C));
    if (st.first()) {
      be.encoder_fwd(x, tok, w.wte, TensorView{}, 1, n, C, layout.vocab_start(), layout.vocab_local(), nullptr);
      // Each row's own position: the position table (gpt2) gathered as an embedding of the
      // positions on one TP rank (before the sum over TP), the RoPE table (llama) gathered on the host.
      if (g.coord.tp == 0 && !w.wpe.empty()) {
        TensorView pe = v_.pe.slice(0, static_cast<size_t>(n) * C);
        be.encoder_fwd(pe, pos, w.wpe, TensorView{}, 1, n, C, 0, m.positions(), nullptr);
        be.add(x, x, pe);
      }
      reduce_from_tp_region_fwd(*g.tp, x, be.stream());
    }
    for (int l = 0; l < st.n_layers(); ++l) {
      auto attention = [&](const BlockActs& a) {
        const TensorView qkv = a.qkv.slice(0, qkv_n);
        d.arch->position_fwd(be, qkv, rope, 1, n, d.NHl, d.NKVl, d.HS, nullptr);
        be.attention_decode(a.atty.slice(0, atty_n), v_.k_cache[l], v_.v_cache[l], qkv, rows, n, slots_, max_len_,
                            d.NHl, d.NKVl, d.HS);
      };
      block_forward(be, *g.tp, w.blocks[l], acts, padded, TpSum{}, shape, attention);
    }
    if (!st.last()) return;
    // The last row of each fed sequence, in feed order, one copy per run of consecutive rows: a
    // decode step's rows are its sequences' last rows, padding included (one copy).
    if (step_) {
      be.copy(v_.last.slice(0, static_cast<size_t>(n) * C), x);
      return;
    }
    for (size_t i = 0; i < last_rows_.size();) {
      size_t run = 1;
      while (i + run < last_rows_.size() && last_rows_[i + run] == last_rows_[i] + static_cast<int>(run)) ++run;
      be.copy(v_.last.slice(i * C, run * C), x.slice(static_cast<size_t>(last_rows_[i]) * C, run * C));
      i += run;
    }
  };
  if (step_)
    replay(block_replays_[np]).run(queue_ops);
  else
    queue_ops();
  if (!st.last()) pp.exchange({P2POp{P2POp::Send, x.data, x.numel, x.dtype, pp.rank() + 1}}, be.stream());
}

std::vector<float> Generator::logits() {
  TRIDENT_CHECK(model_.stage().last(), "Generator::logits: the logits are on the last pipeline stage");
  const int R = static_cast<int>(fed_slots_.size()), V = model_.config().vocab_size;
  // head_logits takes at most a micro-batch of rows at a time.
  const int chunk = model_.micro_batch() * model_.config().seq_len;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(R) * V);
  for (int r0 = 0; r0 < R; r0 += chunk) {
    const int rows = std::min(chunk, R - r0);
    std::vector<float> part = model_.head_logits(v_.last.slice(static_cast<size_t>(r0) * model_.config().n_embd,
                                                             static_cast<size_t>(rows) * model_.config().n_embd),
                                                 rows);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::vector<SampledToken> Generator::sample(const SamplingParams& p, uint64_t seed,
                                            const std::vector<uint64_t>& sequences) {
  const int R = static_cast<int>(fed_slots_.size());
  TRIDENT_CHECK(sequences.size() == fed_slots_.size(), str(sequences.size(), " sequence ids for ", R, " sequences"));
  std::vector<SampledToken> out(R);
  if (model_.stage().last()) out = draw(p, seed, sequences);
  if (model_.stage().n_stages > 1) share_drawn(out);
  return out;
}

// The last stage's draws to every stage of the pipeline (each TP rank's from its peer on the last
// stage, which drew the same): the tokens the next step feeds and the log-probabilities, as int32
// pairs (a log-probability's bits unchanged).
void Generator::share_drawn(std::vector<SampledToken>& out) {
  Backend& be = model_.backend();
  Comm& pp = *model_.groups().pp;
  std::vector<int32_t>& host = drawn_host_;
  host.resize(2 * out.size());
  if (model_.stage().last())
    for (size_t i = 0; i < out.size(); ++i) {
      host[2 * i] = out[i].token;
      std::memcpy(&host[2 * i + 1], &out[i].logprob, sizeof(float));
    }
  TensorView drawn = v_.drawn.slice(0, host.size());
  if (model_.stage().last()) be.copy_from_host(drawn, host.data());
  pp.broadcast(drawn.data, drawn.numel, DType::I32, pp.size() - 1, be.stream());
  be.copy_to_host(host.data(), drawn);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].token = host[2 * i];
    std::memcpy(&out[i].logprob, &host[2 * i + 1], sizeof(float));
  }
}

std::vector<SampledToken> Generator::draw(const SamplingParams& p, uint64_t seed,
                                          const std::vector<uint64_t>& sequences) {
  const int R = static_cast<int>(fed_slots_.size());
  std::vector<SampledToken> out(R);
  if (!p.on_device()) {
    const std::vector<float> all = logits();
    const size_t V = model_.config().vocab_size;
    const size_t kept = p.vocab_limit > 0 ? std::min<size_t>(V, p.vocab_limit) : V;
    for (int i = 0; i < R; ++i)
      out[i] = sample_token(std::vector<float>(all.begin() + i * V, all.begin() + i * V + kept), p, seed, sequences[i],
                            length_[fed_slots_[i]]);
    return out;
  }
  const ModelConfig& m = model_.config();
  const ParallelGroups& g = model_.groups();
  const StageTensors& w = model_.weights();
  const ParamLayout& layout = model_.layout();
  Backend& be = model_.backend();
  const size_t C = m.n_embd, Vl = layout.vocab_local(), tp = g.topo.tp();
  // The head runs on padded_rows(R) rows (as the blocks: few GEMM shapes); a decode step samples
  // them all (the padding rows' draws unused), so that its ops depend on that count only.
  const int Rp = padded_rows(R), Rs = step_ ? Rp : R;
  const size_t n_stats = static_cast<size_t>(Rs) * kSampleStats;
  std::vector<int32_t>& keys = keys_host_;
  keys.assign(2 * static_cast<size_t>(Rs), 0);
  for (int i = 0; i < R; ++i) {
    TRIDENT_CHECK(sequences[i] <= 0x7fffffffu, str("sequence id ", sequences[i], " exceeds the 31 bits of a key"));
    keys[2 * i] = static_cast<int32_t>(sequences[i]);
    keys[2 * i + 1] = length_[fed_slots_[i]];
  }
  TensorView key_view = v_.index.slice(4 * static_cast<size_t>(padded_rows(rows_cap_)), keys.size());
  be.copy_from_host(key_view, keys.data());
  // This shard's candidate columns: its real vocabulary, cut at the sampling limit.
  const int valid = p.vocab_limit > 0 ? std::clamp(p.vocab_limit - layout.vocab_start(), 0, layout.vocab_valid())
                                      : layout.vocab_valid();
  const float temperature = static_cast<float>(p.temperature);
  TensorView stats = v_.stats.slice(0, n_stats * tp);
  auto queue_ops = [&] {
    TensorView lnf = v_.lnf.slice(0, Rp * C), logits = v_.logits.slice(0, Rp * Vl);
    norm_fwd(be, model_.block_shape(Rp), lnf, w.lnf_b.empty() ? TensorView{} : v_.lnf_mean.slice(0, Rp),
             v_.lnf_rstd.slice(0, Rp), v_.last.slice(0, Rp * C), w.lnf_w, w.lnf_b, Rp);
    be.matmul_fwd(logits, lnf, w.lm_head, TensorView{}, Rp, static_cast<int>(C), static_cast<int>(Vl));
    be.sample_shard(stats.slice(n_stats * g.coord.tp, n_stats), logits.slice(0, Rs * Vl), key_view.as<int32_t>(),
                    seed, temperature, Rs, static_cast<int>(Vl), valid, layout.vocab_start());
  };
  if (step_) {
    if (head_replays_.size() > 64) head_replays_.clear();   // seeds of earlier generate() calls
    replay(head_replays_[{Rp, seed, temperature, valid}]).run(queue_ops);
  } else {
    queue_ops();
  }
  if (tp > 1) g.tp->all_gather(stats.data, n_stats, DType::F32, be.stream());
  std::vector<float>& host = stats_host_;
  host.resize(stats.numel);
  be.copy_to_host(host.data(), stats);
  for (int i = 0; i < R; ++i)
    out[i] = combine_sample_stats(host.data() + static_cast<size_t>(i) * kSampleStats, static_cast<int>(tp), n_stats);
  return out;
}

std::vector<Completion> Generator::generate(const std::vector<std::vector<int32_t>>& prompts,
                                            const GenerationParams& p, uint64_t first_sequence) {
  for (size_t i = 0; i < prompts.size(); ++i)
    if (prompts[i].empty() || prompts[i].size() >= static_cast<size_t>(max_len_))
      throw InputError(str("prompt ", first_sequence + i, " has ", prompts[i].size(), " tokens; it needs 1 to ",
                           max_len_ - 1, " (the generation length)"));
  std::vector<Completion> out(prompts.size());
  std::vector<int> prompt_in(slots_, -1);   // the prompt each slot generates, -1: free
  std::vector<int32_t> next_token(slots_);
  size_t next_prompt = 0;
  // A step's feed, kept between steps: a running sequence's one-token vector is reassigned, not
  // allocated again each step.
  std::vector<int> slots;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<uint64_t> sequences;
  for (;;) {
    // Every running sequence feeds its last token; free slots take the next prompts whole while
    // they fit beside them.
    slots.clear();
    sequences.clear();
    size_t fed = 0;
    auto add = [&](int s, const int32_t* t, size_t count) {
      slots.push_back(s);
      sequences.push_back(first_sequence + prompt_in[s]);
      if (tokens.size() <= fed) tokens.emplace_back();
      tokens[fed++].assign(t, t + count);
    };
    int rows = 0;
    for (int s = 0; s < slots_; ++s)
      if (prompt_in[s] >= 0) {
        add(s, &next_token[s], 1);
        ++rows;
      }
    for (int s = 0; s < slots_ && next_prompt < prompts.size(); ++s)
      if (prompt_in[s] < 0 && rows + prompts[next_prompt].size() <= static_cast<size_t>(rows_cap_)) {
        reset(s);
        prompt_in[s] = static_cast<int>(next_prompt);
        add(s, prompts[next_prompt].data(), prompts[next_prompt].size());
        rows += static_cast<int>(prompts[next_prompt++].size());
      }
    if (slots.empty()) break;
    tokens.resize(fed);
    feed(slots, tokens);
    const std::vector<SampledToken> drawn = sample(p.sampling, p.seed, sequences);
    for (size_t i = 0; i < slots.size(); ++i) {
      const int s = slots[i];
      Completion& c = out[prompt_in[s]];
      c.tokens.push_back(drawn[i].token);
      c.logprobs.push_back(drawn[i].logprob);
      c.stopped = std::find(p.stop_tokens.begin(), p.stop_tokens.end(), drawn[i].token) != p.stop_tokens.end();
      if (c.stopped || static_cast<int>(c.tokens.size()) >= p.max_new_tokens || length_[s] >= max_len_)
        prompt_in[s] = -1;
      else
        next_token[s] = drawn[i].token;
    }
  }
  return out;
}

}  // namespace trident
