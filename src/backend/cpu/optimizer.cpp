// CpuBackend ops of the optimizer step: gradient-norm reductions, scaling and AdamW.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend_impl.hpp"
#include "trident/backend/adamw_math.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;
using cpu::f32_optional;

namespace {

// Reductions split x into fixed chunks (not one per thread) and add the chunk sums in order,
// so the result does not depend on the thread count.
constexpr long kReduceChunk = 1 << 14;

template <class Term>
double chunked_sum(const float* x, long n, Term term) {
  const long n_chunks = (n + kReduceChunk - 1) / kReduceChunk;
  std::vector<double> partial(n_chunks);
#pragma omp parallel for schedule(static) if (cpu::worth_threads(static_cast<size_t>(n)))
  for (long c = 0; c < n_chunks; ++c) {
    const long end = std::min(n, (c + 1) * kReduceChunk);
    double s = 0;
    for (long i = c * kReduceChunk; i < end; ++i) s += term(static_cast<double>(x[i]));
    partial[c] = s;
  }
  double s = 0;
  for (double p : partial) s += p;
  return s;
}

// A piece's gradient as the multi-tensor ops read it: x at the piece's flat offset, or, where
// peer is given, x + peer at its state offset (the sum a reduce-scatter would have made, rounded
// to f32 alike) in `sum`.
TensorView piece_gradient(TensorView x, TensorView peer, const MultiTensorEntry& p, std::vector<float>& sum,
                          const char* op) {
  const TensorView g = x.slice(p.flat, p.n);
  if (peer.empty()) return g;
  const float* mine = f32_data(g, g.numel, op);
  const float* other = f32_data(peer.slice(p.state, p.n), g.numel, op);
  sum.resize(g.numel);
  for (size_t k = 0; k < g.numel; ++k) sum[k] = mine[k] + other[k];
  return TensorView(sum.data(), DType::F32, g.numel);
}

}  // namespace

void CpuBackend::sum_squares(TensorView acc, TensorView x) {
  float* a = f32_data(acc, 1, "sum_squares: acc");
  const float* v = f32_data(x, x.numel, "sum_squares: x");
  *a += static_cast<float>(chunked_sum(v, static_cast<long>(x.numel), [](double e) { return e * e; }));
}

void CpuBackend::sum(TensorView acc, TensorView x) {
  float* a = f32_data(acc, 1, "sum: acc");
  const float* v = f32_data(x, x.numel, "sum: x");
  *a += static_cast<float>(chunked_sum(v, static_cast<long>(x.numel), [](double e) { return e; }));
}

void CpuBackend::scale(TensorView x, float s) {
  float* v = f32_data(x, x.numel, "scale: x");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(x.numel))
  for (long i = 0; i < static_cast<long>(x.numel); ++i) v[i] *= s;
}

void CpuBackend::accumulate(TensorView acc, TensorView x) {
  float* a = f32_data(acc, acc.numel, "accumulate: acc");
  const float* v = f32_data(x, acc.numel, "accumulate: x");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(acc.numel))
  for (long i = 0; i < static_cast<long>(acc.numel); ++i) a[i] += v[i];
}

void CpuBackend::adamw(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                       const AdamWArgs& a) {
  const size_t n = master.numel;
  float* w = f32_data(master, n, "adamw: master");
  float* m1 = f32_data(m, n, "adamw: m");
  float* m2 = f32_data(v, n, "adamw: v");
  const float* g = f32_data(grad, n, "adamw: grad");
  float* p = f32_optional(param, n, "adamw: param");
  const AdamWTerms k(a);
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (long i = 0; i < static_cast<long>(n); ++i) {
    adamw_element(w[i], m1[i], m2[i], g[i], a, k);
    if (p) p[i] = w[i];
  }
}

void CpuBackend::sum_squares_multi(TensorView acc, TensorView x, TensorView pieces, TensorView peer) {
  float* a = f32_data(acc, 1, "sum_squares_multi: acc");
  const MultiTensorEntry* table = pieces_in(pieces, "sum_squares_multi");
  const size_t count = pieces.numel / kPieceWords;
  double total = 0;
  std::vector<float> sum;
  for (size_t i = 0; i < count; ++i) {
    const TensorView piece = piece_gradient(x, peer, table[i], sum, "sum_squares_multi: x");
    const float* v = f32_data(piece, piece.numel, "sum_squares_multi: x");
    total += chunked_sum(v, static_cast<long>(piece.numel), [](double e) { return e * e; });
  }
  *a += static_cast<float>(total);
}

void CpuBackend::adamw_multi(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                             TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip, TensorView peer) {
  const MultiTensorEntry* table = pieces_in(pieces, "adamw_multi");
  const size_t count = pieces.numel / kPieceWords;
  AdamWArgs args = a;
  if (!norm_sq.empty()) args.grad_scale *= clip_factor(*f32_data(norm_sq, 1, "adamw_multi: norm_sq"), clip);
  std::vector<float> sum;
  for (size_t i = 0; i < count; ++i) {
    const MultiTensorEntry& p = table[i];
    args.weight_decay = p.decay ? a.weight_decay : 0.0f;
    adamw(param.empty() ? TensorView{} : param.slice(p.flat, p.n), master.slice(p.state, p.n), m.slice(p.state, p.n),
          v.slice(p.state, p.n), piece_gradient(grad, peer, p, sum, "adamw_multi: grad"), args);
  }
}

}  // namespace trident
