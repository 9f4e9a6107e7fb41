// CpuBackend GEMMs. Every product is out[r][c] = dot(a[r,:], b[c,:]) with both rows contiguous;
// the backward pass transposes its operands into scratch so that one kernel serves all three.
#include <algorithm>
#include <memory>

#include "cpu_backend_impl.hpp"
#include "cpu_common.hpp"

namespace trident {

using cpu::f32_data;
using cpu::f32_optional;
using cpu::kLanes;

namespace {

constexpr int kTile = 4;       // a kTile x kTile register tile reuses every loaded row kTile times
constexpr int kBlock = 64;     // rows x columns of one task: its two panels stay in cache
constexpr int kTransposeBlock = 32;

// out (R, C) = [out +] a (R, K) . b (C, K)^T [+ bias (C)].
struct Gemm {
  float* out;
  const float* a;
  const float* b;
  const float* bias;  // nullptr: none
  int R, K, C;
  bool accumulate;    // out += (parameter gradients) instead of out =
};

// One TR x TC tile. Each output uses the lane split of cpu::dot, so its bits do not depend on
// which tile shape (full or edge) computed it.
template <int TR, int TC>
void gemm_tile(const Gemm& g, int r0, int c0) {
  const int K = g.K;
  const float* a = g.a + static_cast<size_t>(r0) * K;
  const float* b = g.b + static_cast<size_t>(c0) * K;
  float acc[TR][TC][kLanes] = {};
  int k = 0;
  for (; k + kLanes <= K; k += kLanes)
    for (int r = 0; r < TR; ++r)
      for (int c = 0; c < TC; ++c)
        for (int l = 0; l < kLanes; ++l) acc[r][c][l] += a[r * K + k + l] * b[c * K + k + l];
  for (int l = 0; k < K; ++k, ++l)
    for (int r = 0; r < TR; ++r)
      for (int c = 0; c < TC; ++c) acc[r][c][l] += a[r * K + k] * b[c * K + k];
  for (int r = 0; r < TR; ++r) {
    float* o = g.out + static_cast<size_t>(r0 + r) * g.C + c0;
    for (int c = 0; c < TC; ++c) {
      const float base = g.accumulate ? o[c] : g.bias ? g.bias[c0 + c] : 0.0f;
      o[c] = base + cpu::reduce_lanes(acc[r][c]);
    }
  }
}

// Rows [r0, r1) x columns [c0, c1) in full tiles, then the edges.
void gemm_block(const Gemm& g, int r0, int r1, int c0, int c1) {
  int r = r0;
  for (; r + kTile <= r1; r += kTile) {
    int c = c0;
    for (; c + kTile <= c1; c += kTile) gemm_tile<kTile, kTile>(g, r, c);
    for (; c < c1; ++c) gemm_tile<kTile, 1>(g, r, c);
  }
  for (; r < r1; ++r) {
    int c = c0;
    for (; c + kTile <= c1; c += kTile) gemm_tile<1, kTile>(g, r, c);
    for (; c < c1; ++c) gemm_tile<1, 1>(g, r, c);
  }
}

void gemm(const Gemm& g) {
  const size_t work = static_cast<size_t>(g.R) * g.C * g.K;
  const int row_blocks = (g.R + kBlock - 1) / kBlock, col_blocks = (g.C + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) schedule(static) if (cpu::worth_threads(work))
  for (int i = 0; i < row_blocks; ++i)
    for (int j = 0; j < col_blocks; ++j)
      gemm_block(g, i * kBlock, std::min(g.R, (i + 1) * kBlock), j * kBlock, std::min(g.C, (j + 1) * kBlock));
}

// (rows, cols) -> a new (cols, rows) scratch copy.
std::unique_ptr<float[]> transposed(const float* src, int rows, int cols) {
  std::unique_ptr<float[]> dst(new float[static_cast<size_t>(rows) * cols]);
  float* d = dst.get();
#pragma omp parallel for schedule(static) if (cpu::worth_threads(static_cast<size_t>(rows) * cols))
  for (int c0 = 0; c0 < cols; c0 += kTransposeBlock)
    for (int r0 = 0; r0 < rows; r0 += kTransposeBlock)
      for (int c = c0; c < std::min(cols, c0 + kTransposeBlock); ++c)
        for (int r = r0; r < std::min(rows, r0 + kTransposeBlock); ++r)
          d[static_cast<size_t>(c) * rows + r] = src[static_cast<size_t>(r) * cols + c];
  return dst;
}

}  // namespace

void CpuBackend::matmul_fwd(TensorView out, TensorView in, TensorView w, TensorView bias,
                            int N, int K, int M) {
  float* o = f32_data(out, static_cast<size_t>(N) * M, "matmul_fwd: out");      // (N, M)
  const float* x = f32_data(in, static_cast<size_t>(N) * K, "matmul_fwd: in");  // (N, K)
  const float* wt = f32_data(w, static_cast<size_t>(M) * K, "matmul_fwd: w");   // (M, K)
  const float* bs = f32_optional(bias, M, "matmul_fwd: bias");                  // (M)
  TRIDENT_CHECK(o != x, "matmul_fwd: out and in must not alias");
  gemm({o, x, wt, bs, N, K, M, false});
}

void CpuBackend::matmul_bwd(TensorView din, TensorView dw, TensorView dbias, TensorView dout,
                            TensorView in, TensorView w, int N, int K, int M) {
  float* dx = f32_optional(din, static_cast<size_t>(N) * K, "matmul_bwd: din");     // (N, K)
  float* dwt = f32_optional(dw, static_cast<size_t>(M) * K, "matmul_bwd: dw");      // (M, K)
  float* dbs = f32_optional(dbias, M, "matmul_bwd: dbias");                         // (M)
  const float* g = f32_data(dout, static_cast<size_t>(N) * M, "matmul_bwd: dout");  // (N, M)
  const float* x = f32_data(in, static_cast<size_t>(N) * K, "matmul_bwd: in");      // (N, K)
  const float* wt = f32_data(w, static_cast<size_t>(M) * K, "matmul_bwd: w");       // (M, K)

  if (dx) {
    auto w_t = transposed(wt, M, K);  // (K, M)
    gemm({dx, g, w_t.get(), nullptr, N, M, K, false});
  }
  if (!dwt && !dbs) return;
  auto g_t = transposed(g, N, M);  // (M, N)
  if (dwt) {
    auto x_t = transposed(x, N, K);  // (K, N)
    gemm({dwt, g_t.get(), x_t.get(), nullptr, M, N, K, true});
  }
  if (!dbs) return;
#pragma omp parallel for schedule(static) if (cpu::worth_threads(static_cast<size_t>(N) * M))
  for (int m = 0; m < M; ++m) {
    const float* row = g_t.get() + static_cast<size_t>(m) * N;
    double s = 0;
    for (int n = 0; n < N; ++n) s += row[n];
    dbs[m] += static_cast<float>(s);
  }
}

}  // namespace trident
