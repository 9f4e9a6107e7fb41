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

void CpuBackend::sum_squares_multi(TensorView acc, TensorView x, TensorView pieces) {
  float* a = f32_data(acc, 1, "sum_squares_multi: acc");
  const MultiTensorEntry* table = pieces_in(pieces, "sum_squares_multi");
  const size_t count = pieces.numel / kPieceWords;
  double total = 0;
  for (size_t i = 0; i < count; ++i) {
    const float* v = f32_data(x.slice(table[i].flat, table[i].n), table[i].n, "sum_squares_multi: x");
    total += chunked_sum(v, static_cast<long>(table[i].n), [](double e) { return e * e; });
  }
  *a += static_cast<float>(total);
}

void CpuBackend::adamw_multi(TensorView param, TensorView master, TensorView m, TensorView v, TensorView grad,
                             TensorView pieces, const AdamWArgs& a, TensorView norm_sq, float clip) {
  const MultiTensorEntry* table = pieces_in(pieces, "adamw_multi");
  const size_t count = pieces.numel / kPieceWords;
  AdamWArgs args = a;
  if (!norm_sq.empty()) args.grad_scale *= clip_factor(*f32_data(norm_sq, 1, "adamw_multi: norm_sq"), clip);
  for (size_t i = 0; i < count; ++i) {
    const MultiTensorEntry& p = table[i];
    args.weight_decay = p.decay ? a.weight_decay : 0.0f;
    adamw(param.empty() ? TensorView{} : param.slice(p.flat, p.n), master.slice(p.state, p.n), m.slice(p.state, p.n),
          v.slice(p.state, p.n), grad.slice(p.flat, p.n), args);
  }
}

}  // namespace trident
