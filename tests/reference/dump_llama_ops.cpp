// Runs one Llama decoder block built from the CPU backend's Llama ops (RMSNorm, fused qkv GEMM,
// RoPE, grouped-query attention, fused residual add + RMSNorm, fused gate/up GEMM, SwiGLU) forward
// and backward on random inputs, and writes inputs, weights, intermediate results and every
// gradient for check_llama_ops.py, and a rotary table at long positions.
// Output: DIR/manifest.json + DIR/data.bin.
//   dump_llama_ops DIR
#include <cstdio>
#include <string>
#include <vector>

#include "reference_dump.hpp"
#include "test_support.hpp"
#include "trident/backend/cpu_backend.hpp"

using namespace trident;

namespace {

using Vec = std::vector<float>;

struct BlockShape {
  std::string name;
  int B, T, C, NH, NKV, HS, F;
  float theta, eps;
};

TensorView view(Vec& v) { return TensorView(v.data(), DType::F32, v.size()); }

// out = block(x): h1 = x + o_proj(attention(rope(qkv_proj(rms(x))))), out = h1 + down(swiglu(gate_up(rms(h1)))).
// The loss is sum(out * r); its gradients w.r.t. x and every weight are dumped.
void run_block(test::ReferenceDump& dump, const BlockShape& s, uint64_t seed) {
  auto be = make_cpu_backend();
  const int N = s.B * s.T, H3 = s.NH + 2 * s.NKV, A = s.NH * s.HS, QKV = H3 * s.HS;
  auto rnd = [&](size_t n, float scale) { return test::random_vector(n, seed++, scale); };
  Vec x = rnd(static_cast<size_t>(N) * s.C, 1.0f), r = rnd(static_cast<size_t>(N) * s.C, 1.0f);
  Vec w1 = rnd(s.C, 0.2f), w2 = rnd(s.C, 0.2f);
  for (float& v : w1) v += 1.0f;
  for (float& v : w2) v += 1.0f;
  // nn.Linear weights (out_features, in_features), scaled so that activations stay O(1).
  Vec wqkv = rnd(static_cast<size_t>(QKV) * s.C, 0.5f), wo = rnd(static_cast<size_t>(s.C) * A, 0.3f);
  Vec wgu = rnd(2 * static_cast<size_t>(s.F) * s.C, 0.3f), wd = rnd(static_cast<size_t>(s.C) * s.F, 0.3f);
  Vec table(static_cast<size_t>(s.T) * s.HS);
  rope_table(table.data(), s.T, s.HS, s.theta);

  // Forward.
  Vec n1(x.size()), rstd1(N), qkv(static_cast<size_t>(N) * QKV), att(static_cast<size_t>(N) * A), lse(s.B * s.NH * s.T);
  Vec o(x.size()), h1(x.size()), n2(x.size()), rstd2(N), gu(2 * static_cast<size_t>(N) * s.F);
  Vec sw(static_cast<size_t>(N) * s.F), m(x.size()), out(x.size());
  be->rmsnorm_fwd(view(n1), view(rstd1), view(x), view(w1), N, s.C, s.eps);
  be->matmul_fwd(view(qkv), view(n1), view(wqkv), TensorView{}, N, s.C, QKV);
  be->rope_fwd(view(qkv), view(table), s.B, s.T, s.NH, s.NKV, s.HS, 0, nullptr);
  be->attention_fwd(view(att), view(lse), view(qkv), s.B, s.T, s.NH, s.NKV, s.HS, nullptr);
  be->matmul_fwd(view(o), view(att), view(wo), TensorView{}, N, A, s.C);
  be->add_rmsnorm_fwd(view(h1), view(n2), view(rstd2), view(o), view(x), view(w2), N, s.C, s.eps);
  be->matmul_fwd(view(gu), view(n2), view(wgu), TensorView{}, N, s.C, 2 * s.F);
  be->swiglu_fwd(view(sw), view(gu), N, s.F);
  be->matmul_fwd(view(m), view(sw), view(wd), TensorView{}, N, s.F, s.C);
  be->add(view(out), view(m), view(h1));

  // Backward of sum(out * r): r flows into the MLP and, through the residual, into h1.
  Vec dsw(sw.size()), dgu(gu.size()), dn2(x.size()), dh1 = r, datt(att.size()), dqkv(qkv.size()), dn1(x.size());
  Vec dwd(wd.size()), dwgu(wgu.size()), dw2(s.C), dwo(wo.size()), dwqkv(wqkv.size()), dw1(s.C);
  be->matmul_bwd(view(dsw), view(dwd), TensorView{}, view(r), view(sw), view(wd), N, s.F, s.C);
  be->swiglu_bwd(view(dgu), view(dsw), view(gu), N, s.F);
  be->matmul_bwd(view(dn2), view(dwgu), TensorView{}, view(dgu), view(n2), view(wgu), N, s.C, 2 * s.F);
  be->rmsnorm_bwd(view(dh1), view(dw2), view(dn2), view(h1), view(w2), view(rstd2), N, s.C);
  be->matmul_bwd(view(datt), view(dwo), TensorView{}, view(dh1), view(att), view(wo), N, A, s.C);
  be->attention_bwd(view(dqkv), TensorView{}, view(datt), view(qkv), view(att), view(lse), s.B, s.T, s.NH, s.NKV, s.HS, nullptr);
  be->rope_bwd(view(dqkv), view(table), s.B, s.T, s.NH, s.NKV, s.HS, 0, nullptr);
  be->matmul_bwd(view(dn1), view(dwqkv), TensorView{}, view(dqkv), view(n1), view(wqkv), N, s.C, QKV);
  Vec dx = dh1;   // the residual's gradient, plus the first RMSNorm's
  be->rmsnorm_bwd(view(dx), view(dw1), view(dn1), view(x), view(w1), view(rstd1), N, s.C);

  dump.manifest()["config"][s.name] = {{"B", s.B}, {"T", s.T}, {"C", s.C}, {"n_head", s.NH}, {"n_kv_head", s.NKV},
                                       {"head_size", s.HS}, {"ffn_hidden_size", s.F}, {"rope_theta", s.theta},
                                       {"norm_eps", s.eps}};
  const std::string p = s.name + ".";
  const std::vector<int64_t> btc = {s.B, s.T, s.C};
  dump.add(p + "x", x, btc);
  dump.add(p + "r", r, btc);
  dump.add(p + "w1", w1, {s.C});
  dump.add(p + "wqkv", wqkv, {QKV, s.C});
  dump.add(p + "wo", wo, {s.C, A});
  dump.add(p + "w2", w2, {s.C});
  dump.add(p + "wgu", wgu, {2 * s.F, s.C});
  dump.add(p + "wd", wd, {s.C, s.F});
  dump.add(p + "out.n1", n1, btc);
  dump.add(p + "out.qkv_rotated", qkv, {s.B, s.T, H3, s.HS});
  dump.add(p + "out.attention", att, {s.B, s.T, s.NH, s.HS});
  dump.add(p + "out.h1", h1, btc);
  dump.add(p + "out.n2", n2, btc);
  dump.add(p + "out.swiglu", sw, {s.B, s.T, s.F});
  dump.add(p + "out.out", out, btc);
  dump.add(p + "grad.qkv", dqkv, {s.B, s.T, H3, s.HS});
  dump.add(p + "grad.gate_up", dgu, {s.B, s.T, 2 * s.F});
  dump.add(p + "grad.x", dx, btc);
  dump.add(p + "grad.w1", dw1, {s.C});
  dump.add(p + "grad.wqkv", dwqkv, {QKV, s.C});
  dump.add(p + "grad.wo", dwo, {s.C, A});
  dump.add(p + "grad.w2", dw2, {s.C});
  dump.add(p + "grad.wgu", dwgu, {2 * s.F, s.C});
  dump.add(p + "grad.wd", dwd, {s.C, s.F});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dump_llama_ops OUTPUT_DIR\n");
    return 2;
  }
  test::ReferenceDump dump(argv[1]);
  // Head sizes 8 and 16, two query heads per key/value head; the second block's C differs from
  // NH * HS (as in models whose attention width is not the hidden size) and uses Llama 3's theta.
  run_block(dump, BlockShape{"hs8", 2, 7, 32, 4, 2, 8, 48, 10000.0f, 1e-5f}, 100);
  run_block(dump, BlockShape{"hs16", 1, 7, 48, 4, 2, 16, 40, 500000.0f, 1e-6f}, 200);
  // The rotary table at Llama 3's head size, theta and long positions.
  const int T = 8192, HS = 128;
  const float theta = 500000.0f;
  std::vector<float> table(static_cast<size_t>(T) * HS);
  rope_table(table.data(), T, HS, theta);
  dump.manifest()["config"]["rope_table"] = {{"T", T}, {"head_size", HS}, {"rope_theta", theta}};
  dump.add("rope_table", table, {T, HS});
  dump.finish();
  std::printf("dump_llama_ops: wrote %s\n", argv[1]);
  return 0;
}
