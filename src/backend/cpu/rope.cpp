// CpuBackend rotary position embedding (rotate_half convention), and rope_table(), the host-built
// table every backend's rope reads.
#include <cmath>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;

void rope_table(float* cos_sin, int T, int HS, float theta) {
  TRIDENT_CHECK(HS > 0 && HS % 2 == 0, str("rope_table: head size ", HS, " is not even"));
  const int half = HS / 2;
  for (int i = 0; i < half; ++i) {
    // Hugging Face: inv_freq = 1.0 / (theta ** (arange(0, HS, 2).float() / HS)), all fp32. Neither
    // pow is correctly rounded: for HS 8..256 and theta 1e4..1e6, 6 of 1,296 values differ from
    // PyTorch's by one ulp.
    const float inv_freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(HS));
    for (int t = 0; t < T; ++t) {
      const float angle = static_cast<float>(t) * inv_freq;   // the fp32 product of its position matmul
      cos_sin[static_cast<size_t>(t) * HS + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      cos_sin[static_cast<size_t>(t) * HS + half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

namespace {

// Rotates the q and k heads of x (B, T, NH + 2 NKV, HS) in place by +angle (sign 1, the forward:
// x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin for the halves x1, x2) or by -angle (sign -1, the
// backward: the transpose of the rotation).
void rotate(TensorView x_view, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
            const int32_t* doc_start, float sign, const char* op) {
  check_rope_args(rope, T, NH, NKV, HS, pos0, op);
  cpu::check_doc_start(doc_start, B, T, op);
  const int H3 = NH + 2 * NKV, half = HS / 2;
  const size_t n = static_cast<size_t>(B) * T * H3 * HS;
  float* x = f32_data(x_view, n, str(op, ": qkv").c_str());                                  // (B, T, NH + 2 NKV, HS)
  const float* table = f32_data(rope, rope.numel, str(op, ": rope").c_str()) + static_cast<size_t>(pos0) * HS;  // (T, HS)
#pragma omp parallel for schedule(static) if (cpu::worth_threads(n))
  for (int bt = 0; bt < B * T; ++bt) {
    const float* cs = table + static_cast<size_t>(cpu::doc_position(doc_start, bt, T)) * HS;
    for (int h = 0; h < NH + NKV; ++h) {
      float* head = x + (static_cast<size_t>(bt) * H3 + h) * HS;
      for (int d = 0; d < half; ++d) {
        const float c = cs[d], s = sign * cs[half + d], x1 = head[d], x2 = head[half + d];
        head[d] = x1 * c - x2 * s;
        head[half + d] = x2 * c + x1 * s;
      }
    }
  }
}

}  // namespace

void CpuBackend::rope_fwd(TensorView qkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                          const int32_t* doc_start) {
  rotate(qkv, rope, B, T, NH, NKV, HS, pos0, doc_start, 1.0f, "rope_fwd");
}

void CpuBackend::rope_bwd(TensorView dqkv, TensorView rope, int B, int T, int NH, int NKV, int HS, int pos0,
                          const int32_t* doc_start) {
  rotate(dqkv, rope, B, T, NH, NKV, HS, pos0, doc_start, -1.0f, "rope_bwd");
}

}  // namespace trident
