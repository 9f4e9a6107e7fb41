// `trident bench`: training throughput of a configuration on random tokens (warm-up steps, then
// timed steps; one table), with --kernels achieved TFLOP/s and GB/s of the hot kernels, or with
// --generate KV-cache generation's tokens/s against a plain forward (generation_bench.hpp).
#include <boost/program_options.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "auto_layout.hpp"
#include "commands.hpp"
#include "generation_bench.hpp"
#include "op_profile.hpp"
#include "progress.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/planner.hpp"
#include "trident/train/schedule.hpp"
#include "trident/train/trainer.hpp"

namespace po = boost::program_options;

namespace trident {

namespace {

struct BenchOptions {
  int warmup = 3, steps = 10;
  bool sync_steps = false;   // wait for each step before queuing the next (as before queue_step)
  int profile_steps = 2;   // profiled steps after the timed ones (GPU backends)
  bool profile = false;    // print the per-op table of those steps
  bool kernels = false;
  bool generate = false;
  GenerationBenchOptions gen;
};

// The host times of steps [first, first + n) (Trainer::train_steps).
std::vector<double> run_steps(Trainer& trainer, int first, int n, bool sync) {
  std::vector<double> ms;
  for (const StepStats& s : trainer.train_steps(first, n, sync)) ms.push_back(s.step_ms);
  return ms;
}

// Every rank's GpuTelemetry at rank 0 (others get an empty vector); rank 0's note stands for all
// (print_telemetry prints it only where rank 0 has no sample).
std::vector<GpuTelemetry> gather_telemetry(const GpuTelemetry& mine, int rank) {
  const std::array<double, 5> sent = {static_cast<double>(mine.count), mine.sm_mhz_median, mine.sm_mhz_min,
                                      mine.power_w_median, mine.temp_c_max};
  const std::vector<std::array<double, 5>> all = all_gather(sent, MPI_COMM_WORLD);
  std::vector<GpuTelemetry> out;
  if (rank != 0) return out;
  for (size_t r = 0; r < all.size(); ++r) {
    const std::array<double, 5>& v = all[r];
    out.push_back(GpuTelemetry{static_cast<int>(v[0]), v[1], v[2], v[3], v[4], r == 0 ? mine.note : ""});
  }
  return out;
}

// One line after the table: each rank's GPU clock, power and temperature over the timed steps
// (up to 8 ranks listed; beyond, the spread of the ranks' medians).
void print_telemetry(const std::vector<GpuTelemetry>& d) {
  if (d.empty()) return;
  if (d[0].count == 0) {
    std::printf("(GPU clock and power: not sampled: %s)\n", d[0].note.c_str());
    return;
  }
  if (d.size() <= 8) {
    std::string ranks;
    for (size_t r = 0; r < d.size(); ++r)
      ranks += d[r].count == 0 ? str(r ? "; " : "", "rank ", r, ": not sampled")
                               : str(r ? "; " : "", "rank ", r, ": SM ", std::lround(d[r].sm_mhz_median),
                                     " MHz (min ", std::lround(d[r].sm_mhz_min), "), ",
                                     std::lround(d[r].power_w_median), " W, ", std::lround(d[r].temp_c_max), " C");
    std::printf("(GPU during the timed steps, medians of NVML samples: %s)\n", ranks.c_str());
    return;
  }
  std::vector<double> mhz, watts;
  for (const GpuTelemetry& s : d)
    if (s.count > 0) mhz.push_back(s.sm_mhz_median), watts.push_back(s.power_w_median);
  std::sort(mhz.begin(), mhz.end());
  std::sort(watts.begin(), watts.end());
  std::printf("(GPU during the timed steps, the medians of the %zu sampled ranks of %zu: SM %.0f / %.0f / %.0f MHz, "
              "power %.0f / %.0f / %.0f W (min / median / max))\n",
              mhz.size(), d.size(), mhz.front(), mhz[mhz.size() / 2], mhz.back(), watts.front(),
              watts[watts.size() / 2], watts.back());
}

StepProfile profile_steps(Trainer& trainer, Backend& be, int first_step, int steps, bool sync) {
  if (steps <= 0) return StepProfile{};
  be.set_profiling(true);
  double step_ms = 0;
  for (double ms : run_steps(trainer, first_step, steps, sync)) step_ms += ms;
  be.set_profiling(false);
  return step_profile(be.take_profile(), steps, step_ms);
}


// One line after the table: the planner's memory per rank (its busiest stage) term by term beside
// the allocator's peak and the GPU-reported peak (largest rank each); tools/perf/plan_vs_peak.sh
// reads it.
void print_memory(const MemoryEstimate& plan, double allocator_peak, double gpu_peak) {
  constexpr double kGiB = double(1 << 30);
  char gpu[64] = "n/a (no GPU)";
  if (gpu_peak >= 0) std::snprintf(gpu, sizeof gpu, "%.3f GiB (cudaMemGetInfo, largest rank)", gpu_peak / kGiB);
  std::printf("(memory per rank: planned %.3f GiB = arenas %.3f + outside them %.3f (CUDA context %.3f, cuBLASLt "
              "%.3f, NCCL %.3f); allocator peak %.3f GiB; GPU-reported peak %s)\n",
              plan.total() / kGiB, plan.arenas() / kGiB, plan.outside_arenas() / kGiB, plan.cuda_context / kGiB,
              plan.gemm_workspace / kGiB, plan.nccl_buffers / kGiB, allocator_peak / kGiB, gpu);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times fn (which queues work on the backend) over `reps` repetitions after two warm-ups.
template <class Fn>
double time_op(Backend& be, int reps, Fn&& fn) {
  for (int i = 0; i < 2; ++i) fn();
  be.synchronize();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  be.synchronize();
  return seconds_since(t0) / reps;
}

// One row of the kernel table: time, achieved rate, and the rate as a share of the ceiling it
// is bound by (the measured device-memory copy or bf16 GEMM rate).
struct KernelRow {
  double ms, rate, ceiling;
  void print(const char* name) const {
    std::printf("%-36s %10.3f %13.4g %9.0f%%\n", name, ms, rate, 100 * rate / ceiling);
  }
};

// The hot kernels at GPT-2 and Llama shapes (smaller on a CPU, named in each row). The ceilings are
// measured first on the same backend: a device-to-device copy (bytes read + written) and a
// square GEMM in the compute dtype (2 n^3 FLOPs).
void kernel_bench(Backend& be) {
  const bool dev = be.is_device();
  const DType act = be.compute_dtype();
  const int reps = dev ? 20 : 2;
  auto buf = [&](DType t, size_t n) { return Buffer(be, n * dtype_size(t)); };
  auto view = [](const Buffer& b, DType t, size_t n) { return b.view(t).slice(0, n); };
  char name[80];

  double copy_gbs = 0, gemm_tflops = 0;
  {
    const size_t n = dev ? size_t(1) << 28 : size_t(1) << 22;   // fp32: 1 GiB on a device, 16 MiB on a CPU
    Buffer a = buf(DType::F32, n), b = buf(DType::F32, n);
    const double s = time_op(be, reps, [&] { be.copy(view(b, DType::F32, n), view(a, DType::F32, n)); });
    copy_gbs = 2.0 * n * sizeof(float) / s / 1e9;
  }
  const int g = dev ? 8192 : 512;
  {
    const size_t n = size_t(g) * g;
    Buffer x = buf(act, n), w = buf(act, n), y = buf(act, n);
    const double s = time_op(be, reps, [&] {
      be.matmul_fwd(view(y, act, n), view(x, act, n), view(w, act, n), TensorView{}, g, g, g);
    });
    gemm_tflops = 2.0 * g * g * double(g) / s / 1e12;
  }
  std::printf("%-36s %10s %13s %10s\n", "kernel", "ms", "TFLOP/s|GB/s", "of ceiling");
  std::snprintf(name, sizeof name, "ceiling: copy %s (read + write)", dev ? "1 GiB" : "16 MiB");
  std::printf("%-36s %10s %13.4g\n", name, "", copy_gbs);
  std::snprintf(name, sizeof name, "ceiling: GEMM %s %d^3", dtype_name(act), g);
  std::printf("%-36s %10s %13.4g\n", name, "", gemm_tflops);
  auto memory_row = [&](double s, double bytes) { return KernelRow{s * 1e3, bytes / s / 1e9, copy_gbs}; };

  // B 8 (issue 5's target-4 shapes, whose tensors fit in L2) and, on a GPU, GPT-2 124M's
  // training shape B 32, whose tensors (96 MB of K/V tiles) do not fit in the 50 MB L2; then
  // grouped-query attention at Llama-3.2-1B's (32 query, 8 key/value heads of 64) and Llama-3-8B's
  // (32 and 8 heads of 128) shapes, at their training lengths on a GPU.
  struct AttentionShape {
    int HS, T, B, NH, NKV;
  };
  const std::vector<AttentionShape> attention_shapes =
      dev ? std::vector<AttentionShape>{{64, 1024, 8, 12, 12}, {64, 4096, 8, 12, 12},   {128, 1024, 8, 16, 16},
                                        {128, 4096, 8, 16, 16}, {64, 1024, 32, 12, 12}, {64, 2048, 8, 32, 8},
                                        {128, 4096, 2, 32, 8}}
          : std::vector<AttentionShape>{{64, 128, 1, 12, 12}, {64, 256, 1, 12, 12}, {128, 128, 1, 16, 16},
                                        {128, 256, 1, 16, 16}, {64, 256, 1, 32, 8}, {128, 256, 1, 32, 8}};
  for (const auto [HS, T, B, NH, NKV] : attention_shapes) {
    const size_t n = static_cast<size_t>(B) * T * NH * HS, n_qkv = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
    const size_t n_bias = static_cast<size_t>(NH + 2 * NKV) * HS;
    Buffer qkv = buf(act, n_qkv), out = buf(act, n), lse = buf(DType::F32, size_t(B) * NH * T),
           dqkv = buf(act, n_qkv), dbias = buf(DType::F32, n_bias);
    // With the qkv bias gradient, as the model runs it.
    double s = time_op(be, reps, [&] {
      be.attention_fwd(view(out, act, n), view(lse, DType::F32, size_t(B) * NH * T), view(qkv, act, n_qkv), B, T, NH,
                       NKV, HS, nullptr);
      be.attention_bwd(view(dqkv, act, n_qkv), view(dbias, DType::F32, n_bias), view(out, act, n),
                       view(qkv, act, n_qkv), view(out, act, n), view(lse, DType::F32, size_t(B) * NH * T), B, T, NH,
                       NKV, HS, nullptr);
    });
    // Causal: half of the T x T scores of every query head. Forward 2 GEMMs, backward 5 (2.5x the
    // forward).
    const double flops = 3.5 * 4.0 * B * NH * double(T) * T * HS * 0.5;
    if (NKV == NH)
      std::snprintf(name, sizeof name, "attention fwd+bwd HS=%d T=%d B=%d", HS, T, B);
    else  // fwd+bwd too, named shorter to fit the column
      std::snprintf(name, sizeof name, "attention GQA%d/%d HS=%d T=%d B=%d", NH, NKV, HS, T, B);
    KernelRow{s * 1e3, flops / s / 1e12, gemm_tflops}.print(name);
  }
  // GPT-2 124M's width, then (on a GPU) the 1.5B-class tp config's, GPT-2 XL's (the fused
  // backward with a partly filled last group) and a 6.7B GPT's (the wide rows' kernels), at the
  // same number of elements.
  for (const int C : dev ? std::vector<int>{768, 1536, 1600, 4096} : std::vector<int>{768}) {
    const int N = (dev ? 16384 : 1024) * 768 / C;
    Buffer x = buf(act, size_t(N) * C), y = buf(act, size_t(N) * C), w = buf(act, C), b = buf(act, C),
           mean = buf(DType::F32, N), rstd = buf(DType::F32, N);
    double s = time_op(be, reps, [&] {
      be.layernorm_fwd(view(y, act, size_t(N) * C), view(mean, DType::F32, N), view(rstd, DType::F32, N),
                       view(x, act, size_t(N) * C), view(w, act, C), view(b, act, C), N, C, 1e-5f);
    });
    std::snprintf(name, sizeof name, "layernorm fwd N=%d C=%d", N, C);
    memory_row(s, 2.0 * N * C * dtype_size(act)).print(name);
    Buffer dy = buf(act, size_t(N) * C), dx = buf(act, size_t(N) * C), dw = buf(DType::F32, C), db = buf(DType::F32, C),
           ds = buf(DType::F32, C);
    // With the column sums of the residual gradient (a bias gradient), as the model runs it.
    s = time_op(be, reps, [&] {
      be.layernorm_bwd(view(dx, act, size_t(N) * C), view(dw, DType::F32, C), view(db, DType::F32, C),
                       view(ds, DType::F32, C), view(dy, act, size_t(N) * C), view(x, act, size_t(N) * C),
                       view(w, act, C), view(mean, DType::F32, N), view(rstd, DType::F32, N), N, C);
    });
    // Reads dout, in and the residual gradient; writes the residual gradient.
    std::snprintf(name, sizeof name, "layernorm bwd N=%d C=%d", N, C);
    memory_row(s, 4.0 * N * C * dtype_size(act)).print(name);
  }
  // The Llama ops at Llama-3.2-1B's widths (C 2048, FFN 8192, NH 32, NKV 8, HS 64), 4096 rows
  // on a GPU (B 2 at T 2048), 256 on a CPU.
  {
    const int N = dev ? 4096 : 256, C = 2048, F = 8192, NH = 32, NKV = 8, HS = 64;
    const size_t NF = size_t(N) * F, n_qkv = size_t(N) * (NH + 2 * NKV) * HS;
    // The RMSNorms at C 2048 and then on the wide rows' kernels: Llama-3-8B's C 4096 at B 2, T 4096,
    // and the 16B shape's C 6144 on one rank's rows at tp 4 with sequence parallelism (B 1, T 4096).
    struct NormShape {
      int N, C;
    };
    const std::vector<NormShape> norm_shapes =
        dev ? std::vector<NormShape>{{N, C}, {8192, 4096}, {1024, 6144}} : std::vector<NormShape>{{N, C}, {64, 6144}};
    double s = 0;
    for (const auto [rows, cols] : norm_shapes) {
      const size_t n = size_t(rows) * cols;
      Buffer nx = buf(act, n), ny = buf(act, n), ndy = buf(act, n), ndx = buf(act, n), nw = buf(act, cols),
             nrstd = buf(DType::F32, rows), ndw = buf(DType::F32, cols);
      s = time_op(be, reps, [&] {
        be.rmsnorm_fwd(view(ny, act, n), view(nrstd, DType::F32, rows), view(nx, act, n), view(nw, act, cols), rows,
                       cols, 1e-5f);
      });
      std::snprintf(name, sizeof name, "rmsnorm fwd N=%d C=%d", rows, cols);
      memory_row(s, 2.0 * n * dtype_size(act)).print(name);
      s = time_op(be, reps, [&] {
        be.rmsnorm_bwd(view(ndx, act, n), view(ndw, DType::F32, cols), view(ndy, act, n), view(nx, act, n),
                       view(nw, act, cols), view(nrstd, DType::F32, rows), rows, cols);
      });
      // Reads dout, in and the residual gradient; writes the residual gradient.
      std::snprintf(name, sizeof name, "rmsnorm bwd N=%d C=%d", rows, cols);
      memory_row(s, 4.0 * n * dtype_size(act)).print(name);
    }
    Buffer gu = buf(act, 2 * NF), h = buf(act, NF), dgu = buf(act, 2 * NF);
    s = time_op(be, reps, [&] {
      be.swiglu_fwd(view(h, act, NF), view(gu, act, 2 * NF), N, F);
      be.swiglu_bwd(view(dgu, act, 2 * NF), view(h, act, NF), view(gu, act, 2 * NF), N, F);
    });
    // Forward: reads 2 NF, writes NF; backward: reads 3 NF, writes 2 NF.
    std::snprintf(name, sizeof name, "swiglu fwd+bwd N=%d F=%d", N, F);
    memory_row(s, 8.0 * NF * dtype_size(act)).print(name);
    std::vector<float> host(size_t(N) * HS);
    rope_table(host.data(), N, HS, 500000.0f);
    Buffer table = buf(DType::F32, host.size()), qkv = buf(act, n_qkv);
    be.copy_from_host(view(table, DType::F32, host.size()), host.data());
    s = time_op(be, reps, [&] {
      be.rope_fwd(view(qkv, act, n_qkv), view(table, DType::F32, host.size()), 1, N, NH, NKV, HS, 0, nullptr);
      be.rope_bwd(view(qkv, act, n_qkv), view(table, DType::F32, host.size()), 1, N, NH, NKV, HS, 0, nullptr);
    });
    // Each pass reads and writes the q and k heads (the table is small and cached).
    std::snprintf(name, sizeof name, "rope fwd+bwd T=%d NH=%d NKV=%d", N, NH, NKV);
    memory_row(s, 4.0 * N * (NH + NKV) * HS * dtype_size(act)).print(name);
  }
  {
    const int R = dev ? 4096 : 64, V = 50304;
    std::vector<int32_t> host(R, 7);
    Buffer logits = buf(act, size_t(R) * V), rowmax = buf(DType::F32, R), stats = buf(DType::F32, 2 * size_t(R)),
           losses = buf(DType::F32, R), targets = buf(DType::I32, R);
    be.copy_from_host(view(targets, DType::I32, R), host.data());
    const int32_t* t = view(targets, DType::I32, R).as<int32_t>();
    double s = time_op(be, reps, [&] {
      be.xent_max(view(rowmax, DType::F32, R), view(logits, act, size_t(R) * V), R, V, 50257);
      be.xent_stats(view(stats, DType::F32, 2 * size_t(R)), view(logits, act, size_t(R) * V), view(rowmax, DType::F32, R), t,
                    R, V, 50257, 0);
      be.xent_bwd(view(losses, DType::F32, R), view(logits, act, size_t(R) * V), view(rowmax, DType::F32, R),
                  view(stats, DType::F32, 2 * size_t(R)), t, R, V, 50257, 0, 1.0f);
    });
    // Three reads of the logits and one write.
    std::snprintf(name, sizeof name, "cross-entropy R=%d V=%d", R, V);
    memory_row(s, 4.0 * R * V * dtype_size(act)).print(name);
    s = time_op(be, reps, [&] {
      be.xent_fused(view(losses, DType::F32, R), view(logits, act, size_t(R) * V), view(rowmax, DType::F32, R),
                    view(stats, DType::F32, 2 * size_t(R)), t, R, V, 50257, 1.0f);
    });
    // The bytes of one read and one write (the fused kernel's second read is meant to hit L2).
    std::snprintf(name, sizeof name, "cross-entropy fused R=%d", R);
    memory_row(s, 2.0 * R * V * dtype_size(act)).print(name);
  }
  {
    const size_t n = dev ? size_t(1) << 26 : size_t(1) << 20;
    Buffer p = buf(act, n), st = buf(DType::F32, 4 * n);
    TensorView s4 = st.view(DType::F32);
    AdamWArgs a;
    a.lr = 1e-4f;
    double s = time_op(be, reps, [&] {
      be.adamw(view(p, act, n), s4.slice(0, n), s4.slice(n, n), s4.slice(2 * n, n), s4.slice(3 * n, n), a);
    });
    // Reads grad, master, m, v; writes master, m, v, param.
    std::snprintf(name, sizeof name, "adamw n=%zuM", n >> 20);
    memory_row(s, (28.0 + dtype_size(act)) * n).print(name);
  }
}

}  // namespace

int cmd_bench(const Args& args) {
  BenchOptions o;
  po::options_description extra("Benchmark");
  extra.add_options()("bench.warmup", po::value(&o.warmup)->default_value(3), "untimed steps first")(
      "bench.steps", po::value(&o.steps)->default_value(10), "timed steps")(
      "bench.kernels", po::bool_switch(&o.kernels), "time the hot kernels instead of training steps")(
      "bench.profile", po::bool_switch(&o.profile), "also print GPU time per op of the profiled steps")(
      "bench.sync_steps", po::bool_switch(&o.sync_steps),
      "wait for each step's loss before queuing the next (by default the next step is queued first, so the "
      "device does not wait for the host between steps)")(
      "bench.profile_steps", po::value(&o.profile_steps)->default_value(2),
      "steps timed op by op after the timed steps (GPU backends; 0 = none)")(
      "bench.generate", po::bool_switch(&o.generate),
      "time batched KV-cache generation against a plain forward of the same tokens instead of training steps "
      "(pp 1, any tp; each data-parallel replica generates its share of the prompts)")(
      "bench.gen_batches", po::value(&o.gen.batches)->default_value(o.gen.batches),
      "--bench.generate: prompts over all replicas, one table row per value (comma-separated)")(
      "bench.gen_prompt_len", po::value(&o.gen.prompt_len)->default_value(o.gen.prompt_len),
      "--bench.generate: random tokens per prompt")(
      "bench.gen_new_tokens", po::value(&o.gen.new_tokens)->default_value(o.gen.new_tokens),
      "--bench.generate: tokens generated per prompt (no stop token)")(
      "bench.gen_temperature", po::value(&o.gen.temperature)->default_value(o.gen.temperature, "0"),
      "--bench.generate: sampling temperature on the device; 0 = greedy")(
      "bench.gen_max_rows", po::value(&o.gen.max_rows)->default_value(o.gen.max_rows),
      "--bench.generate: tokens one generation step takes at most (prefill of several prompts at once); "
      "0 = the generator's default, its batch + context");
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident bench [--config FILE]... [--section.key VALUE]... [--bench.kernels | --bench.generate]\n"
             "Trains on random tokens (no dataset needed) and prints one table.\n\n" +
             run_options_help(&extra, {"backend", "task", "dpo.", "model.", "parallel.", "train.micro_batch_size",
                                       "train.global_batch_size", "train.lr", "train.min_lr", "train.warmup_steps",
                                       "train.weight_decay", "train.beta1", "train.beta2", "train.eps",
                                       "train.grad_clip", "train.seed", "train.steps", "cuda."}));
    return 0;
  }
  RunConfig cfg = parsed.cfg;
  if (o.generate && o.kernels) throw InputError("--bench.generate and --bench.kernels: give one of them");
  if (o.generate) {
    o.gen.profile = o.profile;
    generation_bench(cfg, o.gen);
    return 0;
  }
  const int world = comm_size(MPI_COMM_WORLD), rank = comm_rank(MPI_COMM_WORLD);
  if (o.kernels) {   // one process times the kernels; the layout only has to be valid
    cfg.parallel = ParallelConfig{};
    cfg.train.global_batch_size = cfg.train.micro_batch_size * world;
  }
  validate_run_config(cfg, world);
  if (o.warmup < 0 || o.steps < 1) throw InputError("bench.warmup must be >= 0 and bench.steps >= 1");
  if (cfg.task == "dpo" && cfg.dpo.reference == "precomputed")
    throw InputError("dpo.reference = precomputed: trident bench's random tokens have no reference file; bench "
                     "with dpo.reference = model (its cost is the precomputed run's plus the reference forward)");
  if (o.profile_steps < 0) throw InputError("bench.profile_steps must be >= 0");
  if (!o.kernels) check_memory_fits(cfg, MPI_COMM_WORLD, true);
  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  if (o.kernels) {
    if (rank == 0) kernel_bench(*rt.backend);
    return 0;
  }
  log_info(describe_nodes(cfg, MPI_COMM_WORLD));
  RandomTokens data(cfg.model.seq_len, cfg.model.vocab_size, cfg.train.seed);
  Trainer trainer(cfg, rt.groups, *rt.backend, data);
  // The GPU's memory in use after the warm-up (NCCL connects its channels at the first
  // collectives), the timed and the profiled steps; the largest is the run's peak.
  DevicePeak gpu_peak;
  run_steps(trainer, 0, o.warmup, o.sync_steps);
  gpu_peak.sample(*rt.backend);
  const BackendCounters before = rt.backend->counters();
  rt.backend->start_telemetry();
  std::vector<double> ms = run_steps(trainer, o.warmup, o.steps, o.sync_steps);
  const GpuTelemetry device = rt.backend->stop_telemetry();
  gpu_peak.sample(*rt.backend);
  const BackendCounters after = rt.backend->counters();
  const int profiled = rt.backend->is_device() ? o.profile_steps : 0;
  const StepProfile prof = profile_steps(trainer, *rt.backend, o.warmup + o.steps, profiled, o.sync_steps);
  gpu_peak.sample(*rt.backend);
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const double tokens = static_cast<double>(cfg.train.global_batch_size) * cfg.model.seq_len;
  const double tok_s = tokens / (median / 1e3);
  const uint64_t max_peak = all_reduce<uint64_t>(rt.backend->peak_bytes(), HostReduce::Max, MPI_COMM_WORLD);
  const std::vector<GpuTelemetry> devices = gather_telemetry(device, rank);
  // -1: a rank without a reading (the CPU backend, or cudaMemGetInfo failed).
  const double most_gpu =
      all_reduce(std::isfinite(gpu_peak.bytes()) ? gpu_peak.bytes() : -1.0, HostReduce::Max, MPI_COMM_WORLD);
  if (rank != 0) return 0;
  const double mfu = rt.backend->is_device() ? model_flops_utilisation(cfg.model, tok_s, world) : 0;
  // The N of the MFU formula (flops_per_token): the blocks and the LM head, not the embedding.
  const ModelConfig& m = cfg.model;
  const double matmul_params = (flops_per_token(m) - 12.0 * m.n_layer * m.n_embd * m.seq_len) / 6;
  const std::string wait =
      profiled ? str(static_cast<int>(std::lround(1000 * prof.wait_ms / prof.step_ms)) / 10.0, "%") : "n/a";
  std::printf("\n%-10s %-34s %6s %12s %10s %8s %12s %10s\n", "model", "layout", "ranks", "tokens/s", "step ms", "MFU",
              "peak GiB/rank", "comm wait");
  std::printf("%-10s %-34s %6d %12.0f %10.1f %7.1f%% %12.2f %10s\n",
              str("L", cfg.model.n_layer, "C", cfg.model.n_embd).c_str(),
              str("dp", cfg.parallel.dp, " tp", cfg.parallel.tp, " pp", cfg.parallel.pp, " z", cfg.parallel.zero, " B",
                  cfg.train.micro_batch_size, " G", cfg.train.global_batch_size)
                  .c_str(),
              world, tok_s, median, mfu * 100, max_peak / double(1 << 30), wait.c_str());
  std::printf("(median of %d timed steps after %d warm-up, %s; MFU = (6N + 12*L*C*T) * tokens/s / (%.0f TFLOP/s x "
              "ranks), N = %.1fM parameters in matmuls (all but the embedding; the LM head counted); backend %s)\n",
              o.steps, o.warmup,
              o.sync_steps ? "each waited for before the next is queued"
                           : "each queued before the previous one's loss is read",
              kPeakBf16TFlops, matmul_params / 1e6, rt.backend->name().c_str());
  print_memory(planned_memory(cfg), max_peak, most_gpu);
  if (profiled)
    std::printf("(comm wait: share of rank 0's step in which its compute stream stalled on a collective or p2p "
                "transfer, from %d profiled steps)\n", profiled);
  if (rt.backend->is_device()) {
    std::printf("(peak GiB: the largest rank's allocations through the backend; NCCL's own buffers and the slots of "
                "parallel.tp_fused_sum, which trident plan counts, are not in it)\n");
    std::printf("(steady state, rank 0, over the %d timed steps: %ld device allocations, %ld GEMM plans built, "
                "%.2f host waits per step)\n",
                o.steps, after.allocations - before.allocations, after.gemm_plans - before.gemm_plans,
                double(after.host_waits - before.host_waits) / o.steps);
    print_telemetry(devices);
  }
  if (profiled && o.profile) print_profile(prof, profiled, "training step");
  return 0;
}

}  // namespace trident
