// CPU backend ops (GPT-2's and Llama's): every backward against central finite differences, forwards
// against double-precision references, AdamW against a scalar reference, bit-determinism across threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/backend/peer_ops.hpp"
#include "trident/core/rng.hpp"

namespace trident {
namespace {

using test::max_abs_diff;
using test::random_vector;
using test::rel_l2;
using Vec = std::vector<float>;

// fp32 forward passes evaluated at x +- h: the loss rounding noise divided by 2h stays well
// under these bounds, while a missing or wrong gradient term does not.
constexpr double kGradRtol = 2e-2;
constexpr double kGradAtol = 5e-4;
constexpr int kGradSamples = 24;

// TensorView carries no constness; the ops only write their destination arguments.
TensorView view(const Vec& v) { return TensorView(const_cast<float*>(v.data()), DType::F32, v.size()); }

// L = sum(out * r) in double: the scalar loss whose gradient w.r.t. out is r.
double weighted_sum(const Vec& out, const Vec& r) {
  double s = 0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * r[i];
  return s;
}

Vec minus(const Vec& a, const Vec& b) {
  Vec d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// Compares grad with central differences of loss() at a stratified sample of x's elements
// (one per stretch of x, so every part of a packed tensor such as qkv is visited).
void expect_grad(const char* what, Vec& x, const Vec& grad, const std::function<double()>& loss,
                 uint64_t seed = 1) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  const size_t n = x.size();
  const size_t count = std::min<size_t>(kGradSamples, n);
  for (size_t s = 0; s < count; ++s) {
    const size_t lo = s * n / count, hi = (s + 1) * n / count;
    const size_t i = lo + static_cast<size_t>(uniform_at(seed, 3, s) * (hi - lo));
    const float orig = x[i];
    const float h = 1e-2f * std::max(1.0f, std::fabs(orig));
    const float up = orig + h, down = orig - h;
    x[i] = up;
    const double l_up = loss();
    x[i] = down;
    const double l_down = loss();
    x[i] = orig;
    const double fd = (l_up - l_down) / (static_cast<double>(up) - down);
    EXPECT_NEAR(grad[i], fd, kGradAtol + kGradRtol * std::fabs(fd)) << what << "[" << i << "]";
  }
}

// ---------------------------------------------------------------- memory

TEST(CpuBackend, PropertiesAndMemory) {
  auto be = make_cpu_backend();
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(be->compute_dtype(), DType::F32);
  EXPECT_FALSE(be->is_device());
  EXPECT_EQ(be->stream().handle, nullptr);

  void* a = be->alloc(1000);
  void* b = be->alloc(24);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  const auto* bytes = static_cast<const unsigned char*>(a);
  EXPECT_TRUE(std::all_of(bytes, bytes + 1000, [](unsigned char c) { return c == 0; }));
  be->release(a);
  void* c = be->alloc(500);
  EXPECT_EQ(be->peak_bytes(), 1024u);  // 1000 + 24 live at once; 24 + 500 later is less
  be->release(b);
  be->release(c);

  Buffer buf(*be, 6 * sizeof(float));
  Vec src = {1.5f, -2.0f, 3.25f, 1e-3f, 7.0f, -0.5f}, back(6);
  be->copy_from_host(buf.view(DType::F32), src.data());
  be->copy_to_host(back.data(), buf.view(DType::F32));
  EXPECT_EQ(back, src);

  // fp32 -> bf16 -> fp32 rounds to 8 significant bits; these values are exact in bf16.
  Buffer half(*be, 6 * 2);
  be->copy(half.view(DType::BF16), buf.view(DType::F32));
  Vec wide(6);
  be->copy(view(wide), half.view(DType::BF16));
  Vec expected(6);
  for (int i = 0; i < 6; ++i) expected[i] = bf16_to_float(float_to_bf16(src[i]));
  EXPECT_EQ(wide, expected);
  EXPECT_EQ(wide[0], 1.5f);

  be->zero(view(wide));
  EXPECT_EQ(wide, Vec(6, 0.0f));
}

// ---------------------------------------------------------------- encoder

TEST(CpuOps, EncoderGradients) {
  auto be = make_cpu_backend();
  const int B = 2, T = 5, C = 12, vocab_start = 10, v_local = 6, block = T + 2;
  // Below, at both ends of and above this rank's rows [10, 16); token 10 repeats.
  const std::vector<int32_t> tokens = {3, 10, 15, 12, 16, 11, 10, 10, 20, 14};
  Vec wte = random_vector(v_local * C, 11);  // (v_local, C)
  Vec wpe = random_vector(block * C, 12);    // (block, C): the model's table may be longer than T
  const Vec r = random_vector(B * T * C, 13);
  Vec out(B * T * C);

  auto loss = [&] {
    be->encoder_fwd(view(out), tokens.data(), view(wte), view(wpe), B, T, C, vocab_start, v_local, nullptr);
    return weighted_sum(out, r);
  };
  loss();
  for (int n = 0; n < B * T; ++n) {
    const int local = tokens[n] - vocab_start;
    for (int c = 0; c < C; ++c) {
      const float e = local >= 0 && local < v_local ? wte[local * C + c] : 0.0f;
      EXPECT_EQ(out[n * C + c], e + wpe[(n % T) * C + c]) << n << "," << c;
    }
  }

  // One guard row past dwte catches a write for the first token beyond this shard.
  Vec dwte_guarded((v_local + 1) * C), dwpe(block * C);
  be->encoder_bwd(TensorView(dwte_guarded.data(), DType::F32, v_local * C), view(dwpe), view(r), tokens.data(), B, T,
                  C, vocab_start, v_local, nullptr);
  EXPECT_EQ(Vec(dwte_guarded.end() - C, dwte_guarded.end()), Vec(C, 0.0f));
  const Vec dwte(dwte_guarded.begin(), dwte_guarded.end() - C);
  expect_grad("wte", wte, dwte, loss);
  expect_grad("wpe", wpe, dwpe, loss);
  for (int i = T * C; i < block * C; ++i) EXPECT_EQ(dwpe[i], 0.0f);

  // Parameter gradients accumulate.
  const Vec d0 = random_vector(v_local * C, 14), p0 = random_vector(block * C, 15);
  Vec acc_wte = d0, acc_wpe = p0;
  be->encoder_bwd(view(acc_wte), view(acc_wpe), view(r), tokens.data(), B, T, C, vocab_start, v_local, nullptr);
  EXPECT_LT(max_abs_diff(minus(acc_wte, d0), dwte), 1e-6);
  EXPECT_LT(max_abs_diff(minus(acc_wpe, p0), dwpe), 1e-6);

  // Without a position table the output is the (shard-local) token embedding alone.
  be->encoder_fwd(view(out), tokens.data(), view(wte), TensorView(), B, T, C, vocab_start, v_local, nullptr);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[C], wte[0]);
}

// ---------------------------------------------------------------- layernorm

TEST(CpuOps, LayerNormForwardAndGradients) {
  auto be = make_cpu_backend();
  const int N = 5, C = 37;
  const float eps = 1e-5f;
  Vec in = random_vector(N * C, 21, 2.0f);
  for (float& x : in) x += 3.0f;  // a large mean, as in a residual stream
  Vec w = random_vector(C, 22), b = random_vector(C, 23);
  const Vec r = random_vector(N * C, 24);
  Vec out(N * C), mean(N), rstd(N);

  auto loss = [&] {
    be->layernorm_fwd(view(out), view(mean), view(rstd), view(in), view(w), view(b), N, C, eps);
    return weighted_sum(out, r);
  };
  loss();
  for (int n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += in[n * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (in[n * C + c] - m) * (in[n * C + c] - m);
    const double rs = 1.0 / std::sqrt(v / C + eps);
    EXPECT_NEAR(mean[n], m, 1e-6);
    EXPECT_NEAR(rstd[n], rs, 1e-6 * rs);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(out[n * C + c], (in[n * C + c] - m) * rs * w[c] + b[c], 1e-5);
  }

  // din_accum, dw and db all accumulate: start them from random values and subtract those.
  const Vec din0 = random_vector(N * C, 25), dw0 = random_vector(C, 26), db0 = random_vector(C, 27);
  Vec din = din0, dw = dw0, db = db0, dsum(C, 0.25f);
  be->layernorm_bwd(view(din), view(dw), view(db), view(dsum), view(r), view(in), view(w), view(mean), view(rstd), N,
                    C);
  expect_grad("in", in, minus(din, din0), loss);
  expect_grad("w", w, minus(dw, dw0), loss);
  expect_grad("b", b, minus(db, db0), loss);
  // dsum accumulates the column sums of the updated din_accum.
  for (int c = 0; c < C; ++c) {
    double sum = 0.25;
    for (int n = 0; n < N; ++n) sum += din[n * C + c];
    EXPECT_NEAR(dsum[c], sum, 1e-5 * (1 + std::abs(sum))) << "dsum column " << c;
  }

  Vec din_z(N * C), dw_z(C), db_z(C);
  be->layernorm_bwd(view(din_z), view(dw_z), view(db_z), TensorView{}, view(r), view(in), view(w), view(mean),
                    view(rstd), N, C);
  EXPECT_LT(max_abs_diff(minus(din, din0), din_z), 1e-6);
  EXPECT_LT(max_abs_diff(minus(dw, dw0), dw_z), 1e-6);
  EXPECT_LT(max_abs_diff(minus(db, db0), db_z), 1e-6);
}

// ---------------------------------------------------------------- RMSNorm

TEST(CpuOps, RmsNormForwardAndGradients) {
  auto be = make_cpu_backend();
  const int N = 5, C = 37;
  const float eps = 1e-5f;
  Vec in = random_vector(N * C, 201, 2.0f);
  for (float& x : in) x += 1.5f;  // a mean far from 0, as in a residual stream
  Vec w = random_vector(C, 202);
  const Vec r = random_vector(N * C, 203);
  Vec out(N * C), rstd(N);

  auto loss = [&] {
    be->rmsnorm_fwd(view(out), view(rstd), view(in), view(w), N, C, eps);
    return weighted_sum(out, r);
  };
  loss();
  for (int n = 0; n < N; ++n) {
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += static_cast<double>(in[n * C + c]) * in[n * C + c];
    const double rs = 1.0 / std::sqrt(ss / C + eps);
    EXPECT_NEAR(rstd[n], rs, 1e-6 * rs);
    for (int c = 0; c < C; ++c) EXPECT_NEAR(out[n * C + c], in[n * C + c] * rs * w[c], 1e-5);
  }

  // din_accum and dw accumulate: start them from random values and subtract those.
  const Vec din0 = random_vector(N * C, 204), dw0 = random_vector(C, 205);
  Vec din = din0, dw = dw0;
  be->rmsnorm_bwd(view(din), view(dw), view(r), view(in), view(w), view(rstd), N, C);
  expect_grad("in", in, minus(din, din0), loss);
  expect_grad("w", w, minus(dw, dw0), loss);
}

// The fused residual add: sum = a + residual (in place over a, as a model calls it), then the
// RMSNorm of the sum.
TEST(CpuOps, AddRmsNormIsAddThenRmsNorm) {
  auto be = make_cpu_backend();
  const int N = 4, C = 24;
  const Vec a0 = random_vector(N * C, 211), residual = random_vector(N * C, 212), w = random_vector(C, 213);
  Vec a = a0, out(N * C), rstd(N);
  be->add_rmsnorm_fwd(view(a), view(out), view(rstd), view(a), view(residual), view(w), N, C, 1e-6f);
  Vec sum(N * C), out_ref(N * C), rstd_ref(N);
  for (int i = 0; i < N * C; ++i) sum[i] = a0[i] + residual[i];
  be->rmsnorm_fwd(view(out_ref), view(rstd_ref), view(sum), view(w), N, C, 1e-6f);
  EXPECT_EQ(a, sum);
  EXPECT_EQ(out, out_ref);
  EXPECT_EQ(rstd, rstd_ref);
}

// parallel.tp_fused_sum: the RMSNorms given the other TP rank's partial (PeerOps' a_peer,
// dout_peer) compute exactly what the plain ops compute from the pair's sum (what the all-reduce
// they replace leaves), and with no partial exactly what the plain ops compute.
TEST(CpuOps, RmsNormsAddPeerPartialsExactly) {
  auto be = make_cpu_backend();
  PeerOps& peer_ops = peer_ops_of(*be, "RmsNormsAddPeerPartialsExactly");
  const int N = 6, C = 40;
  const float eps = 1e-5f;
  const Vec a = random_vector(N * C, 221, 2.0f), a_peer = random_vector(N * C, 222, 2.0f);
  const Vec residual = random_vector(N * C, 223, 2.0f), w = random_vector(C, 224);
  const Vec dout = random_vector(N * C, 225), dout_peer = random_vector(N * C, 226);
  const Vec din0 = random_vector(N * C, 227), dw0 = random_vector(C, 228);
  Vec a_pair(N * C), dout_pair(N * C);
  for (int i = 0; i < N * C; ++i) {
    a_pair[i] = a[i] + a_peer[i];
    dout_pair[i] = dout[i] + dout_peer[i];
  }
  for (const bool with_peer : {true, false}) {
    SCOPED_TRACE(with_peer ? "with the peer's partials" : "without a partial");
    const Vec& a_ref = with_peer ? a_pair : a;
    const Vec& dout_ref = with_peer ? dout_pair : dout;
    // The forward over a in place, as a model calls it; then the backward from its sum.
    Vec sum = a, out(N * C), rstd(N), sum_ref = a_ref, out_ref(N * C), rstd_ref(N);
    peer_ops.add_rmsnorm_fwd(view(sum), view(out), view(rstd), view(sum), with_peer ? view(a_peer) : TensorView{},
                             view(residual), view(w), N, C, eps);
    be->add_rmsnorm_fwd(view(sum_ref), view(out_ref), view(rstd_ref), view(sum_ref), view(residual), view(w), N, C,
                        eps);
    EXPECT_EQ(sum, sum_ref);
    EXPECT_EQ(out, out_ref);
    EXPECT_EQ(rstd, rstd_ref);
    Vec din = din0, dw = dw0, din_ref = din0, dw_ref = dw0;
    peer_ops.rmsnorm_bwd(view(din), view(dw), view(dout), with_peer ? view(dout_peer) : TensorView{}, view(sum),
                         view(w), view(rstd), N, C);
    be->rmsnorm_bwd(view(din_ref), view(dw_ref), view(dout_ref), view(sum_ref), view(w), view(rstd_ref), N, C);
    EXPECT_EQ(din, din_ref);
    EXPECT_EQ(dw, dw_ref);
  }
}

// The other ranks' partials of a fused row sum beyond tp = 2: added in order, as chained adds.
TEST(CpuOps, SumPartialsAddsInOrder) {
  auto be = make_cpu_backend();
  PeerOps& peer_ops = peer_ops_of(*be, "SumPartialsAddsInOrder");
  const size_t n = 257;
  std::vector<Vec> parts;
  for (int j = 0; j < 4; ++j) parts.push_back(random_vector(n, 231 + static_cast<uint64_t>(j), 3.0f));
  Vec want = parts[0];
  for (int j = 1; j < 4; ++j)
    for (size_t i = 0; i < n; ++i) want[i] = want[i] + parts[static_cast<size_t>(j)][i];
  std::vector<TensorView> views;
  for (Vec& p : parts) views.push_back(view(p));
  Vec out(n);
  peer_ops.sum_partials(view(out), views);
  EXPECT_EQ(out, want);
  peer_ops.sum_partials(views[0], views);   // in place into the first
  EXPECT_EQ(parts[0], want);
}

// ---------------------------------------------------------------- matmul

void check_matmul_gradients(bool with_bias) {
  auto be = make_cpu_backend();
  // Odd sizes: edge tiles in both directions and a K tail shorter than the lane count.
  const int N = 9, K = 19, M = 11;
  Vec in = random_vector(N * K, 31), w = random_vector(M * K, 32), bias = random_vector(M, 33);
  const Vec r = random_vector(N * M, 34);
  Vec out(N * M);
  const TensorView bias_view = with_bias ? view(bias) : TensorView();

  auto loss = [&] {
    be->matmul_fwd(view(out), view(in), view(w), bias_view, N, K, M);
    return weighted_sum(out, r);
  };
  loss();
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m) {
      double s = with_bias ? bias[m] : 0.0;
      for (int k = 0; k < K; ++k) s += static_cast<double>(in[n * K + k]) * w[m * K + k];
      EXPECT_NEAR(out[n * M + m], s, 1e-5) << n << "," << m;
    }

  Vec din(N * K), dw(M * K), dbias(M);
  be->matmul_bwd(view(din), view(dw), with_bias ? view(dbias) : TensorView(), view(r), view(in), view(w), N, K, M);
  expect_grad("in", in, din, loss);
  expect_grad("w", w, dw, loss);
  if (with_bias) expect_grad("bias", bias, dbias, loss);

  // dw and dbias accumulate; din may be skipped without changing them.
  const Vec dw0 = random_vector(M * K, 35), db0 = random_vector(M, 36);
  Vec dw_acc = dw0, db_acc = db0;
  be->matmul_bwd(TensorView(), view(dw_acc), with_bias ? view(db_acc) : TensorView(), view(r), view(in), view(w), N, K, M);
  EXPECT_LT(max_abs_diff(minus(dw_acc, dw0), dw), 1e-6);
  if (with_bias) {
    EXPECT_LT(max_abs_diff(minus(db_acc, db0), dbias), 1e-6);
  } else {
    EXPECT_EQ(db_acc, db0);
  }
}

TEST(CpuOps, MatmulGradientsWithBias) { check_matmul_gradients(true); }
TEST(CpuOps, MatmulGradientsWithoutBias) { check_matmul_gradients(false); }

// Several 64-row blocks, against a double-precision reference of all three products.
TEST(CpuOps, MatmulLargeMatchesReference) {
  auto be = make_cpu_backend();
  const int N = 70, K = 100, M = 130;
  Vec in = random_vector(N * K, 41), w = random_vector(M * K, 42), bias = random_vector(M, 43);
  Vec dout = random_vector(N * M, 44);
  Vec out(N * M), din(N * K), dw(M * K), dbias(M);
  be->matmul_fwd(view(out), view(in), view(w), view(bias), N, K, M);
  be->matmul_bwd(view(din), view(dw), view(dbias), view(dout), view(in), view(w), N, K, M);

  Vec out_ref(N * M), din_ref(N * K), dw_ref(M * K), dbias_ref(M);
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m) {
      double s = bias[m];
      for (int k = 0; k < K; ++k) s += static_cast<double>(in[n * K + k]) * w[m * K + k];
      out_ref[n * M + m] = static_cast<float>(s);
    }
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int m = 0; m < M; ++m) s += static_cast<double>(dout[n * M + m]) * w[m * K + k];
      din_ref[n * K + k] = static_cast<float>(s);
    }
  for (int m = 0; m < M; ++m) {
    double sb = 0;
    for (int n = 0; n < N; ++n) sb += dout[n * M + m];
    dbias_ref[m] = static_cast<float>(sb);
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int n = 0; n < N; ++n) s += static_cast<double>(dout[n * M + m]) * in[n * K + k];
      dw_ref[m * K + k] = static_cast<float>(s);
    }
  }
  EXPECT_LT(rel_l2(out, out_ref), 1e-6);
  EXPECT_LT(rel_l2(din, din_ref), 1e-6);
  EXPECT_LT(rel_l2(dw, dw_ref), 1e-6);
  EXPECT_LT(rel_l2(dbias, dbias_ref), 1e-6);
}

// ---------------------------------------------------------------- elementwise

TEST(CpuOps, GeluForwardAndGradient) {
  auto be = make_cpu_backend();
  const int n = 64;
  Vec x = random_vector(n, 51, 4.0f);
  const Vec r = random_vector(n, 52);
  Vec out(n), din(n);
  auto loss = [&] {
    be->gelu_fwd(view(out), view(x));
    return weighted_sum(out, r);
  };
  loss();
  for (int i = 0; i < n; ++i) {
    const double v = x[i];
    const double ref = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(out[i], ref, 1e-6 * (1 + std::fabs(ref)));
  }
  be->gelu_bwd(view(din), view(r), view(x));
  expect_grad("x", x, din, loss);
}

// SwiGLU over rows [gate (F) | up (F)]: out = silu(gate) * up.
TEST(CpuOps, SwigluForwardAndGradient) {
  auto be = make_cpu_backend();
  const int N = 3, F = 13;
  Vec in = random_vector(2 * N * F, 221, 4.0f);
  const Vec r = random_vector(N * F, 222);
  Vec out(N * F), din(2 * N * F, 7.0f);  // din is written, not accumulated: the 7s must vanish
  auto loss = [&] {
    be->swiglu_fwd(view(out), view(in), N, F);
    return weighted_sum(out, r);
  };
  loss();
  for (int n = 0; n < N; ++n)
    for (int j = 0; j < F; ++j) {
      const double g = in[2 * n * F + j], u = in[2 * n * F + F + j];
      const double ref = g / (1 + std::exp(-g)) * u;
      EXPECT_NEAR(out[n * F + j], ref, 1e-6 * (1 + std::fabs(ref))) << n << "," << j;
    }
  be->swiglu_bwd(view(din), view(r), view(in), N, F);
  expect_grad("in", in, din, loss);
  // In place over its input gives the same gradient.
  Vec in_place = in;
  be->swiglu_bwd(view(in_place), view(r), view(in_place), N, F);
  EXPECT_EQ(in_place, din);
}

TEST(CpuOps, Add) {
  auto be = make_cpu_backend();
  Vec a = random_vector(10, 53), b = random_vector(10, 54), out(10);
  be->add(view(out), view(a), view(b));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

// ---------------------------------------------------------------- attention

struct AttnShape {
  int B, T, NH, HS;
};

void PrintTo(const AttnShape& s, std::ostream* os) { *os << "B" << s.B << "_T" << s.T << "_NH" << s.NH << "_HS" << s.HS; }

// Explicit masked softmax in double: out (B, T, NH, HS), lse (B, NH, T).
void attention_reference(Vec& out, Vec& lse, const Vec& qkv, const AttnShape& s) {
  const int C = s.NH * s.HS;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.HS));
  auto at = [&](int b, int t, int which, int h, int d) { return static_cast<double>(qkv[((b * s.T + t) * 3 + which) * C + h * s.HS + d]); };
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        std::vector<double> score(t + 1);
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int e = 0; e < s.HS; ++e) d += at(b, t, 0, h, e) * at(b, j, 1, h, e);
          score[j] = scale * d;
          mx = std::max(mx, score[j]);
        }
        double z = 0;
        for (int j = 0; j <= t; ++j) z += std::exp(score[j] - mx);
        lse[(b * s.NH + h) * s.T + t] = static_cast<float>(mx + std::log(z));
        for (int e = 0; e < s.HS; ++e) {
          double o = 0;
          for (int j = 0; j <= t; ++j) o += std::exp(score[j] - mx) / z * at(b, j, 2, h, e);
          out[(b * s.T + t) * C + h * s.HS + e] = static_cast<float>(o);
        }
      }
}

class CpuAttention : public ::testing::TestWithParam<AttnShape> {};

TEST_P(CpuAttention, ForwardMatchesReferenceAndGradients) {
  const AttnShape s = GetParam();
  auto be = make_cpu_backend();
  const size_t n_act = static_cast<size_t>(s.B) * s.T * s.NH * s.HS;
  Vec qkv = random_vector(3 * n_act, 61, 1.5f);  // peaked enough that softmax is not uniform
  const Vec r = random_vector(n_act, 62);
  Vec out(n_act), lse(s.B * s.NH * s.T);

  auto loss = [&] {
    be->attention_fwd(view(out), view(lse), view(qkv), s.B, s.T, s.NH, s.NH, s.HS, nullptr);
    return weighted_sum(out, r);
  };
  loss();
  Vec out_ref(n_act), lse_ref(lse.size());
  attention_reference(out_ref, lse_ref, qkv, s);
  EXPECT_LT(max_abs_diff(out, out_ref), 1e-5);
  EXPECT_LT(max_abs_diff(lse, lse_ref), 1e-5);

  Vec dqkv(3 * n_act, 7.0f);  // written, not accumulated: the 7s must vanish
  const int C3 = 3 * s.NH * s.HS;
  Vec dbias(C3, 0.5f);         // accumulated: the bias gradient adds onto it
  be->attention_bwd(view(dqkv), view(dbias), view(r), view(qkv), view(out), view(lse), s.B, s.T, s.NH, s.NH, s.HS, nullptr);
  expect_grad("qkv", qkv, dqkv, loss, 63);
  // A bias added to every row of qkv has the column sums of dqkv as its gradient.
  for (int c = 0; c < C3; ++c) {
    double sum = 0.5;
    for (int row = 0; row < s.B * s.T; ++row) sum += dqkv[static_cast<size_t>(row) * C3 + c];
    EXPECT_NEAR(dbias[c], sum, 1e-5 * (1 + std::abs(sum))) << "dbias column " << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuAttention,
                         ::testing::Values(AttnShape{1, 7, 2, 4}, AttnShape{2, 13, 3, 32},
                                           AttnShape{2, 5, 1, 8}, AttnShape{1, 1, 1, 4}),
                         [](const ::testing::TestParamInfo<AttnShape>& info) { return ::testing::PrintToString(info.param); });

// ---------------------------------------------------------------- rotary embedding

// x rotated at positions pos0.. in double, the rotate_half convention written out: the halves
// (x1, x2) of each q and k head become (x1 cos - x2 sin, x2 cos + x1 sin), angle t theta^(-2i/HS).
Vec rope_reference(const Vec& x, int B, int T, int NH, int NKV, int HS, int pos0, double theta) {
  Vec y = x;
  const int H3 = NH + 2 * NKV, half = HS / 2;
  for (int bt = 0; bt < B * T; ++bt)
    for (int h = 0; h < NH + NKV; ++h)
      for (int i = 0; i < half; ++i) {
        const double angle = (pos0 + bt % T) * std::pow(theta, -2.0 * i / HS);
        const size_t a = (static_cast<size_t>(bt) * H3 + h) * HS + i, b = a + half;
        y[a] = static_cast<float>(x[a] * std::cos(angle) - x[b] * std::sin(angle));
        y[b] = static_cast<float>(x[b] * std::cos(angle) + x[a] * std::sin(angle));
      }
  return y;
}

TEST(CpuOps, RopeTableForwardAndGradient) {
  auto be = make_cpu_backend();
  const int B = 2, T = 5, NH = 4, NKV = 2, HS = 8, T_table = 9;
  const float theta = 10000.0f;
  Vec table(T_table * HS);
  rope_table(table.data(), T_table, HS, theta);
  for (int t = 0; t < T_table; ++t)
    for (int i = 0; i < HS / 2; ++i) {
      const double angle = t * std::pow(10000.0, -2.0 * i / HS);
      EXPECT_NEAR(table[t * HS + i], std::cos(angle), 1e-6) << t << "," << i;
      EXPECT_NEAR(table[t * HS + HS / 2 + i], std::sin(angle), 1e-6) << t << "," << i;
    }

  const size_t n = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
  Vec x = random_vector(n, 231);
  const Vec r = random_vector(n, 232);
  Vec y(n);
  auto loss = [&] {
    y = x;
    be->rope_fwd(view(y), view(table), B, T, NH, NKV, HS, 0, nullptr);
    return weighted_sum(y, r);
  };
  loss();
  EXPECT_LT(max_abs_diff(y, rope_reference(x, B, T, NH, NKV, HS, 0, theta)), 1e-5);
  // The value heads are not rotated.
  for (int bt = 0; bt < B * T; ++bt)
    for (int e = (NH + NKV) * HS; e < (NH + 2 * NKV) * HS; ++e) {
      const size_t i = static_cast<size_t>(bt) * (NH + 2 * NKV) * HS + e;
      EXPECT_EQ(y[i], x[i]);
    }
  Vec grad = r;
  be->rope_bwd(view(grad), view(table), B, T, NH, NKV, HS, 0, nullptr);
  expect_grad("qkv", x, grad, loss);

  // The backward undoes the forward (a rotation's inverse is its transpose).
  loss();  // y of the unperturbed x again
  Vec back = y;
  be->rope_bwd(view(back), view(table), B, T, NH, NKV, HS, 0, nullptr);
  EXPECT_LT(max_abs_diff(back, x), 1e-6);

  // Generation: T = 3 new positions after 4 earlier ones read table rows 4..6.
  const int Tn = 3, pos0 = 4;
  Vec z = random_vector(static_cast<size_t>(B) * Tn * (NH + 2 * NKV) * HS, 233), z_rot = z;
  be->rope_fwd(view(z_rot), view(table), B, Tn, NH, NKV, HS, pos0, nullptr);
  EXPECT_LT(max_abs_diff(z_rot, rope_reference(z, B, Tn, NH, NKV, HS, pos0, theta)), 1e-5);
}

// ---------------------------------------------------------------- grouped-query attention

struct GqaShape {
  int B, T, NH, NKV, HS;
};

void PrintTo(const GqaShape& s, std::ostream* os) {
  *os << "B" << s.B << "_T" << s.T << "_NH" << s.NH << "_NKV" << s.NKV << "_HS" << s.HS;
}

// qkv (B, T, NH + 2 NKV, HS) with each key/value head repeated for its NH / NKV query heads
// (Hugging Face's repeat_kv): the multi-head layout (B, T, 3, NH, HS) of the same attention.
Vec repeat_kv(const Vec& qkv, const GqaShape& s) {
  const int group = s.NH / s.NKV, H3 = s.NH + 2 * s.NKV;
  Vec full(static_cast<size_t>(s.B) * s.T * 3 * s.NH * s.HS);
  for (int bt = 0; bt < s.B * s.T; ++bt)
    for (int which = 0; which < 3; ++which)
      for (int h = 0; h < s.NH; ++h) {
        const int src = which == 0 ? h : (which == 1 ? s.NH : s.NH + s.NKV) + h / group;
        std::copy_n(&qkv[(static_cast<size_t>(bt) * H3 + src) * s.HS], s.HS,
                    &full[((static_cast<size_t>(bt) * 3 + which) * s.NH + h) * s.HS]);
      }
  return full;
}

class CpuGqaAttention : public ::testing::TestWithParam<GqaShape> {};

TEST_P(CpuGqaAttention, MatchesRepeatedHeadsAndGradients) {
  const GqaShape s = GetParam();
  auto be = make_cpu_backend();
  const size_t n_act = static_cast<size_t>(s.B) * s.T * s.NH * s.HS;
  const size_t n_qkv = static_cast<size_t>(s.B) * s.T * (s.NH + 2 * s.NKV) * s.HS;
  Vec qkv = random_vector(n_qkv, 241, 1.5f);
  const Vec r = random_vector(n_act, 242);
  Vec out(n_act), lse(s.B * s.NH * s.T);
  auto loss = [&] {
    be->attention_fwd(view(out), view(lse), view(qkv), s.B, s.T, s.NH, s.NKV, s.HS, nullptr);
    return weighted_sum(out, r);
  };
  loss();
  const AttnShape full_shape{s.B, s.T, s.NH, s.HS};
  const Vec full = repeat_kv(qkv, s);
  Vec out_ref(n_act), lse_ref(lse.size());
  attention_reference(out_ref, lse_ref, full, full_shape);
  EXPECT_LT(max_abs_diff(out, out_ref), 1e-5);
  EXPECT_LT(max_abs_diff(lse, lse_ref), 1e-5);

  Vec dqkv(n_qkv, 7.0f);  // written, not accumulated
  be->attention_bwd(view(dqkv), TensorView{}, view(r), view(qkv), view(out), view(lse), s.B, s.T, s.NH, s.NKV, s.HS, nullptr);
  expect_grad("qkv", qkv, dqkv, loss, 243);

  // Against the multi-head backward on the repeated heads: the same dq, and dk, dv of a key/value
  // head the sums over its group's query heads.
  Vec full_out(n_act), full_lse(lse.size()), dfull(full.size());
  be->attention_fwd(view(full_out), view(full_lse), view(full), s.B, s.T, s.NH, s.NH, s.HS, nullptr);
  be->attention_bwd(view(dfull), TensorView{}, view(r), view(full), view(full_out), view(full_lse), s.B, s.T, s.NH,
                    s.NH, s.HS, nullptr);
  Vec summed(n_qkv, 0.0f);
  const int group = s.NH / s.NKV, H3 = s.NH + 2 * s.NKV;
  for (int bt = 0; bt < s.B * s.T; ++bt)
    for (int which = 0; which < 3; ++which)
      for (int h = 0; h < s.NH; ++h) {
        const int dst = which == 0 ? h : (which == 1 ? s.NH : s.NH + s.NKV) + h / group;
        for (int d = 0; d < s.HS; ++d)
          summed[(static_cast<size_t>(bt) * H3 + dst) * s.HS + d] +=
              dfull[((static_cast<size_t>(bt) * 3 + which) * s.NH + h) * s.HS + d];
      }
  EXPECT_LT(max_abs_diff(dqkv, summed), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuGqaAttention,
                         ::testing::Values(GqaShape{1, 7, 4, 2, 8}, GqaShape{2, 13, 6, 2, 16}, GqaShape{2, 5, 4, 1, 4},
                                           GqaShape{1, 6, 3, 3, 4}),
                         [](const ::testing::TestParamInfo<GqaShape>& info) {
                           return ::testing::PrintToString(info.param);
                         });

// ---------------------------------------------------------------- packed sequences (doc_start)

// Two sequences of T = 11 packing documents of 3, 4, 4 and 5, 6 positions: each document's
// attention, rotation and gradients are those of the document alone, bit for bit.
TEST(CpuOps, PackedDocumentsAttendAndRotateAsAlone) {
  auto be = make_cpu_backend();
  const int B = 2, T = 11, NH = 4, NKV = 2, HS = 8, H3 = NH + 2 * NKV;
  const std::vector<int32_t> doc_start = {0, 0, 0, 3, 3, 3, 3, 7, 7, 7, 7, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5};
  struct Doc { int b, start, len; };
  const std::vector<Doc> docs = {{0, 0, 3}, {0, 3, 4}, {0, 7, 4}, {1, 0, 5}, {1, 5, 6}};
  const size_t row_qkv = static_cast<size_t>(H3) * HS, row_act = static_cast<size_t>(NH) * HS;
  Vec table(T * HS);
  rope_table(table.data(), T, HS, 10000.0f);
  Vec qkv = random_vector(B * T * row_qkv, 251, 1.5f);
  const Vec r = random_vector(B * T * row_act, 252);
  Vec out(B * T * row_act), lse(B * NH * T), dqkv(qkv.size()), rotated(qkv.size());
  auto loss = [&] {
    rotated = qkv;
    be->rope_fwd(view(rotated), view(table), B, T, NH, NKV, HS, 0, doc_start.data());
    be->attention_fwd(view(out), view(lse), view(rotated), B, T, NH, NKV, HS, doc_start.data());
    return weighted_sum(out, r);
  };
  loss();
  be->attention_bwd(view(dqkv), TensorView{}, view(r), view(rotated), view(out), view(lse), B, T, NH, NKV, HS,
                    doc_start.data());
  be->rope_bwd(view(dqkv), view(table), B, T, NH, NKV, HS, 0, doc_start.data());
  expect_grad("packed qkv", qkv, dqkv, loss, 253);
  loss();
  for (const Doc& d : docs) {
    const size_t q0 = (static_cast<size_t>(d.b) * T + d.start) * row_qkv, a0 = (static_cast<size_t>(d.b) * T + d.start) * row_act;
    Vec x(qkv.begin() + q0, qkv.begin() + q0 + d.len * row_qkv), rd(r.begin() + a0, r.begin() + a0 + d.len * row_act);
    Vec o(d.len * row_act), l(NH * d.len), dx(x.size());
    be->rope_fwd(view(x), view(table), 1, d.len, NH, NKV, HS, 0, nullptr);
    be->attention_fwd(view(o), view(l), view(x), 1, d.len, NH, NKV, HS, nullptr);
    be->attention_bwd(view(dx), TensorView{}, view(rd), view(x), view(o), view(l), 1, d.len, NH, NKV, HS, nullptr);
    be->rope_bwd(view(dx), view(table), 1, d.len, NH, NKV, HS, 0, nullptr);
    EXPECT_EQ(Vec(out.begin() + a0, out.begin() + a0 + o.size()), o) << d.b << "," << d.start;
    EXPECT_EQ(Vec(dqkv.begin() + q0, dqkv.begin() + q0 + dx.size()), dx) << d.b << "," << d.start;
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < d.len; ++t) EXPECT_EQ(lse[(d.b * NH + h) * T + d.start + t], l[h * d.len + t]);
  }
}

// The learned position embedding restarts with each document; its gradient sums each position's rows.
TEST(CpuOps, PackedDocumentsRestartPositionEmbedding) {
  auto be = make_cpu_backend();
  const int B = 2, T = 5, C = 3, V = 7;
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3}, doc_start = {0, 0, 2, 2, 2, 0, 1, 1, 1, 1};
  const Vec wte = random_vector(V * C, 261), wpe = random_vector(T * C, 262), g = random_vector(B * T * C, 263);
  Vec out(B * T * C), dwte(V * C, 0.0f), dwpe(T * C, 0.0f), dwpe_ref(T * C, 0.0f);
  be->encoder_fwd(view(out), tokens.data(), view(wte), view(wpe), B, T, C, 0, V, doc_start.data());
  be->encoder_bwd(view(dwte), view(dwpe), view(g), tokens.data(), B, T, C, 0, V, doc_start.data());
  for (int n = 0; n < B * T; ++n) {
    const int pos = n % T - doc_start[n];
    for (int c = 0; c < C; ++c) {
      EXPECT_EQ(out[n * C + c], wte[tokens[n] * C + c] + wpe[pos * C + c]) << n;
      dwpe_ref[pos * C + c] += g[n * C + c];
    }
  }
  EXPECT_EQ(dwpe, dwpe_ref);
}

// ---------------------------------------------------------------- cross-entropy

// Per-row loss log(sum_j exp(z_j)) - z_target over the first v_valid columns, in double.
std::vector<double> xent_reference(const Vec& logits, const std::vector<int32_t>& targets, int N, int V, int v_valid) {
  std::vector<double> loss(N);
  for (int n = 0; n < N; ++n) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < v_valid; ++j) mx = std::max(mx, static_cast<double>(logits[n * V + j]));
    for (int j = 0; j < v_valid; ++j) s += std::exp(logits[n * V + j] - mx);
    loss[n] = std::log(s) + mx - logits[n * V + targets[n]];
  }
  return loss;
}

TEST(CpuOps, CrossEntropyGradient) {
  auto be = make_cpu_backend();
  const int N = 4, V = 16, v_valid = 11;
  const float dloss = 0.37f;
  const std::vector<int32_t> targets = {0, 10, 5, 3};
  Vec logits = random_vector(N * V, 71, 3.0f);
  for (int n = 0; n < N; ++n)
    for (int j = v_valid; j < V; ++j) logits[n * V + j] = 50.0f;  // padding: must not count
  Vec z(N * V), rowmax(N), stats(2 * N), losses(N);

  // Runs the three calls on a copy (xent_bwd overwrites the logits with their gradient).
  auto loss = [&] {
    z = logits;
    be->xent_max(view(rowmax), view(z), N, V, v_valid);
    be->xent_stats(view(stats), view(z), view(rowmax), targets.data(), N, V, v_valid, 0);
    be->xent_bwd(view(losses), view(z), view(rowmax), view(stats), targets.data(), N, V, v_valid, 0, dloss);
    double s = 0;
    for (float l : losses) s += l;
    return dloss * s;
  };
  loss();
  const Vec grad = z;
  const std::vector<double> ref = xent_reference(logits, targets, N, V, v_valid);
  for (int n = 0; n < N; ++n) {
    EXPECT_NEAR(losses[n], ref[n], 1e-5 * (1 + ref[n]));
    for (int j = v_valid; j < V; ++j) EXPECT_EQ(grad[n * V + j], 0.0f);
  }
  expect_grad("logits", logits, grad, loss, 72);
}

// Vocab-parallel over tp shards: reduce rowmax (max) and stats (sum) between the calls as the
// model does; every shard's losses and the concatenated gradient match the unsharded op.
void check_sharded_xent(int tp, int v_local, int v_valid_total) {
  auto be = make_cpu_backend();
  const int N = 6, V = tp * v_local;
  const float dloss = 0.25f;
  const std::vector<int32_t> targets = {0, 7, static_cast<int32_t>(v_local), static_cast<int32_t>(v_local - 1),
                                        static_cast<int32_t>(v_valid_total - 1), 3};
  Vec logits = random_vector(N * V, 81, 4.0f);

  Vec full = logits, rowmax(N), stats(2 * N), losses(N);
  be->xent_max(view(rowmax), view(full), N, V, v_valid_total);
  be->xent_stats(view(stats), view(full), view(rowmax), targets.data(), N, V, v_valid_total, 0);
  be->xent_bwd(view(losses), view(full), view(rowmax), view(stats), targets.data(), N, V, v_valid_total, 0, dloss);

  std::vector<Vec> shard(tp, Vec(N * v_local));
  std::vector<int> valid(tp);
  for (int r = 0; r < tp; ++r) {
    valid[r] = std::clamp(v_valid_total - r * v_local, 0, v_local);
    for (int n = 0; n < N; ++n)
      std::copy_n(&logits[n * V + r * v_local], v_local, &shard[r][n * v_local]);
  }
  Vec max_all(N, -INFINITY), part(N);
  for (int r = 0; r < tp; ++r) {
    be->xent_max(view(part), view(shard[r]), N, v_local, valid[r]);
    if (valid[r] == 0) {
      EXPECT_EQ(part[0], -INFINITY);
    }
    for (int n = 0; n < N; ++n) max_all[n] = std::max(max_all[n], part[n]);
  }
  Vec stats_all(2 * N, 0.0f), part_stats(2 * N);
  for (int r = 0; r < tp; ++r) {
    be->xent_stats(view(part_stats), view(shard[r]), view(max_all), targets.data(), N, v_local, valid[r], r * v_local);
    for (int i = 0; i < 2 * N; ++i) stats_all[i] += part_stats[i];
  }
  for (int r = 0; r < tp; ++r) {
    Vec shard_losses(N);
    be->xent_bwd(view(shard_losses), view(shard[r]), view(max_all), view(stats_all), targets.data(), N, v_local,
                 valid[r], r * v_local, dloss);
    EXPECT_LT(max_abs_diff(shard_losses, losses), 1e-5) << "shard " << r;
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < v_local; ++j)
        EXPECT_NEAR(shard[r][n * v_local + j], full[n * V + r * v_local + j], 1e-7) << r << "," << n << "," << j;
  }
  const std::vector<double> ref = xent_reference(logits, targets, N, V, v_valid_total);
  for (int n = 0; n < N; ++n) EXPECT_NEAR(losses[n], ref[n], 1e-5 * (1 + ref[n]));
}

TEST(CpuOps, CrossEntropyTwoShardsMatchUnsharded) { check_sharded_xent(2, 12, 20); }

TEST(CpuOps, CrossEntropyWithAnEmptyShard) { check_sharded_xent(3, 8, 14); }

// Ignored targets (kIgnoredTarget, any negative id): loss 0 and a zero gradient row in every shard
// and in the fused form, while the other rows are unchanged.
TEST(CpuOps, CrossEntropyIgnoredTargets) {
  auto be = make_cpu_backend();
  const int N = 4, V = 16, v_valid = 11;
  const float dloss = 0.5f;
  const std::vector<int32_t> all = {2, 10, 5, 3}, some = {2, kIgnoredTarget, 5, -7};
  const Vec logits = random_vector(N * V, 93, 3.0f);
  Vec rowmax(N), stats(2 * N), ref_losses(N), losses(N);
  Vec ref = logits;
  be->xent_fused(view(ref_losses), view(ref), view(rowmax), view(stats), all.data(), N, V, v_valid, dloss);
  for (int tp : {1, 2}) {
    const int v_local = V / tp;
    for (int r = 0; r < tp; ++r) {
      Vec shard(N * v_local);
      for (int n = 0; n < N; ++n) std::copy_n(&logits[n * V + r * v_local], v_local, &shard[n * v_local]);
      if (tp == 1) {
        be->xent_fused(view(losses), view(shard), view(rowmax), view(stats), some.data(), N, V, v_valid, dloss);
      } else {
        // Reduced statistics of the whole row, as after the TP all-reduces.
        Vec full = logits, full_stats(2 * N);
        be->xent_max(view(rowmax), view(full), N, V, v_valid);
        be->xent_stats(view(full_stats), view(full), view(rowmax), some.data(), N, V, v_valid, 0);
        const int valid = std::clamp(v_valid - r * v_local, 0, v_local);
        be->xent_bwd(view(losses), view(shard), view(rowmax), view(full_stats), some.data(), N, v_local, valid,
                     r * v_local, dloss);
      }
      for (int n = 0; n < N; ++n) {
        const bool ignored = some[n] < 0;
        EXPECT_EQ(losses[n], ignored ? 0.0f : ref_losses[n]) << "tp " << tp << " row " << n;
        for (int j = 0; j < v_local; ++j)
          EXPECT_EQ(shard[n * v_local + j], ignored ? 0.0f : ref[n * V + r * v_local + j])
              << "tp " << tp << " shard " << r << " row " << n << " column " << j;
      }
    }
  }
}

TEST(CpuOps, CrossEntropyEmptyShardStatsAreFinite) {
  auto be = make_cpu_backend();
  const int N = 2, V = 4;
  const std::vector<int32_t> targets = {1, 9};
  Vec logits = random_vector(N * V, 91), rowmax(N), stats(2 * N);
  be->xent_max(view(rowmax), view(logits), N, V, 0);
  be->xent_stats(view(stats), view(logits), view(rowmax), targets.data(), N, V, 0, 0);
  EXPECT_EQ(rowmax[0], -INFINITY);
  for (float s : stats) EXPECT_EQ(s, 0.0f);
}

// ---------------------------------------------------------------- reductions and AdamW

TEST(CpuOps, SumsAccumulateInDouble) {
  auto be = make_cpu_backend();
  const int n = 50000;  // several reduction chunks
  Vec x = random_vector(n, 101);
  double s = 0, ss = 0;
  for (float v : x) {
    s += v;
    ss += static_cast<double>(v) * v;
  }
  Vec acc = {2.0f};
  be->sum(view(acc), view(x));
  EXPECT_FLOAT_EQ(acc[0], static_cast<float>(2.0 + s));
  acc = {1.0f};
  be->sum_squares(view(acc), view(x));
  EXPECT_FLOAT_EQ(acc[0], static_cast<float>(1.0 + ss));
  be->scale(view(x), 0.5f);
  EXPECT_FLOAT_EQ(x[7], 0.5f * random_vector(n, 101)[7]);
}

TEST(CpuOps, AccumulateAddsElementwise) {
  auto be = make_cpu_backend();
  const Vec x = random_vector(50000, 101), before = random_vector(50000, 102);
  Vec y = before;
  be->accumulate(view(y), view(x));
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], before[i] + x[i]) << i;
}

TEST(CpuOps, AdamWMatchesScalarReference) {
  auto be = make_cpu_backend();
  const int n = 10;
  AdamWArgs a;
  a.lr = 1e-2f;
  a.weight_decay = 0.1f;
  a.grad_scale = 0.5f;
  Vec master = random_vector(n, 111), m(n), v(n), param(n);
  std::vector<double> ref_w(master.begin(), master.end()), ref_m(n), ref_v(n);
  for (int step = 1; step <= 3; ++step) {
    Vec grad = random_vector(n, 112 + step);
    a.bias_correction1 = 1 - std::pow(a.beta1, static_cast<float>(step));
    a.bias_correction2 = 1 - std::pow(a.beta2, static_cast<float>(step));
    be->adamw(view(param), view(master), view(m), view(v), view(grad), a);
    for (int i = 0; i < n; ++i) {
      const double g = static_cast<double>(grad[i]) * a.grad_scale;
      ref_w[i] *= 1.0 - static_cast<double>(a.lr) * a.weight_decay;
      ref_m[i] = a.beta1 * ref_m[i] + (1.0 - a.beta1) * g;
      ref_v[i] = a.beta2 * ref_v[i] + (1.0 - a.beta2) * g * g;
      const double denom = std::sqrt(ref_v[i]) / std::sqrt(static_cast<double>(a.bias_correction2)) + a.eps;
      ref_w[i] -= a.lr / a.bias_correction1 * ref_m[i] / denom;
      EXPECT_NEAR(master[i], ref_w[i], 1e-6) << "step " << step << " i " << i;
      EXPECT_NEAR(m[i], ref_m[i], 1e-6);
      EXPECT_NEAR(v[i], ref_v[i], 1e-7);
    }
    EXPECT_EQ(param, master);
  }
  // Without a param buffer only the master weights move.
  Vec before = master, grad = random_vector(n, 120);
  be->adamw(TensorView(), view(master), view(m), view(v), view(grad), a);
  EXPECT_NE(master, before);
}

// ---------------------------------------------------------------- determinism

// Runs fn with 1, 2 and 3 OpenMP threads; every run must produce the same bytes.
void expect_same_bits_across_threads(const std::function<std::vector<float>()>& fn) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Vec first = fn();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const Vec again = fn();
    ASSERT_EQ(again.size(), first.size());
    EXPECT_EQ(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)), 0) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(CpuDeterminism, MatmulSameBitsForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int N = 131, K = 70, M = 97;
  Vec in = random_vector(N * K, 121), w = random_vector(M * K, 122), bias = random_vector(M, 123);
  Vec dout = random_vector(N * M, 124);
  expect_same_bits_across_threads([&] {
    Vec out(N * M), din(N * K), dw(M * K), dbias(M);
    be->matmul_fwd(view(out), view(in), view(w), view(bias), N, K, M);
    be->matmul_bwd(view(din), view(dw), view(dbias), view(dout), view(in), view(w), N, K, M);
    Vec all = out;
    for (const Vec* v : {&din, &dw, &dbias}) all.insert(all.end(), v->begin(), v->end());
    return all;
  });
}

TEST(CpuDeterminism, AttentionSameBitsForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int B = 2, T = 37, NH = 3, HS = 16;
  const size_t n_act = static_cast<size_t>(B) * T * NH * HS;
  Vec qkv = random_vector(3 * n_act, 131), dout = random_vector(n_act, 132);
  expect_same_bits_across_threads([&] {
    Vec out(n_act), lse(B * NH * T), dqkv(3 * n_act);
    be->attention_fwd(view(out), view(lse), view(qkv), B, T, NH, NH, HS, nullptr);
    be->attention_bwd(view(dqkv), TensorView{}, view(dout), view(qkv), view(out), view(lse), B, T, NH, NH, HS, nullptr);
    Vec all = out;
    for (const Vec* v : {&lse, &dqkv}) all.insert(all.end(), v->begin(), v->end());
    return all;
  });
}

TEST(CpuDeterminism, NormEmbeddingAndSumsSameBitsForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int B = 4, T = 65, C = 130, V = 9, N = B * T;  // enough work to use the threads
  std::vector<int32_t> tokens(N);
  for (int n = 0; n < N; ++n) tokens[n] = (n * 5) % V;
  Vec in = random_vector(N * C, 141), w = random_vector(C, 142), b = random_vector(C, 143);
  Vec dout = random_vector(N * C, 144), big = random_vector(100000, 145);
  expect_same_bits_across_threads([&] {
    Vec out(N * C), mean(N), rstd(N), din(N * C), dw(C), db(C), dwte(V * C), dwpe(T * C), acc(1);
    be->layernorm_fwd(view(out), view(mean), view(rstd), view(in), view(w), view(b), N, C, 1e-5f);
    be->layernorm_bwd(view(din), view(dw), view(db), TensorView{}, view(dout), view(in), view(w), view(mean),
                      view(rstd), N, C);
    be->encoder_bwd(view(dwte), view(dwpe), view(dout), tokens.data(), B, T, C, 0, V, nullptr);
    be->sum_squares(view(acc), view(big));
    Vec all = out;
    for (const Vec* v : {&din, &dw, &db, &dwte, &dwpe, &acc}) all.insert(all.end(), v->begin(), v->end());
    return all;
  });
}

TEST(CpuDeterminism, LlamaOpsSameBitsForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int N = 260, C = 130, F = 130;            // enough work to use the threads
  const int B = 2, T = 37, NH = 4, NKV = 2, HS = 16;
  const size_t n_qkv = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS, n_act = static_cast<size_t>(B) * T * NH * HS;
  Vec in = random_vector(N * C, 251), w = random_vector(C, 252), dout = random_vector(N * C, 253);
  Vec gate_up = random_vector(2 * N * F, 254), dswi = random_vector(N * F, 255);
  Vec qkv = random_vector(n_qkv, 256), datt = random_vector(n_act, 257), table(T * HS);
  rope_table(table.data(), T, HS, 10000.0f);
  expect_same_bits_across_threads([&] {
    Vec out(N * C), rstd(N), din(N * C), dw(C), swi(N * F), dgate_up(2 * N * F);
    be->rmsnorm_fwd(view(out), view(rstd), view(in), view(w), N, C, 1e-5f);
    be->rmsnorm_bwd(view(din), view(dw), view(dout), view(in), view(w), view(rstd), N, C);
    be->swiglu_fwd(view(swi), view(gate_up), N, F);
    be->swiglu_bwd(view(dgate_up), view(dswi), view(gate_up), N, F);
    Vec rotated = qkv, att(n_act), lse(B * NH * T), dqkv(n_qkv);
    be->rope_fwd(view(rotated), view(table), B, T, NH, NKV, HS, 0, nullptr);
    be->attention_fwd(view(att), view(lse), view(rotated), B, T, NH, NKV, HS, nullptr);
    be->attention_bwd(view(dqkv), TensorView{}, view(datt), view(rotated), view(att), view(lse), B, T, NH, NKV, HS, nullptr);
    be->rope_bwd(view(dqkv), view(table), B, T, NH, NKV, HS, 0, nullptr);
    Vec all = out;
    for (const Vec* v : {&rstd, &din, &dw, &swi, &dgate_up, &rotated, &att, &lse, &dqkv})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  });
}

}  // namespace
}  // namespace trident
