// CpuBackend vocab-parallel cross-entropy: each rank sees (N, v_local) logits; the model
// all-reduces rowmax (max) and stats (sum) over TP between these calls.
#include <algorithm>
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {

void check_columns(int v_local, int v_valid, const char* op) {
  TRIDENT_CHECK(v_valid >= 0 && v_valid <= v_local, str(op, ": v_valid ", v_valid, " outside [0, ", v_local, "]"));
}

// Column of the target in this shard, or -1 when another shard holds it. A target in a padding
// column is no vocabulary entry: it counts nowhere, so stats and gradient stay consistent.
int local_target(int32_t target, int vocab_start, int v_valid) {
  const int j = target - vocab_start;
  return j >= 0 && j < v_valid ? j : -1;
}

}  // namespace

void CpuBackend::xent_max(TensorView rowmax, TensorView logits, int N, int v_local, int v_valid) {
  check_columns(v_local, v_valid, "xent_max");
  const size_t NV = static_cast<size_t>(N) * v_local;
  float* mx = f32_data(rowmax, N, "xent_max: rowmax");        // (N)
  const float* z = f32_data(logits, NV, "xent_max: logits");  // (N, v_local)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NV))
  for (int n = 0; n < N; ++n) {
    const float* row = z + static_cast<size_t>(n) * v_local;
    float m = -INFINITY;
    for (int j = 0; j < v_valid; ++j) m = std::max(m, row[j]);
    mx[n] = m;
  }
}

void CpuBackend::xent_stats(TensorView stats, TensorView logits, TensorView rowmax, const int32_t* targets,
                            int N, int v_local, int v_valid, int vocab_start) {
  check_columns(v_local, v_valid, "xent_stats");
  const size_t NV = static_cast<size_t>(N) * v_local;
  float* st = f32_data(stats, static_cast<size_t>(N) * 2, "xent_stats: stats");  // (N, 2)
  const float* z = f32_data(logits, NV, "xent_stats: logits");                   // (N, v_local)
  const float* mx = f32_data(rowmax, N, "xent_stats: rowmax");                   // (N)
  TRIDENT_CHECK(targets != nullptr, "xent_stats: targets not given");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NV))
  for (int n = 0; n < N; ++n) {
    const float* row = z + static_cast<size_t>(n) * v_local;
    // An empty shard sums nothing, so a -inf rowmax never meets a -inf logit (no NaN).
    double s = 0;
    for (int j = 0; j < v_valid; ++j) s += std::exp(row[j] - mx[n]);
    const int tj = local_target(targets[n], vocab_start, v_valid);
    st[2 * n] = static_cast<float>(s);
    st[2 * n + 1] = tj >= 0 ? row[tj] : 0.0f;
  }
}

void CpuBackend::xent_entropy_sums(TensorView entropy_sums, TensorView logits, TensorView rowmax, int N, int v_local,
                                   int v_valid) {
  check_columns(v_local, v_valid, "xent_entropy_sums");
  const size_t NV = static_cast<size_t>(N) * v_local;
  float* es = f32_data(entropy_sums, static_cast<size_t>(N) * 2, "xent_entropy_sums: entropy_sums");  // (N, 2)
  const float* z = f32_data(logits, NV, "xent_entropy_sums: logits");                                  // (N, v_local)
  const float* mx = f32_data(rowmax, N, "xent_entropy_sums: rowmax");                                  // (N)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NV))
  for (int n = 0; n < N; ++n) {
    const float* row = z + static_cast<size_t>(n) * v_local;
    double s0 = 0, s1 = 0;
    for (int j = 0; j < v_valid; ++j) {
      const double d = static_cast<double>(row[j]) - mx[n], e = std::exp(d);
      s0 += e;
      s1 += e * d;
    }
    es[2 * n] = static_cast<float>(s0);
    es[2 * n + 1] = static_cast<float>(s1);
  }
}

void CpuBackend::xent_bwd(TensorView losses, TensorView logits, TensorView rowmax, TensorView stats,
                          const int32_t* targets, int N, int v_local, int v_valid, int vocab_start,
                          float dloss) {
  check_columns(v_local, v_valid, "xent_bwd");
  const size_t NV = static_cast<size_t>(N) * v_local;
  float* loss = f32_data(losses, N, "xent_bwd: losses");                             // (N)
  float* z = f32_data(logits, NV, "xent_bwd: logits");                               // (N, v_local)
  const float* mx = f32_data(rowmax, N, "xent_bwd: rowmax");                         // (N)
  const float* st = f32_data(stats, static_cast<size_t>(N) * 2, "xent_bwd: stats");  // (N, 2)
  TRIDENT_CHECK(targets != nullptr, "xent_bwd: targets not given");
#pragma omp parallel for schedule(static) if (cpu::worth_threads(NV))
  for (int n = 0; n < N; ++n) {
    float* row = z + static_cast<size_t>(n) * v_local;
    if (targets[n] < 0) {   // an ignored target (kIgnoredTarget): no loss, no gradient
      loss[n] = 0.0f;
      std::fill(row, row + v_local, 0.0f);
      continue;
    }
    loss[n] = static_cast<float>(std::log(static_cast<double>(st[2 * n])) + mx[n] - st[2 * n + 1]);
    const float inv_sum = 1.0f / st[2 * n];
    const int tj = local_target(targets[n], vocab_start, v_valid);
    for (int j = 0; j < v_valid; ++j) {
      const float p = std::exp(row[j] - mx[n]) * inv_sum;
      row[j] = dloss * (j == tj ? p - 1.0f : p);
    }
    std::fill(row + v_valid, row + v_local, 0.0f);
  }
}

}  // namespace trident
