// CpuBackend elementwise ops: residual add, GELU (tanh approximation) and SwiGLU forward/backward.
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// 0.5 * (1 + tanh(u)) written as the identical sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
// glibc's expf is several times cheaper than tanhf, and 1 + tanh(u) never cancels for x << 0.
float gelu_gate(float x) {
  const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 1.0f / (1.0f + std::exp(-2.0f * u));
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void CpuBackend::add(TensorView out, TensorView a, TensorView b) {
  const size_t n = out.numel;
  float* o = f32_data(out, n, "add: out");
  const float* x = f32_data(a, n, "add: a");
  const float* y = f32_data(b, n, "add: b");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (long i = 0; i < static_cast<long>(n); ++i) o[i] = x[i] + y[i];
}

void CpuBackend::sum_partials(TensorView out, const std::vector<TensorView>& parts) {
  TRIDENT_CHECK(!parts.empty() && parts.size() <= static_cast<size_t>(kMaxPartials),
                str("sum_partials: ", parts.size(), " partials (1 to ", kMaxPartials, ")"));
  const size_t n = out.numel;
  std::vector<const float*> p;
  for (const TensorView& v : parts) p.push_back(f32_data(v, n, "sum_partials: a partial"));
  float* o = f32_data(out, n, "sum_partials: out");
  const long m = static_cast<long>(p.size());
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (long i = 0; i < static_cast<long>(n); ++i) {
    float v = p[0][i];
    for (long j = 1; j < m; ++j) v += p[j][i];
    o[i] = v;
  }
}

void CpuBackend::gelu_fwd(TensorView out, TensorView in) {
  const size_t n = out.numel;
  float* o = f32_data(out, n, "gelu_fwd: out");
  const float* x = f32_data(in, n, "gelu_fwd: in");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (long i = 0; i < static_cast<long>(n); ++i) {
    o[i] = x[i] * gelu_gate(x[i]);
  }
}

void CpuBackend::gelu_bwd(TensorView din, TensorView dout, TensorView pre) {
  const size_t n = din.numel;
  float* d = f32_data(din, n, "gelu_bwd: din");
  const float* g = f32_data(dout, n, "gelu_bwd: dout");
  const float* x = f32_data(pre, n, "gelu_bwd: pre");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (long i = 0; i < static_cast<long>(n); ++i) {
    // d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx
    const float v = x[i], s = gelu_gate(v);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    d[i] = g[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

// Rows of in are [gate (F) | up (F)]; element j of a row pairs gate j with up j.
void CpuBackend::swiglu_fwd(TensorView out, TensorView in, int N, int F) {
  const size_t NF = static_cast<size_t>(N) * F;
  float* o = f32_data(out, NF, "swiglu_fwd: out");           // (N, F)
  const float* x = f32_data(in, 2 * NF, "swiglu_fwd: in");   // (N, 2F)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NF))
  for (int n = 0; n < N; ++n) {
    const float* gate = x + 2 * static_cast<size_t>(n) * F;
    const float* up = gate + F;
    float* orow = o + static_cast<size_t>(n) * F;
    for (int j = 0; j < F; ++j) orow[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
}

void CpuBackend::swiglu_bwd(TensorView din, TensorView dout, TensorView in, int N, int F) {
  const size_t NF = static_cast<size_t>(N) * F;
  float* d = f32_data(din, 2 * NF, "swiglu_bwd: din");       // (N, 2F)
  const float* g = f32_data(dout, NF, "swiglu_bwd: dout");   // (N, F)
  const float* x = f32_data(in, 2 * NF, "swiglu_bwd: in");   // (N, 2F)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NF))
  for (int n = 0; n < N; ++n) {
    const size_t row = 2 * static_cast<size_t>(n) * F;
    const float* gr = g + static_cast<size_t>(n) * F;
    for (int j = 0; j < F; ++j) {
      // Both inputs of the pair are read before either gradient is written: din may alias in.
      const float gate = x[row + j], up = x[row + F + j], s = sigmoid(gate);
      d[row + j] = gr[j] * up * s * (1.0f + gate * (1.0f - s));   // silu'(gate) = s (1 + gate (1 - s))
      d[row + F + j] = gr[j] * gate * s;
    }
  }
}

}  // namespace trident
