// CpuBackend reward head: each sequence's score at its last token and the pairwise
// Bradley-Terry loss -log sigmoid(score_chosen - score_rejected) (see backend.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

namespace {

// The scored position of a sequence (B, T) row of targets: the token after the last trained
// target, kept inside the T inputs; -1 when no target is trained.
int scored_position(const int32_t* targets, int T) {
  for (int t = T - 1; t >= 0; --t)
    if (targets[t] >= 0) return std::min(t + 1, T - 1);
  return -1;
}

void check_pairs(int B, const char* op) {
  TRIDENT_CHECK(B > 0 && B % 2 == 0, str(op, ": B = ", B, " sequences do not form pairs"));
}

}  // namespace

void CpuBackend::reward_fwd(TensorView scores, TensorView dscores, TensorView stats, TensorView lnf, TensorView w,
                            const int32_t* targets, int B, int T, int C, float dloss) {
  check_pairs(B, "reward_fwd");
  float* s = f32_data(scores, B, "reward_fwd: scores");                                           // (B)
  float* ds = cpu::f32_optional(dscores, B, "reward_fwd: dscores");                               // (B)
  float* acc = f32_data(stats, 3, "reward_fwd: stats");                                           // (3)
  const float* x = f32_data(lnf, static_cast<size_t>(B) * T * C, "reward_fwd: lnf");             // (B, T, C)
  const float* wv = f32_data(w, C, "reward_fwd: w");                                              // (C)
  TRIDENT_CHECK(targets != nullptr, "reward_fwd: targets not given");
  std::vector<int> pos(B);
  for (int b = 0; b < B; ++b) {
    pos[b] = scored_position(targets + static_cast<size_t>(b) * T, T);
    s[b] = pos[b] < 0 ? 0.0f : cpu::dot(x + (static_cast<size_t>(b) * T + pos[b]) * C, wv, C);
  }
  for (int i = 0; i < B / 2; ++i) {
    const int c = 2 * i, r = 2 * i + 1;
    const bool scored = pos[c] >= 0 && pos[r] >= 0;
    if (ds) ds[c] = ds[r] = 0.0f;
    if (!scored) continue;
    const double d = static_cast<double>(s[c]) - s[r];
    // -log sigmoid(d) = log(1 + exp(-d)), written to stay finite for large |d|.
    const double loss = d > 0 ? std::log1p(std::exp(-d)) : -d + std::log1p(std::exp(d));
    acc[0] += static_cast<float>(loss);
    acc[1] += d > 0 ? 1.0f : 0.0f;
    acc[2] += static_cast<float>(d);
    if (!ds) continue;
    const double g = -1.0 / (1.0 + std::exp(d));   // d(-log sigmoid(d))/dd = -sigmoid(-d)
    ds[c] = static_cast<float>(dloss * g);
    ds[r] = static_cast<float>(-dloss * g);
  }
}

void CpuBackend::reward_bwd(TensorView dlnf, TensorView dw, TensorView dscores, TensorView lnf, TensorView w,
                            const int32_t* targets, int B, int T, int C) {
  check_pairs(B, "reward_bwd");
  const size_t n = static_cast<size_t>(B) * T * C;
  float* dx = f32_data(dlnf, n, "reward_bwd: dlnf");                   // (B, T, C)
  float* dwv = f32_data(dw, C, "reward_bwd: dw");                      // (C)
  const float* ds = f32_data(dscores, B, "reward_bwd: dscores");       // (B)
  const float* x = f32_data(lnf, n, "reward_bwd: lnf");                // (B, T, C)
  const float* wv = f32_data(w, C, "reward_bwd: w");                   // (C)
  TRIDENT_CHECK(targets != nullptr, "reward_bwd: targets not given");
  std::fill(dx, dx + n, 0.0f);
  for (int b = 0; b < B; ++b) {
    const int p = scored_position(targets + static_cast<size_t>(b) * T, T);
    if (p < 0) continue;
    const size_t row = (static_cast<size_t>(b) * T + p) * C;
    for (int c = 0; c < C; ++c) {
      dx[row + c] = ds[b] * wv[c];
      dwv[c] += ds[b] * x[row + c];
    }
  }
}

}  // namespace trident
