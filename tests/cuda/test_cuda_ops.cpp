// CudaBackend against the CpuBackend oracle: every op on the same bf16-representable inputs
// with a per-op tolerance, and bit-determinism of the kernels that replace atomics.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"
#include "trident/backend/cuda_backend.hpp"
#include "trident/backend/peer_ops.hpp"
#include "trident/core/rng.hpp"

namespace trident {
namespace {

using test::random_vector;
using test::rel_l2;
using Vec = std::vector<float>;
using Ints = std::vector<int32_t>;

// The options of every backend these tests make: main() sets the attention kernels from
// --attention-kernels (ctest runs the attention tests once per engine).
CudaOptions g_options;
std::unique_ptr<Backend> test_backend() { return make_cuda_backend(0, g_options); }

// Tolerances are relative L2 errors against the fp32 CPU result computed from the same
// (bf16-rounded) inputs, so only arithmetic differs.
// bf16 keeps 8 significant bits: one round-to-nearest of an output costs at most 2^-9
// relative per element (rel_l2 about 1.1e-3 for spread-out values); 4e-3 = 2^-8 leaves margin.
constexpr double kOneRounding = 4e-3;
// fp32 outputs whose only difference is the order of fp32 additions (the CPU adds in double
// or in another order): a few ulps of the largest partial sums.
constexpr double kFp32Order = 1e-5;

constexpr const char* kSkipMessage = "no GPU: CUDA tests skipped";

// ---------------------------------------------------------------- tensors on two backends

Vec round_bf16(Vec x) {
  for (float& v : x) v = bf16_to_float(float_to_bf16(v));
  return x;
}

// An allocation of one backend with its element type.
struct Tensor {
  Buffer buf;
  DType dtype = DType::F32;
  size_t n = 0;
  TensorView view() const { return TensorView(buf.get(), dtype, n); }
  template <class T>
  const T* ptr() const {
    return static_cast<const T*>(buf.get());
  }
};

Tensor upload(Backend& be, const Vec& x, DType t) {
  Tensor out{Buffer(be, x.size() * dtype_size(t)), t, x.size()};
  if (t == DType::BF16) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = float_to_bf16(x[i]);
    be.copy_from_host(out.view(), h.data());
  } else {
    be.copy_from_host(out.view(), x.data());
  }
  return out;
}

Tensor upload_ints(Backend& be, const Ints& x) {
  Tensor out{Buffer(be, x.size() * sizeof(int32_t)), DType::I32, x.size()};
  be.copy_from_host(out.view(), x.data());
  return out;
}

Vec download(Backend& be, TensorView t) {
  Vec out(t.numel);
  if (t.dtype == DType::BF16) {
    std::vector<uint16_t> h(t.numel);
    be.copy_to_host(h.data(), t);
    for (size_t i = 0; i < t.numel; ++i) out[i] = bf16_to_float(h[i]);
  } else {
    be.copy_to_host(out.data(), t);
  }
  return out;
}

std::vector<unsigned char> download_bits(Backend& be, TensorView t) {
  std::vector<unsigned char> out(t.bytes());
  be.copy_to_host(out.data(), t);
  return out;
}

// The same values on both backends: fp32 on the CPU, bf16 or fp32 on the GPU. bf16 values are
// rounded first and the CPU gets the rounded values.
struct Both {
  Tensor cpu, gpu;
};

// A GPU tensor whose view starts one element into its allocation: 2 (bf16) or 4 (fp32) bytes
// past a 16-byte boundary, which rules out the kernels' 16-byte accesses.
struct Misaligned {
  Tensor alloc;
  TensorView view() const { return alloc.view().slice(1, alloc.n - 1); }
};

class CudaOps : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_device_count() == 0) {
      std::printf("%s\n", kSkipMessage);
      std::fflush(stdout);
      return;
    }
    gpu_be_ = test_backend().release();
  }
  static void TearDownTestSuite() {
    delete gpu_be_;
    gpu_be_ = nullptr;
  }
  void SetUp() override {
    if (!gpu_be_) GTEST_SKIP() << kSkipMessage;
    cpu_be_ = make_cpu_backend();
  }

  Backend& cpu() { return *cpu_be_; }
  Backend& gpu() { return *gpu_be_; }
  PeerOps& gpu_peer() { return peer_ops_of(*gpu_be_, "CudaOps"); }

  Both both(const Vec& x, DType gpu_dtype) {
    const Vec v = gpu_dtype == DType::BF16 ? round_bf16(x) : x;
    return Both{upload(cpu(), v, DType::F32), upload(gpu(), v, gpu_dtype)};
  }
  Both act(const Vec& x) { return both(x, DType::BF16); }  // activations and parameters
  Both f32(const Vec& x) { return both(x, DType::F32); }   // gradients, statistics, optimizer state
  Both ints(const Ints& x) { return Both{upload_ints(cpu(), x), upload_ints(gpu(), x)}; }

  // The values of x (rounded to bf16 for a bf16 tensor) in a misaligned GPU view.
  Misaligned misaligned(const Vec& x, DType t) {
    Vec padded(x.size() + 1, 0.0f);
    std::copy(x.begin(), x.end(), padded.begin() + 1);
    return Misaligned{upload(gpu(), t == DType::BF16 ? round_bf16(padded) : padded, t)};
  }

  // GPU result vs CPU result; prints every measured error so that margins are visible.
  void expect_close(const Both& t, double tol, const char* what) {
    expect_close(t.gpu.view(), t.cpu.view(), tol, what);
  }
  void expect_close(TensorView on_gpu, TensorView on_cpu, double tol, const char* what) {
    const Vec g = download(gpu(), on_gpu), c = download(cpu(), on_cpu);
    const double err = rel_l2(g, c);
    std::printf("    %-28s rel_l2 %.3g (tolerance %.3g)\n", what, err, tol);
    EXPECT_LE(err, tol) << what;  // also fails on NaN
  }

  // attention_bwd on both backends from the CPU forward's out and lse, with or without the bias
  // gradient (the kernels skip their column sums without it); docs: packed sequences' doc_start.
  // with_rope: RoPE's backward fused (the GPU kernels rotate dq and dk back before rounding; the
  // CPU calls rope_bwd after).
  void attention_bwd_both(int B, int T, int NH, int NKV, int HS, bool with_bias, const Both* docs = nullptr,
                          bool with_rope = false) {
    const size_t BTC = static_cast<size_t>(B) * T * NH * HS, C_qkv = static_cast<size_t>(NH + 2 * NKV) * HS;
    const size_t rows = static_cast<size_t>(B) * NH * T, BTC_qkv = static_cast<size_t>(B) * T * C_qkv;
    Both qkv = act(random_vector(BTC_qkv, 81, 2.0f));
    // out and lse of the CPU forward, given to both (out rounded to bf16 as the GPU stores it).
    Tensor cpu_out = upload(cpu(), Vec(BTC), DType::F32), cpu_lse = upload(cpu(), Vec(rows), DType::F32);
    cpu().attention_fwd(cpu_out.view(), cpu_lse.view(), qkv.cpu.view(), B, T, NH, NKV, HS,
                        docs ? docs->cpu.ptr<int32_t>() : nullptr);
    Both out = act(download(cpu(), cpu_out.view())), lse = f32(download(cpu(), cpu_lse.view()));
    Both dout = act(random_vector(BTC, 82));
    Both dqkv = act(Vec(BTC_qkv));
    Both dbias = f32(random_vector(C_qkv, 83));  // accumulates onto this
    Vec table_host(with_rope ? static_cast<size_t>(T) * HS : 1, 0.0f);
    if (with_rope) rope_table(table_host.data(), T, HS, 10000.0f);
    Both table = f32(table_host);
    for (Backend* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      const int32_t* doc_start = docs ? (g ? docs->gpu : docs->cpu).ptr<int32_t>() : nullptr;
      be->attention_bwd(v(dqkv), with_bias ? v(dbias) : TensorView{}, v(dout), v(qkv), v(out), v(lse), B, T, NH, NKV,
                        HS, doc_start, with_rope ? v(table) : TensorView{});
    }
    // Same formulas in fp32 on the same inputs (D = dout . out on both); the GPU rounds each
    // gradient once; exp() ulps and summation order add a little. The bias gradient sums the
    // rounded values on the GPU (the key part is ~0 on both: softmax ignores a key bias).
    expect_close(dqkv, 5e-3, with_rope ? "attention_bwd dqkv, rope" : "attention_bwd dqkv");
    if (with_bias) expect_close(dbias, 5e-3, "attention_bwd dbias");
  }

  static Backend* gpu_be_;
  std::unique_ptr<Backend> cpu_be_;
};

Backend* CudaOps::gpu_be_ = nullptr;

// Names the case in failure messages and above its printed error lines.
std::string announce(const std::string& what) {
  std::printf("  %s\n", what.c_str());
  return what;
}

float gelu_tanh(float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); }

// ---------------------------------------------------------------- memory and copies

TEST_F(CudaOps, PropertiesAndMemory) {
  auto be = test_backend();  // its own, so that peak_bytes() starts from zero
  EXPECT_EQ(be->compute_dtype(), DType::BF16);
  EXPECT_TRUE(be->is_device());
  EXPECT_NE(be->stream().handle, nullptr);

  void* a = be->alloc(1000);
  void* b = be->alloc(24);
  std::vector<unsigned char> bytes(1000, 1);
  be->copy_to_host(bytes.data(), TensorView(a, DType::I32, 250));
  EXPECT_EQ(bytes, std::vector<unsigned char>(1000, 0)) << "alloc() must zero-fill";
  be->release(a);
  void* c = be->alloc(500);
  EXPECT_EQ(be->peak_bytes(), 1024u);  // 1000 + 24 live at once; 24 + 500 later is less
  be->release(b);
  be->release(c);

  Tensor t = upload(gpu(), {1.0f, 2.0f, 3.0f}, DType::F32);
  gpu().zero(t.view());
  EXPECT_EQ(download(gpu(), t.view()), Vec(3, 0.0f));
}

// trident bench reports each GPU's SM clock, power and temperature over the timed steps.
TEST_F(CudaOps, TelemetryReadsClockAndPower) {
  gpu().start_telemetry();
  // ~0.3 s of work: copies of 256 MB (a sampler whose thread never woke would give only the two
  // samples of start and stop).
  const size_t bytes = size_t(256) << 20;
  Buffer from(gpu(), bytes), to(gpu(), bytes);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < until) {
    gpu().copy(to.view(DType::F32), from.view(DType::F32));
    gpu().synchronize();
  }
  const GpuTelemetry s = gpu().stop_telemetry();
  // Only a machine without the driver's NVML may skip; any other failure to sample is a fault.
  if (s.count == 0 && s.note.find("not found") != std::string::npos) GTEST_SKIP() << s.note;
  ASSERT_GT(s.count, 0) << s.note;
  EXPECT_GE(s.count, 3);
  EXPECT_GT(s.sm_mhz_min, 0.0);
  EXPECT_LE(s.sm_mhz_min, s.sm_mhz_median);
  EXPECT_LT(s.sm_mhz_median, 5000.0);
  EXPECT_GT(s.power_w_median, 0.0);
  EXPECT_LT(s.power_w_median, 5000.0);
  // A second round starts afresh; even an empty window has its two ends.
  gpu().start_telemetry();
  EXPECT_GE(gpu().stop_telemetry().count, 2);
}

TEST_F(CudaOps, CopyConvertsDtypes) {
  // Ties and near-ties of the bf16 rounding, signed zero, tiny and huge values.
  Vec src = random_vector(1001, 1, 3.0f);
  const Vec specials = {0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.0f / 512, -1e-30f, 3e38f};
  std::copy(specials.begin(), specials.end(), src.begin());
  Tensor f = upload(gpu(), src, DType::F32);
  Tensor h{Buffer(gpu(), src.size() * 2), DType::BF16, src.size()};
  gpu().copy(h.view(), f.view());
  std::vector<uint16_t> bits(src.size());
  gpu().copy_to_host(bits.data(), h.view());
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(bits[i], float_to_bf16(src[i])) << "element " << i;

  Tensor back{Buffer(gpu(), src.size() * 4), DType::F32, src.size()};
  gpu().copy(back.view(), h.view());
  EXPECT_EQ(download(gpu(), back.view()), round_bf16(src));

  Tensor same{Buffer(gpu(), src.size() * 4), DType::F32, src.size()};
  gpu().copy(same.view(), f.view());
  EXPECT_EQ(download(gpu(), same.view()), src);
}

// ---------------------------------------------------------------- embedding

struct EncoderCase {
  int B, T, C, vocab_start, v_local;
  bool wpe;
};

TEST_F(CudaOps, EncoderFwd) {
  for (const EncoderCase& k : {EncoderCase{2, 37, 96, 384, 384, true}, EncoderCase{3, 16, 64, 0, 128, false}}) {
    SCOPED_TRACE(announce(str("B=", k.B, " T=", k.T, " C=", k.C)));
    const int N = k.B * k.T, block = k.T + 3;  // the position table may be longer than T
    Ints tokens(N);
    for (int n = 0; n < N; ++n) tokens[n] = static_cast<int32_t>(hash3(2, 0, n) % (k.vocab_start + 2 * k.v_local));
    Both tok = ints(tokens);
    Both wte = act(random_vector(static_cast<size_t>(k.v_local) * k.C, 3));
    Both wpe = act(random_vector(static_cast<size_t>(block) * k.C, 4));
    Both out = act(Vec(static_cast<size_t>(N) * k.C));
    cpu().encoder_fwd(out.cpu.view(), tok.cpu.ptr<int32_t>(), wte.cpu.view(), k.wpe ? wpe.cpu.view() : TensorView(),
                      k.B, k.T, k.C, k.vocab_start, k.v_local, nullptr);
    gpu().encoder_fwd(out.gpu.view(), tok.gpu.ptr<int32_t>(), wte.gpu.view(), k.wpe ? wpe.gpu.view() : TensorView(),
                      k.B, k.T, k.C, k.vocab_start, k.v_local, nullptr);
    expect_close(out, kOneRounding, "encoder_fwd out");  // exact fp32 sum of two bf16, one rounding
  }
}

TEST_F(CudaOps, EncoderBwd) {
  for (const EncoderCase& k : {EncoderCase{2, 37, 96, 384, 384, true}, EncoderCase{4, 32, 64, 0, 128, false}}) {
    SCOPED_TRACE(announce(str("B=", k.B, " T=", k.T, " C=", k.C)));
    const int N = k.B * k.T;
    // Tokens just around this shard's start: many repeats, some belonging to other ranks.
    Ints tokens(N);
    for (int n = 0; n < N; ++n) tokens[n] = k.vocab_start - 5 + static_cast<int32_t>(hash3(5, 0, n) % 30);
    Both tok = ints(tokens);
    Both dout = act(random_vector(static_cast<size_t>(N) * k.C, 6));
    Both dwte = f32(random_vector(static_cast<size_t>(k.v_local) * k.C, 7));  // += onto earlier micro-batches
    Both dwpe = f32(random_vector(static_cast<size_t>(k.T) * k.C, 8));
    cpu().encoder_bwd(dwte.cpu.view(), k.wpe ? dwpe.cpu.view() : TensorView(), dout.cpu.view(), tok.cpu.ptr<int32_t>(),
                      k.B, k.T, k.C, k.vocab_start, k.v_local, nullptr);
    gpu().encoder_bwd(dwte.gpu.view(), k.wpe ? dwpe.gpu.view() : TensorView(), dout.gpu.view(), tok.gpu.ptr<int32_t>(),
                      k.B, k.T, k.C, k.vocab_start, k.v_local, nullptr);
    // fp32 sums of the same bf16 rows; only the association differs.
    expect_close(dwte, kFp32Order, "encoder_bwd dwte");
    expect_close(dwpe, kFp32Order, "encoder_bwd dwpe");
  }
}

// ---------------------------------------------------------------- LayerNorm

struct RowsCase {
  int N, C;
};

Vec residual_stream(size_t n, uint64_t seed) {
  Vec x = random_vector(n, seed, 2.0f);
  for (float& v : x) v += 1.5f;  // a mean far from 0, as in a residual stream
  return x;
}

Vec near_one(size_t n, uint64_t seed) {
  Vec x = random_vector(n, seed, 0.2f);
  for (float& v : x) v += 1.0f;
  return x;
}

// C from 2,056 to 8,192 takes the wide rows' kernels (a block per row; 2, 2, 3, 3, 4 and 4 pieces
// per thread: 2056's and 6152's last piece one thread wide, 5000's 113 threads), 8200 the warp per
// row again.
const RowsCase kLayerNormCases[] = {{37, 96},  {64, 768}, {5, 37},  {9, 2056}, {33, 4096},
                                    {6, 5000}, {7, 6144}, {7, 6152}, {3, 8192}, {2, 8200}};

TEST_F(CudaOps, LayerNormFwd) {
  for (const RowsCase& k : kLayerNormCases) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both in = act(residual_stream(NC, 11));
    Both w = act(near_one(k.C, 12)), b = act(random_vector(k.C, 13, 0.1f));
    Both out = act(Vec(NC)), mean = f32(Vec(k.N)), rstd = f32(Vec(k.N));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->layernorm_fwd(v(out), v(mean), v(rstd), v(in), v(w), v(b), k.N, k.C, 1e-5f);
    }
    expect_close(out, kOneRounding, "layernorm_fwd out");  // fp32 math, one rounding
    expect_close(mean, kFp32Order, "layernorm_fwd mean");  // fp32 vs double sums over C
    expect_close(rstd, kFp32Order, "layernorm_fwd rstd");
  }
}

TEST_F(CudaOps, AddLayerNormFwd) {
  // The fused residual add: sum = a + residual (here in place over a, as the model calls it),
  // then LayerNorm(sum). The CPU composes add and layernorm_fwd.
  for (const RowsCase& k : kLayerNormCases) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both a = act(residual_stream(NC, 14)), residual = act(residual_stream(NC, 15));
    Both w = act(near_one(k.C, 16)), b = act(random_vector(k.C, 17, 0.1f));
    Both out = act(Vec(NC)), mean = f32(Vec(k.N)), rstd = f32(Vec(k.N));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->add_layernorm_fwd(v(a), v(out), v(mean), v(rstd), v(a), v(residual), v(w), v(b), k.N, k.C, 1e-5f);
    }
    expect_close(a, kOneRounding, "add_layernorm_fwd sum");      // one rounding of the sum
    expect_close(out, 2 * kOneRounding, "add_layernorm_fwd out");  // the rounded sum, then one more rounding
    expect_close(mean, kOneRounding, "add_layernorm_fwd mean");   // statistics of the bf16-rounded sum
    expect_close(rstd, kOneRounding, "add_layernorm_fwd rstd");
  }
}

TEST_F(CudaOps, LayerNormBwd) {
  // C % 8 == 0 takes the 16-byte path, C = 37 the scalar one; N = 1100 gives the dw/db column
  // sums more chunks of rows than the final fixed-order sum has warps. C = 256, 768 and 1024
  // (whole 256-column groups) take the fused single-pass kernel, the last chunk of N = 1100 and
  // N = 200 partly filled; so do C = 1536 (6 groups, one block per multiprocessor), 1600 (7
  // groups, the last one a quarter filled) and 2048 (8 groups); C = 2056 to 8192 the wide rows'
  // kernel (a block per chunk of ceil(N / 256) rows, the column sums in shared memory; N = 1001
  // makes 251 chunks of 4, the last one of 1; C = 5000 a last piece 113 threads wide, 2056 one
  // thread wide), 8200 the separate kernels again. Every shape runs with dsum (its own kernel on
  // the fused path), with din_keep (the residual gradient before the update, the weight pass's
  // operand: exactly din's old values on every path, the fused and wide kernels storing the rows
  // they load, the others copying first), with both and with neither.
  for (const RowsCase& k : {RowsCase{37, 96}, RowsCase{64, 768}, RowsCase{130, 40}, RowsCase{21, 37},
                            RowsCase{1100, 48}, RowsCase{1100, 256}, RowsCase{200, 1024}, RowsCase{77, 1536},
                            RowsCase{77, 1600}, RowsCase{45, 2048}, RowsCase{30, 2056}, RowsCase{1001, 4096},
                            RowsCase{40, 5000}, RowsCase{70, 6144}, RowsCase{9, 8192}, RowsCase{5, 8200}})
  for (const auto& [with_sum, with_keep] :
       {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}, std::pair{false, false}}) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C, with_sum ? " with dsum" : "", with_keep ? " with din_keep" : "")));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both in = act(residual_stream(NC, 21));
    Both w = act(near_one(k.C, 22)), b = act(random_vector(k.C, 23, 0.1f));
    // Statistics from the CPU forward, given to both.
    Tensor cpu_out = upload(cpu(), Vec(NC), DType::F32);
    Tensor cpu_mean = upload(cpu(), Vec(k.N), DType::F32), cpu_rstd = upload(cpu(), Vec(k.N), DType::F32);
    cpu().layernorm_fwd(cpu_out.view(), cpu_mean.view(), cpu_rstd.view(), in.cpu.view(), w.cpu.view(), b.cpu.view(),
                        k.N, k.C, 1e-5f);
    Both mean = f32(download(cpu(), cpu_mean.view())), rstd = f32(download(cpu(), cpu_rstd.view()));
    Both dout = act(random_vector(NC, 24));
    Both din = act(random_vector(NC, 25));  // din_accum: the residual gradient already there
    Both dw = f32(random_vector(k.C, 26)), db = f32(random_vector(k.C, 27)), dsum = f32(random_vector(k.C, 28));
    Both keep = act(Vec(NC));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->layernorm_bwd(v(din), v(dw), v(db), with_sum ? v(dsum) : TensorView{}, v(dout), v(in), v(w), v(mean),
                        v(rstd), k.N, k.C, with_keep ? v(keep) : TensorView{});
    }
    expect_close(din, kOneRounding, "layernorm_bwd din_accum");  // fp32 sum, one rounding
    if (with_keep) {
      expect_close(keep, 0.0, "layernorm_bwd din_keep");
      EXPECT_EQ(download(gpu(), keep.gpu.view()), round_bf16(random_vector(NC, 25))) << "din_keep: din's old values";
    }
    // fp32 column sums over N rows against double sums.
    expect_close(dw, 1e-4, "layernorm_bwd dw");
    expect_close(db, 1e-4, "layernorm_bwd db");
    // The GPU sums din_accum as stored (bf16): its rounding errors carry into the column sums.
    if (with_sum) expect_close(dsum, kOneRounding, "layernorm_bwd dsum");
  }
}

// ---------------------------------------------------------------- elementwise

TEST_F(CudaOps, AddAndGelu) {
  const size_t n = 37 * 96 + 1;
  Both a = act(random_vector(n, 31, 4.0f)), b = act(random_vector(n, 32)), dout = act(random_vector(n, 33));
  Both sum = act(Vec(n)), gelu = act(Vec(n)), dgelu = act(Vec(n));
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    be->add(v(sum), v(a), v(b));
    be->gelu_fwd(v(gelu), v(a));
    be->gelu_bwd(v(dgelu), v(dout), v(a));
  }
  // fp32 math (tanhf vs std::tanh differ by ulps), one rounding of the output.
  expect_close(sum, kOneRounding, "add");
  expect_close(gelu, kOneRounding, "gelu_fwd");
  expect_close(dgelu, kOneRounding, "gelu_bwd");
}

// ---------------------------------------------------------------- GEMMs

struct GemmCase {
  int N, K, M;
};

const GemmCase kGemmCases[] = {{37, 96, 288}, {64, 768, 256}, {128, 64, 40}, {1, 32, 64}};

TEST_F(CudaOps, MatmulFwd) {
  for (const GemmCase& k : kGemmCases) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(announce(str("N=", k.N, " K=", k.K, " M=", k.M, " bias=", with_bias)));
      Both in = act(random_vector(static_cast<size_t>(k.N) * k.K, 41));
      Both w = act(random_vector(static_cast<size_t>(k.M) * k.K, 42, 1.0f / std::sqrt(static_cast<float>(k.K))));
      Both bias = act(random_vector(k.M, 43, 0.5f));
      Both out = act(Vec(static_cast<size_t>(k.N) * k.M));
      cpu().matmul_fwd(out.cpu.view(), in.cpu.view(), w.cpu.view(), with_bias ? bias.cpu.view() : TensorView(), k.N,
                       k.K, k.M);
      gpu().matmul_fwd(out.gpu.view(), in.gpu.view(), w.gpu.view(), with_bias ? bias.gpu.view() : TensorView(), k.N,
                       k.K, k.M);
      expect_close(out, kOneRounding, "matmul_fwd out");  // fp32 accumulation, one rounding
    }
  }
}

TEST_F(CudaOps, MatmulGeluFwd) {
  for (const GemmCase& k : kGemmCases) {
    for (bool with_bias : {true, false}) {
      SCOPED_TRACE(announce(str("N=", k.N, " K=", k.K, " M=", k.M, " bias=", with_bias)));
      Both in = act(random_vector(static_cast<size_t>(k.N) * k.K, 51));
      Both w = act(random_vector(static_cast<size_t>(k.M) * k.K, 52, 2.0f / std::sqrt(static_cast<float>(k.K))));
      Both bias = act(random_vector(k.M, 53, 0.5f));
      Both out = act(Vec(static_cast<size_t>(k.N) * k.M)), pre = act(Vec(static_cast<size_t>(k.N) * k.M));
      cpu().matmul_gelu_fwd(out.cpu.view(), pre.cpu.view(), in.cpu.view(), w.cpu.view(),
                            with_bias ? bias.cpu.view() : TensorView(), k.N, k.K, k.M);
      gpu().matmul_gelu_fwd(out.gpu.view(), pre.gpu.view(), in.gpu.view(), w.gpu.view(),
                            with_bias ? bias.gpu.view() : TensorView(), k.N, k.K, k.M);
      expect_close(pre, kOneRounding, "matmul_gelu_fwd pre");
      // Fused: gelu of the fp32 sum, one rounding. Unfused: gelu of the rounded pre, so up to
      // two roundings; still inside 2^-8 in the L2 sense.
      expect_close(out, kOneRounding, "matmul_gelu_fwd out");
    }
  }
}

// The fused epilogue must be the tanh approximation: at x = -3 it is 11% away from the erf
// form (-0.003637 vs -0.004050) while bf16 rounding costs 0.4%.
TEST_F(CudaOps, MatmulGeluIsTanhApproximation) {
  const int N = 16, K = 8, M = 64;
  Tensor in = upload(gpu(), Vec(N * K, 1.0f), DType::BF16);
  Tensor w = upload(gpu(), Vec(M * K, -0.375f), DType::BF16);  // every pre-activation is exactly -3
  Tensor bias = upload(gpu(), Vec(M, 0.0f), DType::BF16);
  Tensor out = upload(gpu(), Vec(N * M), DType::BF16), pre = upload(gpu(), Vec(N * M), DType::BF16);
  for (bool with_bias : {true, false}) {
    gpu().matmul_gelu_fwd(out.view(), pre.view(), in.view(), w.view(), with_bias ? bias.view() : TensorView(), N, K, M);
    const float expected = gelu_tanh(-3.0f);
    for (float x : download(gpu(), pre.view())) ASSERT_EQ(x, -3.0f);
    for (float y : download(gpu(), out.view())) ASSERT_NEAR(y, expected, 0.01f * std::fabs(expected)) << with_bias;
  }
}

TEST_F(CudaOps, MatmulBwd) {
  for (const GemmCase& k : kGemmCases) {
    for (bool all_outputs : {true, false}) {
      SCOPED_TRACE(announce(str("N=", k.N, " K=", k.K, " M=", k.M, " all=", all_outputs)));
      Both in = act(random_vector(static_cast<size_t>(k.N) * k.K, 61));
      Both w = act(random_vector(static_cast<size_t>(k.M) * k.K, 62, 1.0f / std::sqrt(static_cast<float>(k.K))));
      Both dout = act(random_vector(static_cast<size_t>(k.N) * k.M, 63));
      Both din = act(Vec(static_cast<size_t>(k.N) * k.K));
      Both dw = f32(random_vector(static_cast<size_t>(k.M) * k.K, 64));  // += onto earlier micro-batches
      Both dbias = f32(random_vector(k.M, 65));
      for (auto* be : {&cpu(), &gpu()}) {
        const bool g = be == &gpu();
        auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
        be->matmul_bwd(all_outputs ? v(din) : TensorView(), v(dw), all_outputs ? v(dbias) : TensorView(), v(dout),
                       v(in), v(w), k.N, k.K, k.M);
      }
      if (all_outputs) {
        expect_close(din, kOneRounding, "matmul_bwd din");    // fp32 accumulation, one rounding
        expect_close(dbias, kFp32Order, "matmul_bwd dbias");  // fp32 column sums vs double
      }
      // Exact bf16 products summed in fp32 by tensor cores in their own order.
      expect_close(dw, 1e-4, "matmul_bwd dw");
    }
  }
}

// The backward through the GELU: cuBLASLt's DGELU epilogue where K % 8 == 0 (the last case
// takes the unfused GEMM + gelu_bwd path).
TEST_F(CudaOps, MatmulGeluBwd) {
  std::vector<GemmCase> cases(std::begin(kGemmCases), std::end(kGemmCases));
  cases.push_back({16, 36, 24});
  for (const GemmCase& k : cases) {
    SCOPED_TRACE(announce(str("N=", k.N, " K=", k.K, " M=", k.M)));
    const size_t NK = static_cast<size_t>(k.N) * k.K;
    Both in = act(random_vector(NK, 66));
    Both pre = act(random_vector(NK, 67, 2.0f));
    Both w = act(random_vector(static_cast<size_t>(k.M) * k.K, 68, 1.0f / std::sqrt(static_cast<float>(k.K))));
    Both dout = act(random_vector(static_cast<size_t>(k.N) * k.M, 69));
    Both din = act(Vec(NK));
    Both dw = f32(random_vector(static_cast<size_t>(k.M) * k.K, 70));
    Both dbias = f32(random_vector(k.M, 71));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->matmul_gelu_bwd(v(din), v(dw), v(dbias), v(dout), v(in), v(w), v(pre), k.N, k.K, k.M);
    }
    // Fused: one rounding of the product; unfused: the GEMM output is rounded before gelu'.
    expect_close(din, 2 * kOneRounding, "matmul_gelu_bwd din");
    expect_close(dbias, kFp32Order, "matmul_gelu_bwd dbias");
    expect_close(dw, 1e-4, "matmul_gelu_bwd dw");
  }
}

// ---------------------------------------------------------------- attention

struct AttentionCase {
  int B, T, NH, NKV, HS;
};

std::string describe(const AttentionCase& k) {
  return str("B=", k.B, " T=", k.T, " NH=", k.NH, " NKV=", k.NKV, " HS=", k.HS);
}

// Elements of qkv (B, T, NH + 2 NKV, HS) and of out (B, T, NH, HS).
size_t qkv_elems(const AttentionCase& k) { return static_cast<size_t>(k.B) * k.T * (k.NH + 2 * k.NKV) * k.HS; }
size_t out_elems(const AttentionCase& k) { return static_cast<size_t>(k.B) * k.T * k.NH * k.HS; }

// HS 64 and 128 run on the tensor-core kernels (64-row tiles: T = 1024 fills them, T = 1000,
// 37 and 1 end inside one), every other head size on the generic ones. Multi-head (NKV = NH)
// first, then grouped-query attention with 2, 4 and 8 query heads per key/value head on each
// kind of kernel (one case with Llama-3.2-1B's 32 query and 8 key/value heads). The backward
// takes the bias gradient on every other case.
const AttentionCase kAttentionCases[] = {
    {2, 37, 3, 3, 4},      {2, 37, 2, 2, 32},    {1, 37, 2, 2, 64},    {1, 37, 2, 2, 128},  {2, 64, 2, 2, 64},
    {1, 1, 1, 1, 32},      {1, 19, 2, 2, 1},     {1, 70, 1, 1, 37},    {1, 1, 1, 1, 64},    {1, 1024, 2, 2, 64},
    {1, 1000, 2, 2, 64},   {1, 1024, 2, 2, 128}, {1, 1000, 2, 2, 128}, {2, 37, 8, 4, 64},   {1, 100, 8, 2, 64},
    {1, 200, 8, 1, 64},    {2, 37, 8, 4, 128},   {1, 100, 8, 2, 128},  {1, 200, 8, 1, 128}, {1, 520, 32, 8, 64},
    {2, 37, 4, 2, 32},     {1, 70, 8, 2, 37},    {1, 150, 8, 1, 37},   {1, 1, 8, 1, 64}};

TEST_F(CudaOps, AttentionFwd) {
  for (const AttentionCase& k : kAttentionCases) {
    SCOPED_TRACE(announce(describe(k)));
    Both qkv = act(random_vector(qkv_elems(k), 71, 2.0f));  // large enough for peaked softmax rows
    Both out = act(Vec(out_elems(k))), lse = f32(Vec(static_cast<size_t>(k.B) * k.NH * k.T));
    cpu().attention_fwd(out.cpu.view(), lse.cpu.view(), qkv.cpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    gpu().attention_fwd(out.gpu.view(), lse.gpu.view(), qkv.gpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    // fp32 online softmax vs the CPU's two-pass one (expf/exp ulps), one rounding of out.
    expect_close(out, kOneRounding, "attention_fwd out");
    expect_close(lse, kFp32Order, "attention_fwd lse");
  }
}

TEST_F(CudaOps, AttentionBwd) {
  for (const AttentionCase& k : kAttentionCases) {
    const bool with_bias = (&k - kAttentionCases) % 2 == 0;
    SCOPED_TRACE(announce(describe(k) + (with_bias ? " with dbias" : "")));
    attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, with_bias);
    if (!with_bias && k.HS % 2 == 0) attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, false, nullptr, true);
  }
}

// doc_start (B, T) of packed sequences whose documents take 1 to max_len positions (drawn per
// document), so that some span several 64-row blocks and several start inside one.
Ints packed_doc_start(int B, int T, int max_len, uint64_t seed) {
  Ints docs(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0, start = 0, doc = 0, len = 0; t < T; ++t) {
      if (t == start + len) start = t, len = 1 + static_cast<int>(hash3(seed, b, doc++) % max_len);
      docs[static_cast<size_t>(b) * T + t] = start;
    }
  return docs;
}

// Document masking (packed sequences) on every kernel family: the tensor-core kernels at HS 64 and
// 128 (on Hopper the wgmma forward replaces the warp-specialized one), the generic kernels at the
// other head sizes, multi-head and grouped-query; long documents skip whole key blocks.
TEST_F(CudaOps, PackedAttention) {
  for (const AttentionCase& k : {AttentionCase{2, 37, 3, 3, 4}, AttentionCase{2, 300, 2, 2, 32},
                                 AttentionCase{1, 1024, 2, 2, 64}, AttentionCase{1, 1000, 2, 2, 128},
                                 AttentionCase{2, 300, 8, 2, 64}, AttentionCase{1, 520, 32, 8, 64},
                                 AttentionCase{2, 200, 8, 1, 128}, AttentionCase{1, 150, 8, 2, 37}}) {
    for (const int max_len : {5, 200}) {
      SCOPED_TRACE(announce(describe(k) + str(" documents of up to ", max_len)));
      Both docs = ints(packed_doc_start(k.B, k.T, max_len, 73));
      Both qkv = act(random_vector(qkv_elems(k), 74, 2.0f));
      Both out = act(Vec(out_elems(k))), lse = f32(Vec(static_cast<size_t>(k.B) * k.NH * k.T));
      cpu().attention_fwd(out.cpu.view(), lse.cpu.view(), qkv.cpu.view(), k.B, k.T, k.NH, k.NKV, k.HS,
                          docs.cpu.ptr<int32_t>());
      gpu().attention_fwd(out.gpu.view(), lse.gpu.view(), qkv.gpu.view(), k.B, k.T, k.NH, k.NKV, k.HS,
                          docs.gpu.ptr<int32_t>());
      expect_close(out, kOneRounding, "packed attention_fwd out");
      expect_close(lse, kFp32Order, "packed attention_fwd lse");
      attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, max_len == 5, &docs);
      if (max_len != 5 && k.HS % 2 == 0) attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, false, &docs, true);
    }
  }
}

// Packed sequences' positions restart in each document: the learned position embedding (forward,
// and its gradient sorted by position) and RoPE on both of its paths.
TEST_F(CudaOps, PackedPositions) {
  const int B = 3, T = 70, C = 64, V = 50, HS = 64, NH = 4, NKV = 2;
  Both docs = ints(packed_doc_start(B, T, 20, 75));
  Ints tokens(B * T);
  for (int n = 0; n < B * T; ++n) tokens[n] = static_cast<int32_t>(hash3(76, 0, n) % V);
  Both tok = ints(tokens), wte = act(random_vector(V * C, 77)), wpe = act(random_vector(T * C, 78));
  Both out = act(Vec(B * T * C)), dout = act(random_vector(B * T * C, 79));
  Both dwte = f32(random_vector(V * C, 80)), dwpe = f32(random_vector(T * C, 81));
  Vec table_host(static_cast<size_t>(T) * HS);
  rope_table(table_host.data(), T, HS, 10000.0f);
  const size_t n = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
  Both table = f32(table_host), x = act(random_vector(n, 82, 2.0f)), dx = act(random_vector(n, 83));
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    auto p = [&](const Both& t) { return (g ? t.gpu : t.cpu).ptr<int32_t>(); };
    be->encoder_fwd(v(out), p(tok), v(wte), v(wpe), B, T, C, 0, V, p(docs));
    be->encoder_bwd(v(dwte), v(dwpe), v(dout), p(tok), B, T, C, 0, V, p(docs));
    be->rope_fwd(v(x), v(table), B, T, NH, NKV, HS, 0, p(docs));
    be->rope_bwd(v(dx), v(table), B, T, NH, NKV, HS, 0, p(docs));
  }
  expect_close(out, kOneRounding, "packed encoder_fwd out");
  expect_close(dwte, kFp32Order, "packed encoder_bwd dwte");
  expect_close(dwpe, kFp32Order, "packed encoder_bwd dwpe");
  expect_close(x, kOneRounding, "packed rope_fwd");
  expect_close(dx, kOneRounding, "packed rope_bwd");
}

// More work items than a GPU has multiprocessors: the persistent kernels' blocks take several,
// so their stage rings and per-item buffers go round across items (and T = 448 is not a
// multiple of their 128-row tiles); with 4 query heads per key/value head as well.
TEST_F(CudaOps, AttentionManyItemsPerBlock) {
  for (const AttentionCase& k :
       {AttentionCase{3, 512, 32, 32, 64}, AttentionCase{2, 448, 48, 48, 64}, AttentionCase{2, 448, 32, 8, 64}}) {
    SCOPED_TRACE(announce(describe(k)));
    Both qkv = act(random_vector(qkv_elems(k), 72, 2.0f));
    Both out = act(Vec(out_elems(k))), lse = f32(Vec(static_cast<size_t>(k.B) * k.NH * k.T));
    cpu().attention_fwd(out.cpu.view(), lse.cpu.view(), qkv.cpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    gpu().attention_fwd(out.gpu.view(), lse.gpu.view(), qkv.gpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    expect_close(out, kOneRounding, "attention_fwd out");
    expect_close(lse, kFp32Order, "attention_fwd lse");
    attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, k.T == 448);
  }
}

// HS = 64 views off a 16-byte boundary fall back from the tensor-core kernels to the generic ones
// (with one key/value head per query head and with one for both).
TEST_F(CudaOps, AttentionOnMisalignedViews) {
  for (const int NKV : {2, 1}) {
    const AttentionCase k{1, 70, 2, NKV, 64};
    SCOPED_TRACE(announce(describe(k)));
    const size_t rows = static_cast<size_t>(k.B) * k.NH * k.T, C_qkv = static_cast<size_t>(k.NH + 2 * k.NKV) * k.HS;
    const Vec qkv_values = random_vector(qkv_elems(k), 161, 2.0f);
    Both qkv = act(qkv_values);
    Misaligned qkv_m = misaligned(qkv_values, DType::BF16);
    Both out = act(Vec(out_elems(k))), lse = f32(Vec(rows));
    Misaligned out_m = misaligned(Vec(out_elems(k)), DType::BF16);
    cpu().attention_fwd(out.cpu.view(), lse.cpu.view(), qkv.cpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    gpu().attention_fwd(out_m.view(), lse.gpu.view(), qkv_m.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    expect_close(out_m.view(), out.cpu.view(), kOneRounding, "attention_fwd out");
    expect_close(lse, kFp32Order, "attention_fwd lse");

    // Backward from the CPU's out (rounded to bf16) and lse on both, as in AttentionBwd.
    const Vec out_values = download(cpu(), out.cpu.view()), dout_values = random_vector(out_elems(k), 162);
    Both out_r = act(out_values), lse_r = f32(download(cpu(), lse.cpu.view()));
    Both dout = act(dout_values), dqkv = act(Vec(qkv_elems(k)));
    Misaligned out_rm = misaligned(out_values, DType::BF16), dout_m = misaligned(dout_values, DType::BF16),
               dqkv_m = misaligned(Vec(qkv_elems(k)), DType::BF16);
    Both dbias = f32(random_vector(C_qkv, 163));
    cpu().attention_bwd(dqkv.cpu.view(), dbias.cpu.view(), dout.cpu.view(), qkv.cpu.view(), out_r.cpu.view(),
                        lse_r.cpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    gpu().attention_bwd(dqkv_m.view(), dbias.gpu.view(), dout_m.view(), qkv_m.view(), out_rm.view(),
                        lse_r.gpu.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
    expect_close(dqkv_m.view(), dqkv.cpu.view(), 5e-3, "attention_bwd dqkv");
    expect_close(dbias, 5e-3, "attention_bwd dbias (generic kernels, then a column sum)");
  }
}

struct DecodeCase {
  int B, NH, NKV, HS, Tmax, prefill, steps;
};

// The rows table of attention_decode for Tn new positions [past, past + Tn) of each of B
// sequences, sequence b in cache slot b: token b Tn + t at (b, past + t).
Ints decode_rows(int B, int Tn, int past) {
  Ints rows;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) rows.insert(rows.end(), {b, past + t});
  return rows;
}

// Prefill, then one token at a time, on both backends: every step's output and, at the end,
// both caches (copies of the same bf16 values: exact). The later cases share each key/value
// head among 2, 4 and 8 query heads; the last two have enough sequences that a block serves a
// whole group of query heads (4, and 16 in two parts of 8) rather than one.
TEST_F(CudaOps, AttentionDecode) {
  for (const DecodeCase& k :
       {DecodeCase{2, 3, 3, 64, 50, 17, 6}, DecodeCase{1, 2, 2, 37, 40, 1, 5}, DecodeCase{1, 1, 1, 128, 4096, 4000, 3},
        DecodeCase{2, 2, 2, 1, 12, 5, 7}, DecodeCase{2, 8, 4, 64, 50, 17, 6}, DecodeCase{1, 8, 2, 128, 300, 260, 3},
        DecodeCase{2, 8, 1, 37, 40, 9, 5}, DecodeCase{160, 8, 2, 64, 40, 9, 2}, DecodeCase{300, 16, 1, 64, 20, 5, 2}}) {
    SCOPED_TRACE(announce(str("B=", k.B, " NH=", k.NH, " NKV=", k.NKV, " HS=", k.HS, " Tmax=", k.Tmax,
                              " prefill=", k.prefill, " steps=", k.steps)));
    const size_t C = static_cast<size_t>(k.NH) * k.HS, C_qkv = static_cast<size_t>(k.NH + 2 * k.NKV) * k.HS;
    const size_t cache = static_cast<size_t>(k.B) * k.Tmax * k.NKV * k.HS;
    // Caches start with values at every position: a decode step must only read those it wrote.
    Both k_cache = act(random_vector(cache, 171)), v_cache = act(random_vector(cache, 172));
    int past = 0;
    for (int step = 0; step <= k.steps; ++step) {
      const int Tn = step == 0 ? k.prefill : 1, N = k.B * Tn;
      Both qkv = act(random_vector(static_cast<size_t>(N) * C_qkv, 173 + step, 2.0f)), out = act(Vec(N * C));
      Both rows = ints(decode_rows(k.B, Tn, past));
      for (auto* be : {&cpu(), &gpu()}) {
        const bool g = be == &gpu();
        auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
        be->attention_decode(v(out), v(k_cache), v(v_cache), v(qkv), (g ? rows.gpu : rows.cpu).ptr<int32_t>(), N,
                             k.B, k.Tmax, k.NH, k.NKV, k.HS);
      }
      expect_close(out, kOneRounding, step == 0 ? "attention_decode prefill" : "attention_decode step");
      past += Tn;
    }
    expect_close(k_cache, 0.0, "attention_decode k_cache");
    expect_close(v_cache, 0.0, "attention_decode v_cache");
  }
}

// A batch as the generator feeds it: the new tokens of 3 sequences in slots 2, 0 and 3 of 4, a
// whole prompt of 9 beside single steps at positions 30 and 4, in one call; two padding rows
// (slot -1) write nothing and give zero rows.
TEST_F(CudaOps, AttentionDecodeRagged) {
  const int NH = 4, NKV = 2, HS = 64, Tmax = 40, S = 4;
  const Ints rows_host = [] {
    Ints r;
    for (int t = 0; t < 9; ++t) r.insert(r.end(), {2, t});
    r.insert(r.end(), {0, 30, 3, 4, -1, 0, -1, 0});   // and two rows of padding (slot -1)
    return r;
  }();
  const int N = static_cast<int>(rows_host.size() / 2);
  const size_t C = static_cast<size_t>(NH) * HS, C_qkv = static_cast<size_t>(NH + 2 * NKV) * HS;
  const size_t cache = static_cast<size_t>(S) * Tmax * NKV * HS;
  Both k_cache = act(random_vector(cache, 191)), v_cache = act(random_vector(cache, 192));
  Both qkv = act(random_vector(N * C_qkv, 193, 2.0f)), out = act(Vec(N * C)), rows = ints(rows_host);
  cpu().attention_decode(out.cpu.view(), k_cache.cpu.view(), v_cache.cpu.view(), qkv.cpu.view(),
                         rows.cpu.ptr<int32_t>(), N, S, Tmax, NH, NKV, HS);
  gpu().attention_decode(out.gpu.view(), k_cache.gpu.view(), v_cache.gpu.view(), qkv.gpu.view(),
                         rows.gpu.ptr<int32_t>(), N, S, Tmax, NH, NKV, HS);
  expect_close(out, kOneRounding, "attention_decode ragged");
  expect_close(k_cache, 0.0, "attention_decode ragged k_cache");
  expect_close(v_cache, 0.0, "attention_decode ragged v_cache");
}

// sample_shard on both backends from the same bf16 logits: the same statistics up to fp32 sums
// in another order, the same best candidate (greedy and sampled; a shard with padding columns,
// vocab_start past 0).
TEST_F(CudaOps, SampleShard) {
  const int N = 7, v_local = 3000, v_valid = 2990, vocab_start = 6000;
  Both logits = act(random_vector(static_cast<size_t>(N) * v_local, 201, 4.0f));
  Ints keys_host;
  for (int r = 0; r < N; ++r) keys_host.insert(keys_host.end(), {r * 3, 17 + r});
  Both keys = ints(keys_host);
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE(announce(str("temperature ", temperature)));
    Both stats = f32(Vec(static_cast<size_t>(N) * kSampleStats));
    cpu().sample_shard(stats.cpu.view(), logits.cpu.view(), keys.cpu.ptr<int32_t>(), 77, temperature, N, v_local,
                       v_valid, vocab_start);
    gpu().sample_shard(stats.gpu.view(), logits.gpu.view(), keys.gpu.ptr<int32_t>(), 77, temperature, N, v_local,
                       v_valid, vocab_start);
    const Vec a = download(cpu(), stats.cpu.view()), b = download(gpu(), stats.gpu.view());
    for (int r = 0; r < N; ++r) {
      const float* x = a.data() + r * kSampleStats;
      const float* y = b.data() + r * kSampleStats;
      EXPECT_EQ(x[0], y[0]) << "row " << r << " max";
      EXPECT_NEAR(x[1], y[1], 1e-5 * x[1]) << "row " << r << " sum";
      EXPECT_EQ(x[3], y[3]) << "row " << r << " best id";
      EXPECT_NEAR(x[2], y[2], 1e-5 * std::abs(x[2])) << "row " << r << " best score";
      EXPECT_EQ(x[4], y[4]) << "row " << r << " best logit";
    }
  }
}

// Decoding a whole sequence (one prefill, or a prefill and single steps) gives attention_fwd's
// output up to bf16 rounding: both round once, from fp32 results that differ in the order of
// their sums (and, for HS 64 and 128, in the tensor cores' bf16 probabilities). Multi-head and
// grouped-query.
TEST_F(CudaOps, AttentionDecodeMatchesForward) {
  for (const AttentionCase& k : {AttentionCase{2, 200, 2, 2, 64}, AttentionCase{1, 70, 3, 3, 37},
                                 AttentionCase{2, 200, 8, 2, 64}, AttentionCase{1, 130, 4, 1, 128},
                                 AttentionCase{1, 70, 6, 3, 37}}) {
    for (int prefill : {k.T, k.T / 2}) {
      SCOPED_TRACE(announce(describe(k) + str(" prefill=", prefill)));
      const size_t C = static_cast<size_t>(k.NH) * k.HS, C_qkv = static_cast<size_t>(k.NH + 2 * k.NKV) * k.HS;
      const Vec qkv_values = round_bf16(random_vector(qkv_elems(k), 181, 2.0f));
      Tensor qkv = upload(gpu(), qkv_values, DType::BF16);
      Tensor full = upload(gpu(), Vec(out_elems(k)), DType::BF16);
      Tensor lse = upload(gpu(), Vec(static_cast<size_t>(k.B) * k.NH * k.T), DType::F32);
      gpu().attention_fwd(full.view(), lse.view(), qkv.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);

      const size_t cache = static_cast<size_t>(k.B) * k.T * k.NKV * k.HS;
      Tensor k_cache = upload(gpu(), Vec(cache), DType::BF16), v_cache = upload(gpu(), Vec(cache), DType::BF16);
      Vec decoded(out_elems(k));
      for (int past = 0; past < k.T;) {
        const int Tn = past == 0 ? prefill : 1;
        // Rows [past, past + Tn) of every sequence, as the generator feeds them.
        Vec step_qkv(static_cast<size_t>(k.B) * Tn * C_qkv);
        for (int b = 0; b < k.B; ++b)
          std::copy_n(qkv_values.begin() + (static_cast<size_t>(b) * k.T + past) * C_qkv, Tn * C_qkv,
                      step_qkv.begin() + static_cast<size_t>(b) * Tn * C_qkv);
        Tensor step_in = upload(gpu(), step_qkv, DType::BF16);
        Tensor step_out = upload(gpu(), Vec(static_cast<size_t>(k.B) * Tn * C), DType::BF16);
        Tensor rows = upload_ints(gpu(), decode_rows(k.B, Tn, past));
        gpu().attention_decode(step_out.view(), k_cache.view(), v_cache.view(), step_in.view(), rows.ptr<int32_t>(),
                               k.B * Tn, k.B, k.T, k.NH, k.NKV, k.HS);
        const Vec o = download(gpu(), step_out.view());
        for (int b = 0; b < k.B; ++b)
          std::copy_n(o.begin() + static_cast<size_t>(b) * Tn * C, Tn * C,
                      decoded.begin() + (static_cast<size_t>(b) * k.T + past) * C);
        past += Tn;
      }
      const double err = rel_l2(decoded, download(gpu(), full.view()));
      std::printf("    %-28s rel_l2 %.3g (tolerance %.3g)\n", "decode vs attention_fwd", err, kOneRounding);
      EXPECT_LE(err, kOneRounding);
    }
  }
}

// ---------------------------------------------------------------- cross-entropy

struct XentCase {
  int N, v_local, v_valid, vocab_start;
};

// Rows of ignored targets (kIgnoredTarget) have loss 0 and an all-zero gradient.
void expect_ignored_rows(const Ints& targets, const Vec& losses, const Vec& dlogits, int v_local) {
  for (size_t n = 0; n < targets.size(); ++n) {
    if (targets[n] >= 0) continue;
    ASSERT_EQ(losses[n], 0.0f) << "loss of ignored row " << n;
    for (int j = 0; j < v_local; ++j)
      ASSERT_EQ(dlogits[n * v_local + j], 0.0f) << "gradient of ignored row " << n << " column " << j;
  }
}

TEST_F(CudaOps, CrossEntropy) {
  // v_local % 8 == 0 takes the 16-byte path (with a scalar tail when v_valid % 8 != 0), 100 the scalar one.
  for (const XentCase& k : {XentCase{37, 384, 300, 384}, XentCase{16, 128, 128, 0}, XentCase{7, 100, 97, 0}}) {
    SCOPED_TRACE(announce(str("N=", k.N, " v_local=", k.v_local, " v_valid=", k.v_valid)));
    const size_t NV = static_cast<size_t>(k.N) * k.v_local;
    // Targets in this shard, in its padding, in other shards, and ignored ones (every fifth row).
    Ints targets(k.N);
    for (int n = 0; n < k.N; ++n) targets[n] = static_cast<int32_t>(hash3(9, 0, n) % (k.vocab_start + k.v_local + 64));
    for (int n = 3; n < k.N; n += 5) targets[n] = kIgnoredTarget;
    Both tgt = ints(targets);
    Both logits = act(random_vector(NV, 91, 4.0f));
    Both rowmax = f32(Vec(k.N));
    cpu().xent_max(rowmax.cpu.view(), logits.cpu.view(), k.N, k.v_local, k.v_valid);
    gpu().xent_max(rowmax.gpu.view(), logits.gpu.view(), k.N, k.v_local, k.v_valid);
    expect_close(rowmax, 0.0, "xent_max rowmax");  // a max of the same values is exact

    Both stats = f32(Vec(2 * static_cast<size_t>(k.N)));
    cpu().xent_stats(stats.cpu.view(), logits.cpu.view(), rowmax.cpu.view(), tgt.cpu.ptr<int32_t>(), k.N, k.v_local,
                     k.v_valid, k.vocab_start);
    gpu().xent_stats(stats.gpu.view(), logits.gpu.view(), rowmax.gpu.view(), tgt.gpu.ptr<int32_t>(), k.N, k.v_local,
                     k.v_valid, k.vocab_start);
    expect_close(stats, kFp32Order, "xent_stats stats");  // fp32 vs double sums of exp

    // The entropy's sums of this shard (online RL's metric), before xent_bwd overwrites the logits.
    Both entropy_sums = f32(Vec(2 * static_cast<size_t>(k.N)));
    cpu().xent_entropy_sums(entropy_sums.cpu.view(), logits.cpu.view(), rowmax.cpu.view(), k.N, k.v_local, k.v_valid);
    gpu().xent_entropy_sums(entropy_sums.gpu.view(), logits.gpu.view(), rowmax.gpu.view(), k.N, k.v_local, k.v_valid);
    expect_close(entropy_sums, kFp32Order, "xent_entropy_sums sums");

    // As after the TP all-reduce: other shards add to the sum of exponentials.
    Vec reduced = download(cpu(), stats.cpu.view());
    for (int n = 0; n < k.N; ++n) reduced[2 * n] += 0.5f;
    Both stats_all = f32(reduced), losses = f32(Vec(k.N));
    const float dloss = 1.0f / k.N;
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->xent_bwd(v(losses), v(logits), v(rowmax), v(stats_all), g ? tgt.gpu.ptr<int32_t>() : tgt.cpu.ptr<int32_t>(),
                   k.N, k.v_local, k.v_valid, k.vocab_start, dloss);
    }
    expect_close(losses, kFp32Order, "xent_bwd losses");
    expect_close(logits, kOneRounding, "xent_bwd dlogits");  // fp32 softmax, one rounding
    const Vec dlogits = download(gpu(), logits.gpu.view());
    expect_ignored_rows(targets, download(gpu(), losses.gpu.view()), dlogits, k.v_local);
    for (int n = 0; n < k.N; ++n)
      for (int j = k.v_valid; j < k.v_local; ++j)
        ASSERT_EQ(dlogits[static_cast<size_t>(n) * k.v_local + j], 0.0f) << "padding column " << j;
  }
}

// The fused single-shard form against the CPU's three calls (tp = 1: every target is local).
TEST_F(CudaOps, CrossEntropyFused) {
  for (const XentCase& k : {XentCase{37, 384, 300, 0}, XentCase{16, 50304, 50257, 0}, XentCase{7, 100, 97, 0}}) {
    SCOPED_TRACE(announce(str("N=", k.N, " v_local=", k.v_local, " v_valid=", k.v_valid)));
    const size_t NV = static_cast<size_t>(k.N) * k.v_local;
    Ints targets(k.N);
    for (int n = 0; n < k.N; ++n) targets[n] = static_cast<int32_t>(hash3(10, 0, n) % k.v_valid);
    for (int n = 3; n < k.N; n += 5) targets[n] = kIgnoredTarget;
    Both tgt = ints(targets);
    Both logits = act(random_vector(NV, 92, 4.0f));
    Both rowmax = f32(Vec(k.N)), stats = f32(Vec(2 * static_cast<size_t>(k.N))), losses = f32(Vec(k.N));
    const float dloss = 1.0f / k.N;
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->xent_fused(v(losses), v(logits), v(rowmax), v(stats), g ? tgt.gpu.ptr<int32_t>() : tgt.cpu.ptr<int32_t>(),
                     k.N, k.v_local, k.v_valid, dloss);
    }
    expect_close(losses, kFp32Order, "xent_fused losses");
    expect_close(logits, kOneRounding, "xent_fused dlogits");
    const Vec dlogits = download(gpu(), logits.gpu.view());
    expect_ignored_rows(targets, download(gpu(), losses.gpu.view()), dlogits, k.v_local);
    for (int n = 0; n < k.N; ++n)
      for (int j = k.v_valid; j < k.v_local; ++j)
        ASSERT_EQ(dlogits[static_cast<size_t>(n) * k.v_local + j], 0.0f) << "padding column " << j;
  }
}

// ---------------------------------------------------------------- preference losses

// DPO's sequence-level ops: per-sequence sums of token losses (a length past one block's threads),
// the pair loss with label smoothing and its per-row weights (pairs past one block's threads, both
// signs of z, one pair far out where sigmoid saturates), and the weighting of a bf16 logit gradient.
TEST_F(CudaOps, PreferenceLossOps) {
  const int pairs = 300, S = 2 * pairs, T = 37, len = 1000;
  Both tokens = f32(random_vector(static_cast<size_t>(S) * len, 151, 3.0f));
  Both sums = f32(Vec(S));
  Vec pol = random_vector(S, 152, 4.0f), ref = random_vector(S, 153, 4.0f);
  pol[0] = 400.0f;   // z = -beta * 400 + ...: a saturated pair
  Both policy = f32(pol), reference = f32(ref);
  // IPO's per-token log-ratios: a varying count of trained targets per sequence, none in sequence 3.
  Ints target_ids(static_cast<size_t>(S) * T);
  for (size_t n = 0; n < target_ids.size(); ++n)
    target_ids[n] = n / T == 3 || hash3(156, 0, n) % 3 == 0 ? kIgnoredTarget : static_cast<int32_t>(n % 50);
  Both targets = ints(target_ids);
  const int rows = 70, cols = 1003;
  Both x = act(random_vector(static_cast<size_t>(rows) * cols, 154));
  Both w = f32(random_vector(rows, 155, 2.0f));
  for (const DpoArgs& a : {DpoArgs{0.3f, 0.1f, 0.25f, DpoLoss::Sigmoid}, DpoArgs{0.3f, 0.0f, 0.25f, DpoLoss::Ipo}}) {
    SCOPED_TRACE(a.loss == DpoLoss::Ipo ? "ipo" : "sigmoid");
    Both acc = f32({0.5f, 1.0f, -2.0f, 3.0f, -1.5f});   // accumulates onto these
    Both weights = f32(Vec(static_cast<size_t>(S) * T));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->dpo_loss(vw(acc), vw(weights), vw(policy), vw(reference), (g ? targets.gpu : targets.cpu).ptr<int32_t>(),
                   pairs, T, a);
    }
    expect_close(acc, kFp32Order, "dpo_loss sums");
    expect_close(weights, kFp32Order, "dpo_loss row weights");
  }
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    be->segment_sum(vw(sums), vw(tokens), S, len);
    be->scale_rows(vw(x), vw(w), rows, cols);
  }
  expect_close(sums, kFp32Order, "segment_sum");
  expect_close(x, kOneRounding, "scale_rows");   // one product of a bf16 and an fp32, rounded once
}

// Online RL's per-token policy loss over more positions than the block's threads: tokens outside
// the answers (coef 0), ratios clipped on both sides and for both signs of the advantage, with the
// KL penalty and the entropies of the answer tokens' entropy sums; the sums accumulate onto
// earlier values.
TEST_F(CudaOps, PolicyLossOp) {
  const int N = 2500;
  Vec nll = random_vector(N, 161, 2.0f), old(N), coef(N), coef_adv(N), ref = random_vector(N, 162, 2.0f);
  const Vec shift = random_vector(N, 163, 0.4f), adv = random_vector(N, 164, 1.5f);
  for (int t = 0; t < N; ++t) {
    nll[t] = std::abs(nll[t]);
    ref[t] = std::abs(ref[t]);
    old[t] = -nll[t] + shift[t];   // ratios exp(-shift) in [0.67, 1.5]: clipped and not
    coef[t] = t % 7 == 3 ? 0.0f : 1.0f / (1 + t % 13);
    coef_adv[t] = coef[t] * adv[t];
  }
  // Sums of a softmax's row relative to its maximum: s0 >= 1 (the maximum's term), s1 <= 0.
  Vec sums = random_vector(2 * static_cast<size_t>(N), 165, 1.0f);
  for (int t = 0; t < N; ++t) {
    sums[2 * t] = 1.0f + 40.0f * std::abs(sums[2 * t]);
    sums[2 * t + 1] = -3.0f * sums[2 * t] * std::abs(sums[2 * t + 1]);
  }
  Both acc = f32({0.25f, 2.0f, -1.0f, 3.0f, 0.0f}), weights = f32(Vec(N));
  Both x = f32(nll), o = f32(old), c = f32(coef), ca = f32(coef_adv), r = f32(ref), es = f32(sums);
  const PolicyArgs a{0.2f, 0.04f, 0.5f};
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    be->policy_loss(vw(acc), vw(weights), vw(x), vw(o), vw(c), vw(ca), vw(r), vw(es), N, a);
  }
  expect_close(acc, kFp32Order, "policy_loss sums");
  expect_close(weights, kFp32Order, "policy_loss weights");
}

// ---------------------------------------------------------------- reward head

// Pairs of sequences scored at their last token (after the last trained target, or the last
// position), one pair with an untrained sequence (left out): scores, the (3) sums accumulated
// onto earlier values, dscores, and the backward's dlnf rows and dw (+=).
TEST_F(CudaOps, RewardHead) {
  for (const RowsCase& k : {RowsCase{6, 96}, RowsCase{4, 1000}}) {
    const int B = k.N, T = 37, C = k.C;
    SCOPED_TRACE(announce(str("B=", B, " T=", T, " C=", C)));
    Ints targets(static_cast<size_t>(B) * T, kIgnoredTarget);
    for (int b = 0; b < B; ++b) {
      const int last = b == 3 ? -1 : b == 1 ? T - 1 : static_cast<int>(hash3(9, b, 0) % (T - 1));
      for (int t = 0; t <= last; ++t) targets[static_cast<size_t>(b) * T + t] = t % 5 == 0 ? kIgnoredTarget : 7;
      if (last >= 0) targets[static_cast<size_t>(b) * T + last] = 7;
    }
    Both tgt = ints(targets);
    Both lnf = act(random_vector(static_cast<size_t>(B) * T * C, 121));
    Both w = act(random_vector(C, 122));
    Both scores = f32(Vec(B)), dscores = f32(Vec(B)), stats = f32({0.5f, 1.0f, -0.25f});
    Both dlnf = act(random_vector(static_cast<size_t>(B) * T * C, 123));   // overwritten
    Both dw = f32(random_vector(C, 124));                                    // += onto earlier micro-batches
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      const int32_t* tp = g ? tgt.gpu.ptr<int32_t>() : tgt.cpu.ptr<int32_t>();
      be->reward_fwd(v(scores), v(dscores), v(stats), v(lnf), v(w), tp, B, T, C, 0.125f);
      be->reward_bwd(v(dlnf), v(dw), v(dscores), v(lnf), v(w), tp, B, T, C);
    }
    // fp32 dot products of the same bf16 rows; only the association differs.
    expect_close(scores, kFp32Order, "reward_fwd scores");
    expect_close(stats, kFp32Order, "reward_fwd stats");
    expect_close(dscores, kFp32Order, "reward_fwd dscores");
    expect_close(dlnf, kOneRounding, "reward_bwd dlnf");
    expect_close(dw, kFp32Order, "reward_bwd dw");
  }
}

// Task ppo's value head: values at every row, the clipped value loss over the rows with a weight
// (others left out), its sums accumulated onto earlier values, dvalues, and the backward's dlnf
// (overwritten) and dw (+=); then the values alone (no loss inputs).
TEST_F(CudaOps, ValueHead) {
  for (const RowsCase& k : {RowsCase{150, 96}, RowsCase{40, 1000}}) {
    const int N = k.N, C = k.C;
    SCOPED_TRACE(announce(str("N=", N, " C=", C)));
    const Vec lnf_h = random_vector(static_cast<size_t>(N) * C, 171), w_h = random_vector(C, 172);
    Vec old(N), ret = random_vector(N, 173, 2.0f), coef(N);
    const Vec shift = random_vector(N, 174, 0.6f);
    for (int n = 0; n < N; ++n) {
      double v = 0;   // near the value, so that some values move past the clip range and some not
      for (int c = 0; c < C; ++c) v += static_cast<double>(lnf_h[static_cast<size_t>(n) * C + c]) * w_h[c];
      old[n] = static_cast<float>(v) + shift[n];
      coef[n] = n % 5 == 2 ? 0.0f : 1.0f / (1 + n % 9);
    }
    Both lnf = act(lnf_h), w = act(w_h), o = f32(old), R = f32(ret), cf = f32(coef);
    Both values = f32(Vec(N)), dvalues = f32(Vec(N)), acc = f32({0.5f, 1.0f, -0.25f, 0.0f, 0.0f});
    Both dlnf = act(random_vector(static_cast<size_t>(N) * C, 175));   // overwritten
    Both dw = f32(random_vector(C, 176));                               // += onto earlier micro-batches
    Both only = f32(Vec(N));
    const ValueArgs a{0.2f, 0.5f};
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->value_fwd(v(values), v(dvalues), v(acc), v(lnf), v(w), v(o), v(R), v(cf), N, C, a);
      be->value_bwd(v(dlnf), v(dw), v(dvalues), v(lnf), v(w), N, C);
      be->value_fwd(v(only), TensorView{}, TensorView{}, v(lnf), v(w), TensorView{}, TensorView{}, TensorView{}, N, C,
                    a);
    }
    expect_close(values, kFp32Order, "value_fwd values");
    expect_close(acc, kFp32Order, "value_fwd sums");
    expect_close(dvalues, kFp32Order, "value_fwd dvalues");
    expect_close(dlnf, kOneRounding, "value_bwd dlnf");
    expect_close(dw, kFp32Order, "value_bwd dw");
    expect_close(only, kFp32Order, "value_fwd values without the loss");
  }
}

// ---------------------------------------------------------------- reductions and optimizer

TEST_F(CudaOps, Reductions) {
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1000003}}) {
    SCOPED_TRACE(announce(str("n=", n)));
    Both x = f32(random_vector(n, 101));
    Both x_act = act(random_vector(n, 102));
    Both ss = f32({1.5f}), ss_act = f32({1.5f}), s = f32({-0.25f});  // both ops accumulate
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->sum_squares(v(ss), v(x));
      be->sum_squares(v(ss_act), v(x_act));  // bf16 on the GPU, the same values in fp32 on the CPU
      be->sum(v(s), v(x));
    }
    // fp32 partial sums added in a fixed tree, against the CPU's double sums.
    expect_close(ss, kFp32Order, "sum_squares f32");
    expect_close(ss_act, kFp32Order, "sum_squares bf16");
    expect_close(s, 1e-4, "sum");  // random signs: cancellation makes the relative error larger
  }
}

TEST_F(CudaOps, Scale) {
  Both x = f32(random_vector(12345, 111));
  cpu().scale(x.cpu.view(), 0.37f);
  gpu().scale(x.gpu.view(), 0.37f);
  expect_close(x, 0.0, "scale");  // one IEEE multiply per element: exact agreement
}

TEST_F(CudaOps, Accumulate) {
  Both acc = f32(random_vector(12345, 112));
  Both x = f32(random_vector(12345, 113));
  cpu().accumulate(acc.cpu.view(), x.cpu.view());
  gpu().accumulate(acc.gpu.view(), x.gpu.view());
  expect_close(acc, 0.0, "accumulate");  // one IEEE add per element: exact agreement
}

TEST_F(CudaOps, AdamW) {
  const size_t n = 10007;
  Vec v0 = random_vector(n, 123, 0.1f);
  for (float& e : v0) e *= e;  // second moments are non-negative
  Both master = f32(random_vector(n, 121)), m = f32(random_vector(n, 122, 0.1f)), v = f32(v0),
       grad = f32(random_vector(n, 124));
  Both param = act(Vec(n));
  for (int step = 1; step <= 2; ++step) {
    AdamWArgs a;
    a.lr = 1e-3f;
    a.weight_decay = 0.1f;
    a.grad_scale = 0.5f;
    a.bias_correction1 = 1.0f - std::pow(a.beta1, static_cast<float>(step + 2));
    a.bias_correction2 = 1.0f - std::pow(a.beta2, static_cast<float>(step + 2));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->adamw(vw(param), vw(master), vw(m), vw(v), vw(grad), a);
    }
  }
  // The same fp32 formula; the GPU may contract a*b+c into one FMA (an ulp here and there).
  expect_close(master, 1e-6, "adamw master");
  expect_close(m, 1e-6, "adamw m");
  expect_close(v, 1e-6, "adamw v");
  expect_close(param, kOneRounding, "adamw param");  // the bf16 copy: one rounding of master
}

// Pieces as the optimizer makes them: offsets that are and are not multiples of 8 elements, a
// piece longer than a block's stride, decay on and off; against per-piece CPU updates.
TEST_F(CudaOps, MultiTensorNormAndAdamW) {
  const size_t flat_n = 200003, state_n = 150000;
  const std::vector<MultiTensorEntry> pieces = {
      {0, 0, 65536, 1}, {65536, 65536, 1000, 0}, {70001, 66536, 4099, 1}, {100000, 70635, 77, 0},
      {120003, 70712, 65536, 1}, {199999, 136248, 4, 0}};
  Vec v0 = random_vector(state_n, 133, 0.1f);
  for (float& e : v0) e *= e;
  Both master = f32(random_vector(state_n, 131)), m = f32(random_vector(state_n, 132, 0.1f)), v = f32(v0),
       grad = f32(random_vector(flat_n, 134)), param = act(Vec(flat_n));
  Ints words(pieces.size() * kPieceWords);
  std::memcpy(words.data(), pieces.data(), pieces.size() * sizeof(MultiTensorEntry));
  Both table = ints(words);
  Both norm_sq = f32({0.0f});
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    be->sum_squares_multi(vw(norm_sq), vw(grad), vw(table));
  }
  expect_close(norm_sq, kFp32Order, "sum_squares_multi");
  double expect = 0;
  const Vec gh = download(cpu(), grad.cpu.view());
  for (const MultiTensorEntry& p : pieces)
    for (int64_t i = 0; i < p.n; ++i) expect += double(gh[p.flat + i]) * gh[p.flat + i];
  EXPECT_NEAR(download(cpu(), norm_sq.cpu.view())[0], expect, 1e-5 * expect);

  AdamWArgs a;
  a.lr = 1e-3f;
  a.weight_decay = 0.1f;
  a.bias_correction1 = 1.0f - a.beta1;
  a.bias_correction2 = 1.0f - a.beta2;
  const float clip = 0.5f * static_cast<float>(std::sqrt(expect));   // clipping is active: factor ~0.5
  for (auto* be : {&cpu(), &gpu()}) {
    const bool g = be == &gpu();
    auto vw = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
    be->adamw_multi(vw(param), vw(master), vw(m), vw(v), vw(grad), vw(table), a, vw(norm_sq), clip);
  }
  expect_close(master, 1e-6, "adamw_multi master");
  expect_close(m, 1e-6, "adamw_multi m");
  expect_close(v, 1e-6, "adamw_multi v");
  expect_close(param, kOneRounding, "adamw_multi param");
}

// Views off a 16-byte boundary: the kernels that use 16-byte accesses on aligned tensors take
// their scalar paths and give the same results.
TEST_F(CudaOps, MisalignedViews) {
  const int N = 9, C = 96;  // C % 8 == 0: only the addresses rule out the 16-byte path
  const size_t NC = static_cast<size_t>(N) * C;
  const Vec x = residual_stream(NC, 191), y = random_vector(NC, 192), w = near_one(C, 193),
            b = random_vector(C, 194, 0.1f);
  Both xb = act(x), yb = act(y), wb = act(w), bb = act(b);
  Misaligned x_m = misaligned(x, DType::BF16), y_m = misaligned(y, DType::BF16), w_m = misaligned(w, DType::BF16),
             b_m = misaligned(b, DType::BF16);

  Both sum = act(Vec(NC)), dgelu = act(Vec(NC));
  Misaligned sum_m = misaligned(Vec(NC), DType::BF16), dgelu_m = misaligned(Vec(NC), DType::BF16);
  cpu().add(sum.cpu.view(), xb.cpu.view(), yb.cpu.view());
  gpu().add(sum_m.view(), x_m.view(), y_m.view());
  expect_close(sum_m.view(), sum.cpu.view(), kOneRounding, "add");
  cpu().gelu_bwd(dgelu.cpu.view(), yb.cpu.view(), xb.cpu.view());
  gpu().gelu_bwd(dgelu_m.view(), y_m.view(), x_m.view());
  expect_close(dgelu_m.view(), dgelu.cpu.view(), kOneRounding, "gelu_bwd");

  Both ln = act(Vec(NC)), mean = f32(Vec(N)), rstd = f32(Vec(N));
  Misaligned ln_m = misaligned(Vec(NC), DType::BF16);
  cpu().layernorm_fwd(ln.cpu.view(), mean.cpu.view(), rstd.cpu.view(), xb.cpu.view(), wb.cpu.view(), bb.cpu.view(), N,
                      C, 1e-5f);
  gpu().layernorm_fwd(ln_m.view(), mean.gpu.view(), rstd.gpu.view(), x_m.view(), w_m.view(), b_m.view(), N, C, 1e-5f);
  expect_close(ln_m.view(), ln.cpu.view(), kOneRounding, "layernorm_fwd out");
  expect_close(rstd, kFp32Order, "layernorm_fwd rstd");

  Both ss = f32({0.5f});
  cpu().sum_squares(ss.cpu.view(), yb.cpu.view());
  gpu().sum_squares(ss.gpu.view(), y_m.view());
  expect_close(ss, kFp32Order, "sum_squares bf16");

  const size_t n = 1001;
  const Vec master = random_vector(n, 196), m = random_vector(n, 197, 0.1f), grad = random_vector(n, 199);
  Vec v0 = random_vector(n, 198, 0.1f);
  for (float& e : v0) e *= e;
  Both master_b = f32(master), m_b = f32(m), v_b = f32(v0), grad_b = f32(grad), param = act(Vec(n));
  Misaligned master_m = misaligned(master, DType::F32), m_m = misaligned(m, DType::F32),
             v_m = misaligned(v0, DType::F32), grad_m = misaligned(grad, DType::F32),
             param_m = misaligned(Vec(n), DType::BF16);
  AdamWArgs a;
  a.lr = 1e-3f;
  a.weight_decay = 0.1f;
  cpu().adamw(param.cpu.view(), master_b.cpu.view(), m_b.cpu.view(), v_b.cpu.view(), grad_b.cpu.view(), a);
  gpu().adamw(param_m.view(), master_m.view(), m_m.view(), v_m.view(), grad_m.view(), a);
  expect_close(master_m.view(), master_b.cpu.view(), 1e-6, "adamw master");
  expect_close(param_m.view(), param.cpu.view(), kOneRounding, "adamw param");
}

// ---------------------------------------------------------------- Llama ops

// C % 8 == 0 takes the 16-byte path (C = 2048: 8 pieces per lane), C = 37 the scalar one; 2056,
// 4096, 6144 and 8192 the wide rows (a block per row: 2, 2, 3 and 4 pieces per thread, 2056's
// second piece one thread wide), 8200 the warp per row again (past the wide kernels).
const RowsCase kRmsNormCases[] = {{37, 96},  {64, 768},  {5, 37},   {16, 2048},
                                  {9, 2056}, {33, 4096}, {7, 6144}, {3, 8192}, {2, 8200}};

TEST_F(CudaOps, RmsNormFwd) {
  for (const RowsCase& k : kRmsNormCases) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both in = act(residual_stream(NC, 301)), w = act(near_one(k.C, 302));
    Both out = act(Vec(NC)), rstd = f32(Vec(k.N));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->rmsnorm_fwd(v(out), v(rstd), v(in), v(w), k.N, k.C, 1e-5f);
    }
    expect_close(out, kOneRounding, "rmsnorm_fwd out");  // fp32 math, one rounding
    expect_close(rstd, kFp32Order, "rmsnorm_fwd rstd");  // fp32 vs double sums over C
  }
}

TEST_F(CudaOps, AddRmsNormFwd) {
  // sum = a + residual in place over a, as a model calls it; the CPU composes add and rmsnorm_fwd.
  for (const RowsCase& k : kRmsNormCases) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both a = act(residual_stream(NC, 303)), residual = act(residual_stream(NC, 304)), w = act(near_one(k.C, 305));
    Both out = act(Vec(NC)), rstd = f32(Vec(k.N));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->add_rmsnorm_fwd(v(a), v(out), v(rstd), v(a), v(residual), v(w), k.N, k.C, 1e-5f);
    }
    expect_close(a, kOneRounding, "add_rmsnorm_fwd sum");          // one rounding of the sum
    expect_close(out, 2 * kOneRounding, "add_rmsnorm_fwd out");    // the rounded sum, then one more rounding
    expect_close(rstd, kOneRounding, "add_rmsnorm_fwd rstd");      // statistics of the bf16-rounded sum
  }
}

TEST_F(CudaOps, RmsNormBwd) {
  // N = 1100 gives the dw column sums several chunks of rows, the last one partly filled; C from
  // 2056 the wide backward (a block per chunk of rows: 600 rows make 200 chunks of 3, 1001 make
  // 251 of 4, the last one of 1; 5000 has a last piece 113 threads wide, 6152 one thread wide),
  // 8200 the separate kernels.
  for (const RowsCase& k : {RowsCase{37, 96}, RowsCase{21, 37}, RowsCase{1100, 48}, RowsCase{200, 768},
                            RowsCase{45, 2048}, RowsCase{30, 2056}, RowsCase{1001, 4096}, RowsCase{40, 5000},
                            RowsCase{600, 6144}, RowsCase{70, 6152}, RowsCase{9, 8200}})
  for (const bool with_keep : {true, false}) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C, with_keep ? " with din_keep" : "")));
    const size_t NC = static_cast<size_t>(k.N) * k.C;
    Both in = act(residual_stream(NC, 311)), w = act(near_one(k.C, 312));
    // rstd from the CPU forward, given to both.
    Tensor cpu_out = upload(cpu(), Vec(NC), DType::F32), cpu_rstd = upload(cpu(), Vec(k.N), DType::F32);
    cpu().rmsnorm_fwd(cpu_out.view(), cpu_rstd.view(), in.cpu.view(), w.cpu.view(), k.N, k.C, 1e-5f);
    Both rstd = f32(download(cpu(), cpu_rstd.view()));
    Both dout = act(random_vector(NC, 313));
    Both din = act(random_vector(NC, 314));  // din_accum: the residual gradient already there
    Both dw = f32(random_vector(k.C, 315));
    Both keep = act(Vec(NC));   // din_keep: din's old values, as for layernorm_bwd
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->rmsnorm_bwd(v(din), v(dw), v(dout), v(in), v(w), v(rstd), k.N, k.C, with_keep ? v(keep) : TensorView{});
    }
    expect_close(din, kOneRounding, "rmsnorm_bwd din_accum");  // fp32 sum, one rounding
    if (with_keep) {
      EXPECT_EQ(download(gpu(), keep.gpu.view()), round_bf16(random_vector(NC, 314))) << "din_keep: din's old values";
    }
    expect_close(dw, 1e-4, "rmsnorm_bwd dw");                  // fp32 vs double column sums over N rows
  }
}

TEST_F(CudaOps, Swiglu) {
  // F % 8 == 0 takes the 16-byte path, F = 37 the scalar one.
  for (const RowsCase& k : {RowsCase{37, 96}, RowsCase{64, 344}, RowsCase{9, 37}}) {
    const int N = k.N, F = k.C;
    SCOPED_TRACE(announce(str("N=", N, " F=", F)));
    const size_t NF = static_cast<size_t>(N) * F;
    Both in = act(random_vector(2 * NF, 321, 4.0f)), dout = act(random_vector(NF, 322));
    Both out = act(Vec(NF)), din = act(Vec(2 * NF));
    Both in_place = act(download(cpu(), in.cpu.view()));   // swiglu_bwd over its own input
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->swiglu_fwd(v(out), v(in), N, F);
      be->swiglu_bwd(v(din), v(dout), v(in), N, F);
      be->swiglu_bwd(v(in_place), v(dout), v(in_place), N, F);
    }
    // fp32 math (expf ulps), one rounding of each output.
    expect_close(out, kOneRounding, "swiglu_fwd");
    expect_close(din, kOneRounding, "swiglu_bwd");
    expect_close(in_place, kOneRounding, "swiglu_bwd in place");
  }
}

TEST_F(CudaOps, Rope) {
  // HS 64 and 128 take the 16-byte path, 8 and 6 the scalar one; pos0 = 5 reads later table rows.
  struct RopeCase {
    int B, T, NH, NKV, HS, pos0;
  };
  for (const RopeCase& k : {RopeCase{2, 37, 4, 2, 64, 0}, RopeCase{1, 33, 8, 2, 128, 0}, RopeCase{2, 7, 4, 1, 8, 0},
                            RopeCase{1, 9, 3, 3, 6, 0}, RopeCase{2, 11, 4, 2, 64, 5}}) {
    SCOPED_TRACE(announce(str("B=", k.B, " T=", k.T, " NH=", k.NH, " NKV=", k.NKV, " HS=", k.HS, " pos0=", k.pos0)));
    const size_t n = static_cast<size_t>(k.B) * k.T * (k.NH + 2 * k.NKV) * k.HS;
    const int rows = k.pos0 + k.T;
    Vec table_host(static_cast<size_t>(rows) * k.HS);
    rope_table(table_host.data(), rows, k.HS, 10000.0f);
    Both table = f32(table_host), x = act(random_vector(n, 331, 2.0f)), dx = act(random_vector(n, 332));
    for (auto* be : {&cpu(), &gpu()}) {
      const bool g = be == &gpu();
      auto v = [&](const Both& t) { return g ? t.gpu.view() : t.cpu.view(); };
      be->rope_fwd(v(x), v(table), k.B, k.T, k.NH, k.NKV, k.HS, k.pos0, nullptr);
      be->rope_bwd(v(dx), v(table), k.B, k.T, k.NH, k.NKV, k.HS, k.pos0, nullptr);
    }
    // fp32 math on the same table, one rounding; the value heads are copied through unchanged.
    expect_close(x, kOneRounding, "rope_fwd");
    expect_close(dx, kOneRounding, "rope_bwd");
  }
}

// Views off a 16-byte boundary take the scalar paths of the Llama ops and give the same results.
TEST_F(CudaOps, LlamaOpsOnMisalignedViews) {
  const int N = 9, C = 96, F = 96;
  const size_t NC = static_cast<size_t>(N) * C;
  const Vec x = residual_stream(NC, 341), w = near_one(C, 342), gu = random_vector(2 * N * F, 343, 4.0f);
  Both xb = act(x), wb = act(w), gub = act(gu);
  Misaligned x_m = misaligned(x, DType::BF16), w_m = misaligned(w, DType::BF16), gu_m = misaligned(gu, DType::BF16);

  Both out = act(Vec(NC)), rstd = f32(Vec(N));
  Misaligned out_m = misaligned(Vec(NC), DType::BF16);
  cpu().rmsnorm_fwd(out.cpu.view(), rstd.cpu.view(), xb.cpu.view(), wb.cpu.view(), N, C, 1e-5f);
  gpu().rmsnorm_fwd(out_m.view(), rstd.gpu.view(), x_m.view(), w_m.view(), N, C, 1e-5f);
  expect_close(out_m.view(), out.cpu.view(), kOneRounding, "rmsnorm_fwd out");
  expect_close(rstd, kFp32Order, "rmsnorm_fwd rstd");

  Both swi = act(Vec(static_cast<size_t>(N) * F));
  Misaligned swi_m = misaligned(Vec(static_cast<size_t>(N) * F), DType::BF16);
  cpu().swiglu_fwd(swi.cpu.view(), gub.cpu.view(), N, F);
  gpu().swiglu_fwd(swi_m.view(), gu_m.view(), N, F);
  expect_close(swi_m.view(), swi.cpu.view(), kOneRounding, "swiglu_fwd");

  const int B = 1, T = 5, NH = 2, NKV = 1, HS = 64;
  const size_t n = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
  Vec table_host(static_cast<size_t>(T) * HS);
  rope_table(table_host.data(), T, HS, 10000.0f);
  const Vec q = random_vector(n, 344);
  Both table = f32(table_host), qb = act(q);
  Misaligned q_m = misaligned(q, DType::BF16);
  cpu().rope_fwd(qb.cpu.view(), table.cpu.view(), B, T, NH, NKV, HS, 0, nullptr);
  gpu().rope_fwd(q_m.view(), table.gpu.view(), B, T, NH, NKV, HS, 0, nullptr);
  expect_close(q_m.view(), qb.cpu.view(), kOneRounding, "rope_fwd");
}

// ---------------------------------------------------------------- determinism

// Caps the dK/dV parts (cuda.attention_dkv_parts) for the process: a backend's construction sets
// them (as the attention engine), so the fixture's backend then runs with them.
void use_dkv_parts(int at_most) {
  CudaOptions options = g_options;
  options.attention_dkv_parts = at_most;
  make_cuda_backend(0, options);
}

// The dK/dV blocks with a key/value group's query heads in parts (cuda.attention_dkv_parts): one
// block per group, two or three parts, and the split the shape gives; each against the CPU,
// multi-head and grouped-query, with the bias gradient, RoPE fused and packed documents, and
// each part count giving the same bits on every run.
TEST_F(CudaOps, AttentionBwdQueryHeadsInParts) {
  struct Restore {
    ~Restore() { use_dkv_parts(g_options.attention_dkv_parts); }   // also where an ASSERT leaves early
  } restore;
  for (const int at_most : {1, 2, 3, 0}) {
    use_dkv_parts(at_most);
    for (const AttentionCase& k : {AttentionCase{1, 520, 32, 8, 64}, AttentionCase{1, 300, 12, 2, 128},
                                   AttentionCase{2, 100, 6, 1, 64}, AttentionCase{1, 37, 2, 2, 128}}) {
      SCOPED_TRACE(announce(describe(k) + str(", at most ", at_most, " parts")));
      attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, true);
      attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, false, nullptr, true);
      Both docs = ints(packed_doc_start(k.B, k.T, 40, 77));
      attention_bwd_both(k.B, k.T, k.NH, k.NKV, k.HS, false, &docs);
      // Three runs, the same bits.
      Tensor qkv = upload(gpu(), random_vector(qkv_elems(k), 131, 2.0f), DType::BF16);
      Tensor dout = upload(gpu(), random_vector(out_elems(k), 132), DType::BF16);
      Tensor out = upload(gpu(), Vec(out_elems(k)), DType::BF16);
      Tensor lse = upload(gpu(), Vec(static_cast<size_t>(k.B) * k.NH * k.T), DType::F32);
      gpu().attention_fwd(out.view(), lse.view(), qkv.view(), k.B, k.T, k.NH, k.NKV, k.HS, nullptr);
      std::vector<unsigned char> first;
      for (int run = 0; run < 3; ++run) {
        Tensor dqkv = upload(gpu(), Vec(qkv_elems(k)), DType::BF16);
        gpu().attention_bwd(dqkv.view(), TensorView{}, dout.view(), qkv.view(), out.view(), lse.view(), k.B, k.T,
                            k.NH, k.NKV, k.HS, nullptr);
        const auto bits = download_bits(gpu(), dqkv.view());
        if (run == 0) first = bits;
        EXPECT_TRUE(bits == first) << "run " << run << " differs from run 0";
      }
    }
  }
}

// Tensor-core (HS 64, 128) and generic (HS 37) kernels, multi-head and with 4 query heads per
// key/value head (whose key and value gradients sum over the group).
TEST_F(CudaOps, AttentionBwdIsDeterministic) {
  for (int HS : {64, 128, 37}) {
    for (int NKV : {4, 1}) {
      const AttentionCase k{2, 200, 4, NKV, HS};
      SCOPED_TRACE(announce(describe(k)));
      const size_t C_qkv = static_cast<size_t>(k.NH + 2 * k.NKV) * HS;
      Tensor qkv = upload(gpu(), random_vector(qkv_elems(k), 131, 2.0f), DType::BF16);
      Tensor dout = upload(gpu(), random_vector(out_elems(k), 132), DType::BF16);
      Tensor out = upload(gpu(), Vec(out_elems(k)), DType::BF16);
      Tensor lse = upload(gpu(), Vec(static_cast<size_t>(k.B) * k.NH * k.T), DType::F32);
      gpu().attention_fwd(out.view(), lse.view(), qkv.view(), k.B, k.T, k.NH, k.NKV, HS, nullptr);
      std::vector<unsigned char> first, first_bias;
      for (int run = 0; run < 3; ++run) {
        Tensor dqkv = upload(gpu(), Vec(qkv_elems(k)), DType::BF16);
        Tensor dbias = upload(gpu(), Vec(C_qkv), DType::F32);
        gpu().attention_bwd(dqkv.view(), dbias.view(), dout.view(), qkv.view(), out.view(), lse.view(), k.B, k.T, k.NH,
                            k.NKV, HS, nullptr);
        const auto bits = download_bits(gpu(), dqkv.view()), bias_bits = download_bits(gpu(), dbias.view());
        if (run == 0) first = bits, first_bias = bias_bits;
        EXPECT_TRUE(bits == first) << "run " << run << " differs from run 0";
        EXPECT_TRUE(bias_bits == first_bias) << "run " << run << ": the bias gradient differs from run 0";
      }
    }
  }
}

// C = 96 takes the LayerNorm backward's separate din and column-sum kernels, C = 768 the fused
// one, C = 1600 the fused one with a partly filled last group, C = 4096 the wide rows' one.
TEST_F(CudaOps, EncoderAndLayerNormBwdAreDeterministic) {
  for (const int C : {96, 768, 1600, 4096}) {
    SCOPED_TRACE(announce(str("C=", C)));
    const int B = 8, T = 128, v_local = 64, N = B * T;
    Ints tokens(N);
    for (int n = 0; n < N; ++n) tokens[n] = static_cast<int32_t>(hash3(14, 0, n) % 7);  // hundreds of repeats each
    Tensor tok = upload_ints(gpu(), tokens);
    Tensor dout = upload(gpu(), random_vector(static_cast<size_t>(N) * C, 141), DType::BF16);
    Tensor in = upload(gpu(), residual_stream(static_cast<size_t>(N) * C, 142), DType::BF16);
    Tensor w = upload(gpu(), near_one(C, 143), DType::BF16), b = upload(gpu(), random_vector(C, 144), DType::BF16);
    Tensor ln_out = upload(gpu(), Vec(static_cast<size_t>(N) * C), DType::BF16);
    Tensor mean = upload(gpu(), Vec(N), DType::F32), rstd = upload(gpu(), Vec(N), DType::F32);
    gpu().layernorm_fwd(ln_out.view(), mean.view(), rstd.view(), in.view(), w.view(), b.view(), N, C, 1e-5f);

    std::vector<unsigned char> first[5];
    for (int run = 0; run < 3; ++run) {
      Tensor dwte = upload(gpu(), Vec(static_cast<size_t>(v_local) * C), DType::F32);
      Tensor dwpe = upload(gpu(), Vec(static_cast<size_t>(T) * C), DType::F32);
      Tensor dw = upload(gpu(), Vec(C), DType::F32), db = upload(gpu(), Vec(C), DType::F32);
      Tensor dsum = upload(gpu(), Vec(C), DType::F32);
      Tensor din = upload(gpu(), Vec(static_cast<size_t>(N) * C), DType::BF16);
      gpu().encoder_bwd(dwte.view(), dwpe.view(), dout.view(), tok.ptr<int32_t>(), B, T, C, 0, v_local, nullptr);
      gpu().layernorm_bwd(din.view(), dw.view(), db.view(), dsum.view(), dout.view(), in.view(), w.view(), mean.view(),
                          rstd.view(), N, C);
      const std::vector<unsigned char> bits[5] = {download_bits(gpu(), dwte.view()), download_bits(gpu(), dwpe.view()),
                                                  download_bits(gpu(), dw.view()), download_bits(gpu(), db.view()),
                                                  download_bits(gpu(), dsum.view())};
      for (int i = 0; i < 5; ++i) {
        if (run == 0) first[i] = bits[i];
        EXPECT_TRUE(bits[i] == first[i]) << "output " << i << " of run " << run << " differs from run 0";
      }
    }
  }
}

// C = 96 on the 16-byte path, 4096 and 6144 on the wide one, 37 on the scalar one; N = 1024 rows:
// 16 partial chunks (256 on the wide path).
TEST_F(CudaOps, RmsNormBwdIsDeterministic) {
  for (const int C : {96, 4096, 6144, 37}) {
    SCOPED_TRACE(announce(str("C=", C)));
    const int N = 1024;
    const size_t NC = static_cast<size_t>(N) * C;
    Tensor in = upload(gpu(), residual_stream(NC, 351), DType::BF16), w = upload(gpu(), near_one(C, 352), DType::BF16);
    Tensor dout = upload(gpu(), random_vector(NC, 353), DType::BF16);
    Tensor out = upload(gpu(), Vec(NC), DType::BF16), rstd = upload(gpu(), Vec(N), DType::F32);
    gpu().rmsnorm_fwd(out.view(), rstd.view(), in.view(), w.view(), N, C, 1e-5f);
    std::vector<unsigned char> first[2];
    for (int run = 0; run < 3; ++run) {
      Tensor din = upload(gpu(), Vec(NC), DType::BF16), dw = upload(gpu(), Vec(C), DType::F32);
      gpu().rmsnorm_bwd(din.view(), dw.view(), dout.view(), in.view(), w.view(), rstd.view(), N, C);
      const std::vector<unsigned char> bits[2] = {download_bits(gpu(), din.view()), download_bits(gpu(), dw.view())};
      for (int i = 0; i < 2; ++i) {
        if (run == 0) first[i] = bits[i];
        EXPECT_TRUE(bits[i] == first[i]) << "output " << i << " of run " << run << " differs from run 0";
      }
    }
  }
}

// parallel.tp_fused_sum: the LayerNorms given the other TP rank's partial (a_peer, dout_peer)
// must compute exactly what they compute from the pair's sum made by a separate add, which
// rounds as the all-reduce does. C = 37 takes the scalar paths, 96 the separate backward kernels
// (the summed gradient in scratch), 768 and 1600 the fused backward kernel, 2056 and 4096 the wide
// rows' kernels. The fused calls also
// free the partials themselves (PeerRelease): each must leave its flag at its value and its block
// counter at zero, whichever kernel path ran, N = 0 (no kernel) included. The flag here is in
// this GPU's memory and only its final value is checked; the release's timing against the other
// GPU's copy engine is what cuda_layouts covers (tp2 with fused sums, many partials per slot,
// losses equal to plain tp2's).
TEST_F(CudaOps, LayerNormsAddPeerPartialsExactly) {
  for (const RowsCase& k : {RowsCase{21, 37}, RowsCase{300, 96}, RowsCase{200, 768}, RowsCase{77, 1600},
                            RowsCase{40, 2056}, RowsCase{530, 4096}}) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const int N = k.N, C = k.C;
    const size_t NC = static_cast<size_t>(N) * C;
    auto act = [&](const Vec& v) { return upload(gpu(), v, DType::BF16); };
    auto f32 = [&](size_t n) { return upload(gpu(), Vec(n), DType::F32); };
    Tensor a = act(residual_stream(NC, 161)), peer = act(residual_stream(NC, 162));
    Tensor residual = act(residual_stream(NC, 163));
    Tensor w = act(near_one(C, 164)), b = act(random_vector(C, 165));
    Tensor dout = act(random_vector(NC, 166)), dpeer = act(random_vector(NC, 167));
    std::vector<std::vector<unsigned char>> got[2];
    for (const bool fused : {true, false}) {
      Tensor sum = act(Vec(NC)), out = act(Vec(NC)), pair = act(Vec(NC)), din = act(random_vector(NC, 168));
      Tensor mean = f32(N), rstd = f32(N), dw = f32(C), db = f32(C), ds = f32(C);
      if (fused) {
        Tensor flags = f32(4), counters = f32(2);   // two 64-bit freed flags, two block counters (zeros)
        auto* flag = static_cast<uint64_t*>(flags.view().data);
        auto* counter = static_cast<unsigned*>(counters.view().data);
        gpu_peer().add_layernorm_fwd(sum.view(), out.view(), mean.view(), rstd.view(), a.view(), peer.view(),
                                     residual.view(), w.view(), b.view(), N, C, 1e-5f, PeerRelease{flag, 7, counter});
        gpu_peer().layernorm_bwd(din.view(), dw.view(), db.view(), ds.view(), dout.view(), dpeer.view(), sum.view(),
                                 w.view(), mean.view(), rstd.view(), N, C, PeerRelease{flag + 1, 9, counter + 1});
        uint64_t flag_values[2] = {};
        unsigned counter_values[2] = {1, 1};
        std::memcpy(flag_values, download_bits(gpu(), flags.view()).data(), sizeof flag_values);
        std::memcpy(counter_values, download_bits(gpu(), counters.view()).data(), sizeof counter_values);
        EXPECT_EQ(flag_values[0], 7u) << "add_layernorm_fwd did not free its partial";
        EXPECT_EQ(flag_values[1], 9u) << "layernorm_bwd did not free its partial";
        EXPECT_EQ(counter_values[0], 0u) << "add_layernorm_fwd left its block counter set";
        EXPECT_EQ(counter_values[1], 0u) << "layernorm_bwd left its block counter set";
      } else {
        gpu().add(pair.view(), a.view(), peer.view());
        gpu().add_layernorm_fwd(sum.view(), out.view(), mean.view(), rstd.view(), pair.view(), residual.view(),
                                w.view(), b.view(), N, C, 1e-5f);
        gpu().add(pair.view(), dout.view(), dpeer.view());
        gpu().layernorm_bwd(din.view(), dw.view(), db.view(), ds.view(), pair.view(), sum.view(), w.view(),
                            mean.view(), rstd.view(), N, C);
      }
      for (const Tensor* t : {&sum, &out, &mean, &rstd, &din, &dw, &db, &ds})
        got[fused].push_back(download_bits(gpu(), t->view()));
    }
    const char* names[] = {"sum", "out", "mean", "rstd", "din", "dw", "db", "dsum"};
    for (size_t i = 0; i < got[0].size(); ++i) EXPECT_TRUE(got[0][i] == got[1][i]) << names[i] << " differs";
  }
  // No rows: no LayerNorm kernel runs, and the partials are freed all the same.
  const int C = 768;
  auto act = [&](size_t n) { return upload(gpu(), Vec(n), DType::BF16); };
  auto f32 = [&](size_t n) { return upload(gpu(), Vec(n), DType::F32); };
  Tensor rows = act(C), peer_rows = act(C), w = act(C), b = act(C), stats = f32(1), dw = f32(C), db = f32(C);
  // (0, C) and (0) views that still point somewhere: an empty view is a missing argument.
  const TensorView x = rows.view().slice(0, 0), peer = peer_rows.view().slice(0, 0), s = stats.view().slice(0, 0);
  Tensor flags = f32(4), counters = f32(2);
  auto* flag = static_cast<uint64_t*>(flags.view().data);
  auto* counter = static_cast<unsigned*>(counters.view().data);
  gpu_peer().add_layernorm_fwd(x, x, s, s, x, peer, x, w.view(), b.view(), 0, C, 1e-5f, PeerRelease{flag, 3, counter});
  gpu_peer().layernorm_bwd(x, dw.view(), db.view(), TensorView{}, x, peer, x, w.view(), s, s, 0, C,
                           PeerRelease{flag + 1, 5, counter + 1});
  uint64_t flag_values[2] = {};
  std::memcpy(flag_values, download_bits(gpu(), flags.view()).data(), sizeof flag_values);
  EXPECT_EQ(flag_values[0], 3u) << "add_layernorm_fwd with N = 0 did not free its partial";
  EXPECT_EQ(flag_values[1], 5u) << "layernorm_bwd with N = 0 did not free its partial";
}

// The same for the RMSNorms (Llama with parallel.tp_fused_sum): add_rmsnorm_fwd given a_peer and
// rmsnorm_bwd given dout_peer against the plain ops on the pair's sum made by a separate add, bit
// for bit, freeing their partials (PeerRelease) on every path. C = 37 takes the scalar paths, 96
// the separate backward kernels (the summed gradient in scratch), 768, 1600 and 2048 the fused
// backward kernel, 2056 and 6144 the wide rows' kernels; N = 0 runs no kernel and frees the
// partials all the same.
TEST_F(CudaOps, RmsNormsAddPeerPartialsExactly) {
  for (const RowsCase& k : {RowsCase{21, 37}, RowsCase{300, 96}, RowsCase{200, 768}, RowsCase{77, 1600},
                            RowsCase{64, 2048}, RowsCase{40, 2056}, RowsCase{530, 6144}}) {
    SCOPED_TRACE(announce(str("N=", k.N, " C=", k.C)));
    const int N = k.N, C = k.C;
    const size_t NC = static_cast<size_t>(N) * C;
    auto act = [&](const Vec& v) { return upload(gpu(), v, DType::BF16); };
    auto f32 = [&](size_t n) { return upload(gpu(), Vec(n), DType::F32); };
    Tensor a = act(residual_stream(NC, 171)), peer = act(residual_stream(NC, 172));
    Tensor residual = act(residual_stream(NC, 173)), w = act(near_one(C, 174));
    Tensor dout = act(random_vector(NC, 176)), dpeer = act(random_vector(NC, 177));
    std::vector<std::vector<unsigned char>> got[2];
    for (const bool fused : {true, false}) {
      Tensor sum = act(Vec(NC)), out = act(Vec(NC)), pair = act(Vec(NC)), din = act(random_vector(NC, 178));
      Tensor rstd = f32(N), dw = f32(C);
      if (fused) {
        Tensor flags = f32(4), counters = f32(2);   // two 64-bit freed flags, two block counters (zeros)
        auto* flag = static_cast<uint64_t*>(flags.view().data);
        auto* counter = static_cast<unsigned*>(counters.view().data);
        gpu_peer().add_rmsnorm_fwd(sum.view(), out.view(), rstd.view(), a.view(), peer.view(), residual.view(),
                                   w.view(), N, C, 1e-5f, PeerRelease{flag, 7, counter});
        gpu_peer().rmsnorm_bwd(din.view(), dw.view(), dout.view(), dpeer.view(), sum.view(), w.view(), rstd.view(), N,
                               C, PeerRelease{flag + 1, 9, counter + 1});
        uint64_t flag_values[2] = {};
        unsigned counter_values[2] = {1, 1};
        std::memcpy(flag_values, download_bits(gpu(), flags.view()).data(), sizeof flag_values);
        std::memcpy(counter_values, download_bits(gpu(), counters.view()).data(), sizeof counter_values);
        EXPECT_EQ(flag_values[0], 7u) << "add_rmsnorm_fwd did not free its partial";
        EXPECT_EQ(flag_values[1], 9u) << "rmsnorm_bwd did not free its partial";
        EXPECT_EQ(counter_values[0], 0u) << "add_rmsnorm_fwd left its block counter set";
        EXPECT_EQ(counter_values[1], 0u) << "rmsnorm_bwd left its block counter set";
      } else {
        gpu().add(pair.view(), a.view(), peer.view());
        gpu().add_rmsnorm_fwd(sum.view(), out.view(), rstd.view(), pair.view(), residual.view(), w.view(), N, C,
                              1e-5f);
        gpu().add(pair.view(), dout.view(), dpeer.view());
        gpu().rmsnorm_bwd(din.view(), dw.view(), pair.view(), sum.view(), w.view(), rstd.view(), N, C);
      }
      for (const Tensor* t : {&sum, &out, &rstd, &din, &dw}) got[fused].push_back(download_bits(gpu(), t->view()));
    }
    const char* names[] = {"sum", "out", "rstd", "din", "dw"};
    for (size_t i = 0; i < got[0].size(); ++i) EXPECT_TRUE(got[0][i] == got[1][i]) << names[i] << " differs";
  }
  const int C = 2048;
  auto act = [&](size_t n) { return upload(gpu(), Vec(n), DType::BF16); };
  auto f32 = [&](size_t n) { return upload(gpu(), Vec(n), DType::F32); };
  Tensor rows = act(C), peer_rows = act(C), w = act(C), stats = f32(1), dw = f32(C);
  // (0, C) and (0) views that still point somewhere: an empty view is a missing argument.
  const TensorView x = rows.view().slice(0, 0), peer = peer_rows.view().slice(0, 0), s = stats.view().slice(0, 0);
  Tensor flags = f32(4), counters = f32(2);
  auto* flag = static_cast<uint64_t*>(flags.view().data);
  auto* counter = static_cast<unsigned*>(counters.view().data);
  gpu_peer().add_rmsnorm_fwd(x, x, s, x, peer, x, w.view(), 0, C, 1e-5f, PeerRelease{flag, 3, counter});
  gpu_peer().rmsnorm_bwd(x, dw.view(), x, peer, x, w.view(), s, 0, C, PeerRelease{flag + 1, 5, counter + 1});
  uint64_t flag_values[2] = {};
  std::memcpy(flag_values, download_bits(gpu(), flags.view()).data(), sizeof flag_values);
  EXPECT_EQ(flag_values[0], 3u) << "add_rmsnorm_fwd with N = 0 did not free its partial";
  EXPECT_EQ(flag_values[1], 5u) << "rmsnorm_bwd with N = 0 did not free its partial";
}

// The other ranks' partials of a fused row sum beyond tp = 2 (PeerOps::sum_partials): one pass
// that gives the bits of the chained bf16 adds it replaces, in place into the first partial too,
// for 16-byte-aligned sizes and the element-by-element tail (odd n, a view off alignment).
TEST_F(CudaOps, SumPartialsGivesTheChainedAddsBits) {
  for (const size_t n : {size_t{1} << 20, size_t{4099}}) {
    for (const int count : {2, 3, 7}) {
      SCOPED_TRACE(announce(str("n=", n, " partials=", count)));
      std::vector<Tensor> parts;
      for (int j = 0; j < count; ++j)
        parts.push_back(upload(gpu(), random_vector(n + 1, 181 + static_cast<uint64_t>(j), 2.0f), DType::BF16));
      // n + 1 elements each: the second round reads [1, n + 1), 2 bytes off 16-byte alignment.
      for (const size_t off : {size_t{0}, size_t{1}}) {
        std::vector<TensorView> views;
        for (const Tensor& t : parts) views.push_back(t.view().slice(off, n));
        Tensor chained = upload(gpu(), Vec(n), DType::BF16), out = upload(gpu(), Vec(n), DType::BF16);
        gpu().copy(chained.view(), views[0]);
        for (int j = 1; j < count; ++j) gpu().add(chained.view(), chained.view(), views[static_cast<size_t>(j)]);
        gpu_peer().sum_partials(out.view(), views);
        EXPECT_TRUE(download_bits(gpu(), out.view()) == download_bits(gpu(), chained.view())) << "offset " << off;
        gpu_peer().sum_partials(views[0], views);   // in place
        EXPECT_TRUE(download_bits(gpu(), views[0]) == download_bits(gpu(), chained.view())) << "in place, offset " << off;
      }
    }
  }
}

// The weight gradient (cuBLASLt) and the bias gradient (our column sums) accumulate over two
// calls, as over micro-batches; shapes of GPT-2's MLP. (Run K used cuBLASLt's BGRADB epilogue
// for the bias here; any future fused form must keep this test.)
TEST_F(CudaOps, MatmulBwdIsDeterministic) {
  const int N = 2048, K = 768, M = 3072;
  Tensor dout = upload(gpu(), random_vector(static_cast<size_t>(N) * M, 151), DType::BF16);
  Tensor in = upload(gpu(), random_vector(static_cast<size_t>(N) * K, 152), DType::BF16);
  Tensor w = upload(gpu(), random_vector(static_cast<size_t>(M) * K, 153, 0.05f), DType::BF16);
  std::vector<unsigned char> first[3];
  for (int run = 0; run < 3; ++run) {
    Tensor din = upload(gpu(), Vec(static_cast<size_t>(N) * K), DType::BF16);
    Tensor dw = upload(gpu(), Vec(static_cast<size_t>(M) * K), DType::F32), db = upload(gpu(), Vec(M), DType::F32);
    for (int micro = 0; micro < 2; ++micro)
      gpu().matmul_bwd(din.view(), dw.view(), db.view(), dout.view(), in.view(), w.view(), N, K, M);
    const std::vector<unsigned char> bits[3] = {download_bits(gpu(), din.view()), download_bits(gpu(), dw.view()),
                                                download_bits(gpu(), db.view())};
    for (int i = 0; i < 3; ++i) {
      if (run == 0) first[i] = bits[i];
      EXPECT_TRUE(bits[i] == first[i]) << "output " << i << " of run " << run << " differs from run 0";
    }
    if (run == 0) {  // the bias gradient at this size: twice the column sums of dout, in double
      const Vec g = download(gpu(), dout.view());
      std::vector<double> sums(M, 0.0);
      for (int n = 0; n < N; ++n)
        for (int m = 0; m < M; ++m) sums[m] += g[static_cast<size_t>(n) * M + m];
      Vec want(M);
      for (int m = 0; m < M; ++m) want[m] = static_cast<float>(2.0 * sums[m]);
      const double err = rel_l2(download(gpu(), db.view()), want);
      std::printf("    matmul_bwd dbias N=%d M=%d   rel_l2 %.3g (tolerance 1e-05)\n", N, M, err);
      EXPECT_LE(err, 1e-5);
    }
  }
}


// GEMM autotuning (on by default) may only pick algorithms that give the heuristic's first
// choice's result bit for bit: the GEMMs of GPT-2's block (forward with bias and with the GELU
// epilogue, input gradient with DGELU, weight gradient accumulated over two calls) on a backend
// with cuda.gemm_autotune = false and on one with it on must agree in every bit.
TEST_F(CudaOps, GemmAutotuningChangesNoBit) {
  const int N = 4096, C = 768;
  const GemmCase shapes[] = {{N, C, 3 * C}, {N, C, C}, {N, C, 4 * C}, {N, 4 * C, C}};
  auto run_all = [&](bool autotune) {
    CudaOptions options = g_options;
    options.gemm_autotune = autotune;
    std::unique_ptr<Backend> be = make_cuda_backend(0, options);
    std::vector<std::vector<unsigned char>> bits;
    uint64_t seed = 161;
    for (const GemmCase& k : shapes) {
      const size_t NK = static_cast<size_t>(k.N) * k.K, NM = static_cast<size_t>(k.N) * k.M;
      Tensor in = upload(*be, random_vector(NK, seed++), DType::BF16);
      Tensor w = upload(*be, random_vector(static_cast<size_t>(k.M) * k.K, seed++, 0.05f), DType::BF16);
      Tensor bias = upload(*be, random_vector(k.M, seed++), DType::BF16);
      Tensor dout = upload(*be, random_vector(NM, seed++), DType::BF16);
      Tensor pre_in = upload(*be, random_vector(NK, seed++, 2.0f), DType::BF16);
      Tensor out = upload(*be, Vec(NM), DType::BF16), pre = upload(*be, Vec(NM), DType::BF16);
      Tensor din = upload(*be, Vec(NK), DType::BF16), dw = upload(*be, Vec(static_cast<size_t>(k.M) * k.K), DType::F32);
      be->matmul_fwd(out.view(), in.view(), w.view(), bias.view(), k.N, k.K, k.M);
      bits.push_back(download_bits(*be, out.view()));
      be->matmul_gelu_fwd(out.view(), pre.view(), in.view(), w.view(), bias.view(), k.N, k.K, k.M);
      bits.push_back(download_bits(*be, out.view()));
      bits.push_back(download_bits(*be, pre.view()));
      for (int micro = 0; micro < 2; ++micro)
        be->matmul_gelu_bwd(din.view(), dw.view(), TensorView(), dout.view(), in.view(), w.view(), pre_in.view(), k.N,
                            k.K, k.M);
      bits.push_back(download_bits(*be, din.view()));
      bits.push_back(download_bits(*be, dw.view()));
      be->matmul_bwd(din.view(), TensorView(), TensorView(), dout.view(), in.view(), w.view(), k.N, k.K, k.M);
      bits.push_back(download_bits(*be, din.view()));
    }
    return bits;
  };
  const auto heuristic = run_all(false), tuned = run_all(true);
  ASSERT_EQ(heuristic.size(), tuned.size());
  for (size_t i = 0; i < heuristic.size(); ++i)
    EXPECT_TRUE(heuristic[i] == tuned[i]) << "output " << i % 6 << " of shape " << i / 6 << " differs with autotuning";
}

}  // namespace
}  // namespace trident

// gtest's own flags, plus --attention-kernels auto|wgmma|mma (cuda.attention_kernels).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string kernels = i + 1 < argc ? argv[i + 1] : "";
    if (std::strcmp(argv[i], "--attention-kernels") != 0) {
      std::fprintf(stderr, "cuda_tests: unknown argument %s\n", argv[i]);
      return 2;
    }
    if (kernels != "auto" && kernels != "wgmma" && kernels != "mma") {
      std::fprintf(stderr, "cuda_tests: --attention-kernels takes auto, wgmma or mma\n");
      return 2;
    }
    trident::g_options.attention_kernels = kernels == "mma"     ? trident::AttentionKernels::Mma
                                           : kernels == "wgmma" ? trident::AttentionKernels::Wgmma
                                                                : trident::AttentionKernels::Auto;
    ++i;
  }
  return RUN_ALL_TESTS();
}
