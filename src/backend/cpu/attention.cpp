// CpuBackend causal self-attention, multi-head (GPT-2) and grouped-query (Llama). The forward keeps
// only the logsumexp of each score row; the backward recomputes probabilities from q, k and lse
// (no T x T matrix is ever stored).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::dot;
using cpu::f32_data;

namespace {

// Offsets into qkv (B, T, NH + 2 NKV, HS) (NH query heads, then NKV key heads, then NKV value
// heads; GPT-2's (B, T, 3, NH, HS) is the case NKV = NH), out/dout (B, T, NH, HS) and lse
// (B, NH, T). Query head h reads key/value head h / (NH / NKV).
struct AttnLayout {
  int T, NH, NKV, HS;
  size_t row(int b, int t) const { return (static_cast<size_t>(b) * T + t) * (NH + 2 * NKV) * HS; }
  size_t q(int b, int t, int h) const { return row(b, t) + static_cast<size_t>(h) * HS; }
  size_t k(int b, int t, int h) const { return row(b, t) + static_cast<size_t>(NH + h / (NH / NKV)) * HS; }
  size_t v(int b, int t, int h) const { return row(b, t) + static_cast<size_t>(NH + NKV + h / (NH / NKV)) * HS; }
  size_t act(int b, int t, int h) const {
    return (static_cast<size_t>(b) * T + t) * NH * HS + static_cast<size_t>(h) * HS;
  }
};

void axpy(float* y, float a, const float* x, int n) {
  for (int d = 0; d < n; ++d) y[d] += a * x[d];
}

// Softmax probability of key k for query q, from the row's logsumexp; both backward passes
// evaluate this same expression, so they see the same bits.
float prob(const float* q, const float* k, float lse, float scale, int HS) {
  return std::exp(scale * dot(q, k, HS) - lse);
}

// One causal query row over keys and values first..last: writes the output row, returns the row's
// logsumexp. Shared by the forward and decoding, so both produce the same bits; a packed record
// (first > 0) gets the bits it gets alone at first = 0. p holds last+1 floats of scratch.
template <class KeyAt, class ValueAt>
float attend_row(float* orow, const float* q, int first, int last, const KeyAt& key, const ValueAt& value,
                 float scale, int HS, float* p) {
  float mx = -INFINITY;
  for (int j = first; j <= last; ++j) {
    p[j] = scale * dot(q, key(j), HS);
    mx = std::max(mx, p[j]);
  }
  double s = 0;
  for (int j = first; j <= last; ++j) {
    p[j] = std::exp(p[j] - mx);
    s += p[j];
  }
  std::fill(orow, orow + HS, 0.0f);
  for (int j = first; j <= last; ++j) axpy(orow, p[j], value(j), HS);
  const float inv = static_cast<float>(1.0 / s);
  for (int d = 0; d < HS; ++d) orow[d] *= inv;
  return static_cast<float>(mx + std::log(s));
}

void check_heads(int NH, int NKV, const char* op) {
  TRIDENT_CHECK(NH > 0 && NKV > 0 && NH % NKV == 0,
                str(op, ": ", NKV, " key/value heads do not divide ", NH, " query heads"));
}

// The first key of query row t of sequence b: its document's start.
int first_key(const int32_t* doc_start, int b, int t, int T) {
  return doc_start ? doc_start[static_cast<size_t>(b) * T + t] : 0;
}

void attention_forward(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV, int HS,
                       const int32_t* doc_start) {
  check_heads(NH, NKV, "attention_fwd");
  cpu::check_doc_start(doc_start, B, T, "attention_fwd");
  const size_t BTC = static_cast<size_t>(B) * T * NH * HS, BT = static_cast<size_t>(B) * T;
  float* o = f32_data(out, BTC, "attention_fwd: out");                                       // (B, T, NH, HS)
  float* ls = f32_data(lse, static_cast<size_t>(B) * NH * T, "attention_fwd: lse");          // (B, NH, T)
  const float* x = f32_data(qkv, BT * (NH + 2 * NKV) * HS, "attention_fwd: qkv");            // (B, T, NH + 2 NKV, HS)
  const AttnLayout L{T, NH, NKV, HS};
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel if (cpu::worth_threads(BTC * T))
  {
    std::vector<float> p(T);  // (T) scores, then unnormalized probabilities, of one query row
#pragma omp for schedule(dynamic, 16)
    for (int idx = 0; idx < B * NH * T; ++idx) {
      const int t = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
      auto key = [&](int j) { return x + L.k(b, j, h); };
      auto value = [&](int j) { return x + L.v(b, j, h); };
      ls[idx] = attend_row(o + L.act(b, t, h), x + L.q(b, t, h), first_key(doc_start, b, t, T), t, key, value, scale,
                           HS, p.data());
    }
  }
}

void attention_backward(TensorView dqkv, TensorView dbias, TensorView dout, TensorView qkv, TensorView out,
                        TensorView lse, int B, int T, int NH, int NKV, int HS, const int32_t* doc_start) {
  check_heads(NH, NKV, "attention_bwd");
  cpu::check_doc_start(doc_start, B, T, "attention_bwd");
  const size_t BTC = static_cast<size_t>(B) * T * NH * HS;
  const size_t n_qkv = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
  const int rows = B * NH * T, group = NH / NKV;
  float* dx = f32_data(dqkv, n_qkv, "attention_bwd: dqkv");       // (B, T, NH + 2 NKV, HS)
  const float* g = f32_data(dout, BTC, "attention_bwd: dout");     // (B, T, NH, HS)
  const float* x = f32_data(qkv, n_qkv, "attention_bwd: qkv");     // (B, T, NH + 2 NKV, HS)
  const float* o = f32_data(out, BTC, "attention_bwd: out");       // (B, T, NH, HS)
  const float* ls = f32_data(lse, rows, "attention_bwd: lse");     // (B, NH, T)
  TRIDENT_CHECK(dx != x, "attention_bwd: dqkv and qkv must not alias");
  const AttnLayout L{T, NH, NKV, HS};
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));

  // D_i = dout_i . out_i = sum_j p_ij (dout_i . v_j): the softmax-backward row term.
  std::vector<float> D(rows);  // (B, NH, T)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(BTC))
  for (int idx = 0; idx < rows; ++idx) {
    const int t = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
    D[idx] = dot(g + L.act(b, t, h), o + L.act(b, t, h), HS);
  }

  // dS_ij = p_ij (dout_i . v_j - D_i). Rows own dq_i = scale sum_j dS_ij k_j (this region);
  // columns own dk_j = scale sum_i dS_ij q_i and dv_j = sum_i p_ij dout_i, summed over the query
  // heads of the key/value head's group in head order (the next one). Splitting by owner keeps
  // every sum in one thread, in a fixed order, without atomics.
#pragma omp parallel if (cpu::worth_threads(BTC * T))
  {
    std::vector<float> ds(T);  // (T) one row of dS
#pragma omp for schedule(dynamic, 16)
    for (int idx = 0; idx < rows; ++idx) {
      const int i = idx % T, h = (idx / T) % NH, b = idx / (T * NH);
      const float* q = x + L.q(b, i, h);
      const float* gi = g + L.act(b, i, h);
      const int j0 = first_key(doc_start, b, i, T);
      for (int j = j0; j <= i; ++j) {
        const float p = prob(q, x + L.k(b, j, h), ls[idx], scale, HS);
        ds[j] = p * (dot(gi, x + L.v(b, j, h), HS) - D[idx]);
      }
      float* dq = dx + L.q(b, i, h);
      std::fill(dq, dq + HS, 0.0f);
      for (int j = j0; j <= i; ++j) axpy(dq, ds[j], x + L.k(b, j, h), HS);
      for (int d = 0; d < HS; ++d) dq[d] *= scale;
    }
  }
  const int kv_rows = B * NKV * T;
#pragma omp parallel for schedule(dynamic, 16) if (cpu::worth_threads(BTC * T))
  for (int idx = 0; idx < kv_rows; ++idx) {
    const int j = idx % T, kvh = (idx / T) % NKV, b = idx / (T * NKV);
    const int h0 = kvh * group;   // the group's first query head
    const float* k = x + L.k(b, j, h0);
    const float* v = x + L.v(b, j, h0);
    float* dk = dx + L.k(b, j, h0);
    float* dv = dx + L.v(b, j, h0);
    std::fill(dk, dk + HS, 0.0f);
    std::fill(dv, dv + HS, 0.0f);
    for (int h = h0; h < h0 + group; ++h) {
      const int row0 = (b * NH + h) * T;  // lse/D index of (b, h, i = 0)
      // The queries of key j's document: doc_start is nondecreasing, so they end at the first
      // query of a later document.
      for (int i = j; i < T && first_key(doc_start, b, i, T) <= j; ++i) {
        const float* q = x + L.q(b, i, h);
        const float* gi = g + L.act(b, i, h);
        const float p = prob(q, k, ls[row0 + i], scale, HS);
        const float ds = p * (dot(gi, v, HS) - D[row0 + i]);
        axpy(dv, p, gi, HS);
        axpy(dk, ds, q, HS);
      }
    }
    for (int d = 0; d < HS; ++d) dk[d] *= scale;
  }
  const int cols = (NH + 2 * NKV) * HS, n = B * T;
  float* db = cpu::f32_optional(dbias, cols, "attention_bwd: dbias");  // (NH + 2 NKV, HS)
  if (!db) return;
#pragma omp parallel for schedule(static) if (cpu::worth_threads(static_cast<size_t>(n) * cols))
  for (int c = 0; c < cols; ++c) {
    double s = 0;
    for (int r = 0; r < n; ++r) s += dx[static_cast<size_t>(r) * cols + c];
    db[c] += static_cast<float>(s);
  }
}

}  // namespace

void CpuBackend::attention_fwd(TensorView out, TensorView lse, TensorView qkv, int B, int T, int NH, int NKV,
                               int HS, const int32_t* doc_start) {
  attention_forward(out, lse, qkv, B, T, NH, NKV, HS, doc_start);
}

void CpuBackend::attention_bwd(TensorView dqkv, TensorView dbias, TensorView dout, TensorView qkv, TensorView out,
                               TensorView lse, int B, int T, int NH, int NKV, int HS, const int32_t* doc_start,
                               TensorView rope) {
  TRIDENT_CHECK(rope.empty() || dbias.empty(), "attention_bwd: rope with dbias (a bias added before the rotation)");
  attention_backward(dqkv, dbias, dout, qkv, out, lse, B, T, NH, NKV, HS, doc_start);
  if (!rope.empty()) rope_bwd(dqkv, rope, B, T, NH, NKV, HS, 0, doc_start);
}

// attention_fwd's row arithmetic (attend_row) with keys and values read from the cache:
// decoding reproduces the full forward bit for bit.
void CpuBackend::attention_decode(TensorView out, TensorView k_cache, TensorView v_cache, TensorView qkv,
                                  const int32_t* rows, int N, int S, int Tmax, int NH, int NKV, int HS) {
  check_heads(NH, NKV, "attention_decode");
  TRIDENT_CHECK(rows != nullptr || N == 0, "attention_decode: rows not given");
  for (int i = 0; i < N; ++i)
    TRIDENT_CHECK(rows[2 * i] == -1 || (rows[2 * i] >= 0 && rows[2 * i] < S && rows[2 * i + 1] >= 0 && rows[2 * i + 1] < Tmax),
                  str("attention_decode: token ", i, " at slot ", rows[2 * i], ", position ", rows[2 * i + 1],
                      " outside the cache of ", S, " x ", Tmax));
  const size_t NC = static_cast<size_t>(N) * NH * HS, cache = static_cast<size_t>(S) * NKV * Tmax * HS;
  const int group = NH / NKV;
  float* o = f32_data(out, NC, "attention_decode: out");               // (N, NH, HS)
  float* kc = f32_data(k_cache, cache, "attention_decode: k_cache");   // (S, NKV, Tmax, HS)
  float* vc = f32_data(v_cache, cache, "attention_decode: v_cache");   // (S, NKV, Tmax, HS)
  const float* x = f32_data(qkv, static_cast<size_t>(N) * (NH + 2 * NKV) * HS,
                            "attention_decode: qkv");                  // (N, NH + 2 NKV, HS)
  const AttnLayout L{N, NH, NKV, HS};   // the N tokens as one sequence: row i of qkv and out
  // Cache row of key/value head kvh of slot s.
  auto at = [&](int s, int kvh, int t) { return ((static_cast<size_t>(s) * NKV + kvh) * Tmax + t) * HS; };
  for (int i = 0; i < N; ++i)
    for (int kvh = 0; kvh < NKV && rows[2 * i] >= 0; ++kvh) {
      std::copy_n(x + L.k(0, i, kvh * group), HS, kc + at(rows[2 * i], kvh, rows[2 * i + 1]));
      std::copy_n(x + L.v(0, i, kvh * group), HS, vc + at(rows[2 * i], kvh, rows[2 * i + 1]));
    }
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  std::vector<float> p(Tmax);
  for (int i = 0; i < N; ++i)
    for (int h = 0; h < NH; ++h) {
      const int s = rows[2 * i];
      if (s < 0) {   // padding
        std::fill_n(o + L.act(0, i, h), HS, 0.0f);
        continue;
      }
      auto key = [&](int j) { return kc + at(s, h / group, j); };
      auto value = [&](int j) { return vc + at(s, h / group, j); };
      attend_row(o + L.act(0, i, h), x + L.q(0, i, h), 0, rows[2 * i + 1], key, value, scale, HS, p.data());
    }
}

}  // namespace trident
