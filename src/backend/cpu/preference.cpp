// CpuBackend sequence-level losses: per-sequence sums of token losses, per-row gradient weights
// and the DPO (sigmoid or IPO) pair loss, in double where a sum or a log-sigmoid decides the last bits.
#include <algorithm>
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;
using cpu::f32_optional;

namespace {

double log_sigmoid(double z) { return std::min(z, 0.0) - std::log1p(std::exp(-std::abs(z))); }
double sigmoid(double z) { return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z)); }

}  // namespace

void CpuBackend::segment_sum(TensorView out, TensorView in, int S, int len) {
  float* o = f32_data(out, S, "segment_sum: out");                                   // (S)
  const float* x = f32_data(in, static_cast<size_t>(S) * len, "segment_sum: in");   // (S, len)
  for (int s = 0; s < S; ++s) {
    double acc = 0;
    for (int i = 0; i < len; ++i) acc += x[static_cast<size_t>(s) * len + i];
    o[s] = static_cast<float>(acc);
  }
}

void CpuBackend::scale_rows(TensorView x, TensorView w, int rows, int cols) {
  float* v = f32_data(x, static_cast<size_t>(rows) * cols, "scale_rows: x");   // (rows, cols)
  const float* s = f32_data(w, rows, "scale_rows: w");                          // (rows)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(x.numel))
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) v[static_cast<size_t>(r) * cols + c] *= s[r];
}

void CpuBackend::dpo_loss(TensorView acc, TensorView row_weights, TensorView policy_nll, TensorView ref_nll,
                          const int32_t* targets, int pairs, int T, const DpoArgs& a) {
  const size_t S = 2 * static_cast<size_t>(pairs);
  float* out = f32_data(acc, 5, "dpo_loss: acc");
  float* w = f32_optional(row_weights, S * T, "dpo_loss: row_weights");   // (2P, T)
  const float* pol = f32_data(policy_nll, S, "dpo_loss: policy_nll");     // (2P)
  const float* ref = f32_data(ref_nll, S, "dpo_loss: ref_nll");           // (2P)
  const bool ipo = a.loss == DpoLoss::Ipo;
  TRIDENT_CHECK(!ipo || targets != nullptr, "dpo_loss: IPO needs the targets");
  // Sequence s's trained targets, at least 1 (IPO's per-token log-ratios).
  auto trained = [&](size_t s) {
    const int32_t* t = targets + s * T;
    return static_cast<double>(std::max<std::ptrdiff_t>(1, std::count_if(t, t + T, [](int32_t id) { return id >= 0; })));
  };
  const double eps = a.label_smoothing;
  double sums[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < pairs; ++i) {
    const double chosen = a.beta * (static_cast<double>(ref[2 * i]) - pol[2 * i]);
    const double rejected = a.beta * (static_cast<double>(ref[2 * i + 1]) - pol[2 * i + 1]);
    const double z = chosen - rejected;
    // d(scale * loss)/d(policy_nll) of the chosen (dc) and the rejected (dr) sequence.
    double dc, dr;
    if (ipo) {
      const double nc = trained(2 * i), nr = trained(2 * i + 1);
      const double h = (static_cast<double>(ref[2 * i]) - pol[2 * i]) / nc -
                       (static_cast<double>(ref[2 * i + 1]) - pol[2 * i + 1]) / nr;
      const double d = h - 1 / (2.0 * a.beta);
      sums[0] += d * d;
      dc = a.scale * (-2 * d / nc);
      dr = a.scale * (2 * d / nr);
    } else {
      sums[0] += -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
      // dloss/dz, and dz/d(policy_nll) = -beta (chosen), +beta (rejected).
      const double dz = -(1 - eps) * sigmoid(-z) + eps * sigmoid(z);
      dc = -a.scale * a.beta * dz;
      dr = a.scale * a.beta * dz;
    }
    sums[1] += z > 0;
    sums[2] += z;
    sums[3] += chosen;
    sums[4] += rejected;
    if (!w) continue;
    const float wc = static_cast<float>(dc), wr = static_cast<float>(dr);
    std::fill(w + 2 * i * static_cast<size_t>(T), w + (2 * i + 1) * static_cast<size_t>(T), wc);
    std::fill(w + (2 * i + 1) * static_cast<size_t>(T), w + (2 * i + 2) * static_cast<size_t>(T), wr);
  }
  for (int k = 0; k < 5; ++k) out[k] += static_cast<float>(sums[k]);
}

}  // namespace trident
