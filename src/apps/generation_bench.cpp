// `trident bench --bench.generate`: tokens/s of KV-cache generation (Generator::generate, and its
// prefill and decode steps apart) against a no-grad forward of the same tokens, per batch size.
#include "generation_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "auto_layout.hpp"
#include "op_profile.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/io/random_tokens.hpp"
#include "trident/model/generator.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "trident/train/trainer.hpp"

namespace trident {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// --bench.gen_batches: positive integers separated by commas.
std::vector<int> parse_batches(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const bool digits = !item.empty() && item.size() < 9 && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(item) < 1)
      throw InputError(str("bench.gen_batches = ", quoted_text(text),
                           ": give batch sizes >= 1 separated by commas, e.g. 1,8,64,256"));
    out.push_back(std::stoi(item));
  }
  if (out.empty()) throw InputError("bench.gen_batches is empty: give batch sizes separated by commas, e.g. 1,8,64");
  return out;
}

// One rank's times for one batch size, and what it produced.
struct RankTimes {
  double first_s = 0, generate_s = 0, prefill_s = 0, decode_s = 0, forward_s = 0;
  uint64_t new_tokens = 0, prompt_tokens = 0, forward_tokens = 0;
  long first_plans = 0;   // GEMM plans the first generate() built (device backends)
  StepProfile decode;     // bench.profile: a decode step's ops
};

// Prefill: the prompts fed whole, as many at once as the generator takes in one feed, each fed
// group's first token sampled; then decode steps of every sequence at once (the tokens it drew).
// Returns {prefill seconds, decode seconds}; each step ends waiting for its sampled tokens, so the
// backend is idle at both ends. With `profiled`, the decode steps run with the backend's op timers
// on (and so not replayed as graphs: a replay stays plain while ops are timed).
std::pair<double, double> time_phases(Generator& gen, const std::vector<std::vector<int32_t>>& prompts,
                                      const GenerationParams& p, uint64_t first, Backend* profiled = nullptr) {
  const int b = static_cast<int>(prompts.size());
  std::vector<int32_t> next(b);
  auto t0 = Clock::now();
  for (int i = 0; i < b;) {
    std::vector<int> slots;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<uint64_t> sequences;
    for (size_t rows = 0; i < b && rows + prompts[i].size() <= static_cast<size_t>(gen.max_rows()); ++i) {
      gen.reset(i);
      slots.push_back(i);
      tokens.push_back(prompts[i]);
      sequences.push_back(first + i);
      rows += prompts[i].size();
    }
    gen.feed(slots, tokens);
    const std::vector<SampledToken> drawn = gen.sample(p.sampling, p.seed, sequences);
    for (size_t k = 0; k < slots.size(); ++k) next[slots[k]] = drawn[k].token;
  }
  const double prefill_s = seconds_since(t0);
  std::vector<int> slots(b);
  std::vector<std::vector<int32_t>> tokens(b);
  std::vector<uint64_t> sequences(b);
  for (int i = 0; i < b; ++i) slots[i] = i, sequences[i] = first + i;
  if (profiled) profiled->set_profiling(true);
  t0 = Clock::now();
  for (int step = 1; step < p.max_new_tokens; ++step) {
    for (int i = 0; i < b; ++i) tokens[i].assign(1, next[i]);
    gen.feed(slots, tokens);
    const std::vector<SampledToken> drawn = gen.sample(p.sampling, p.seed, sequences);
    for (int i = 0; i < b; ++i) next[i] = drawn[i].token;
  }
  const double decode_s = seconds_since(t0);
  if (profiled) profiled->set_profiling(false);
  return {prefill_s, decode_s};
}

// The largest divisor of b that is at most `most`: the forward's micro-batch, so that it runs
// exactly b sequences.
int micro_batch_for(int b, int most) {
  for (int mb = std::min(b, most); mb > 1; --mb)
    if (b % mb == 0) return mb;
  return 1;
}

// This rank's share of B prompts of P random tokens (sequence i of the random stream is prompt i,
// and its first P + N tokens are what the forward reads): generated twice (the first run also builds
// the GEMM plans of the row counts it feeds, the second reuses them), its phases timed apart, then
// the forward timed after one warm-up micro-batch.
RankTimes bench_batch(const RunConfig& cfg, Runtime& rt, GptStage& weights, const GenerationBenchOptions& o, int B) {
  const ParallelGroups& g = rt.groups;
  Backend& be = *rt.backend;
  const auto [first, last] = prompt_share(static_cast<size_t>(B), g.coord.dp, g.topo.dp());
  const int b = static_cast<int>(last - first), P = o.prompt_len, N = o.new_tokens, T = P + N;
  RankTimes r;
  if (b == 0) return r;   // fewer prompts than replicas: this one idles
  RandomTokens data(T, cfg.model.vocab_size, cfg.train.seed);
  std::vector<int32_t> sequences(static_cast<size_t>(b) * (T + 1));   // (b, T + 1)
  data.samples(static_cast<int64_t>(first), b, sequences.data());
  std::vector<std::vector<int32_t>> prompts(b);
  for (int i = 0; i < b; ++i) {
    const int32_t* s = sequences.data() + static_cast<size_t>(i) * (T + 1);
    prompts[i].assign(s, s + P);
  }

  Generator gen(weights, b, T, o.max_rows);
  GenerationParams p;
  p.sampling.temperature = o.temperature;
  p.max_new_tokens = N;
  p.seed = cfg.train.seed;
  const long plans = be.counters().gemm_plans;
  auto t0 = Clock::now();
  gen.generate(prompts, p, first);
  r.first_s = seconds_since(t0);
  r.first_plans = be.counters().gemm_plans - plans;
  t0 = Clock::now();
  for (const Completion& c : gen.generate(prompts, p, first)) r.new_tokens += c.tokens.size();
  r.generate_s = seconds_since(t0);
  std::tie(r.prefill_s, r.decode_s) = time_phases(gen, prompts, p, first);
  if (o.profile && be.is_device()) {
    const double decode_s = time_phases(gen, prompts, p, first, &be).second;
    r.decode = step_profile(be.take_profile(), N - 1, 1e3 * decode_s);
  }
  r.prompt_tokens = static_cast<uint64_t>(b) * P;

  // The forward's stage: micro-batches of this batch's size, the generator's weights.
  const int mb = micro_batch_for(b, cfg.train.micro_batch_size);
  GptStage model(cfg.model, g, be, mb, /*n_slots=*/1, bucket_elements(cfg.parallel), /*with_grads=*/false);
  be.copy(model.params(), weights.params());

  // The forward's inputs and targets, (b, T) each, in backend memory before the clock starts.
  std::vector<int32_t> host(2 * static_cast<size_t>(b) * T);
  for (int i = 0; i < b; ++i) {
    const int32_t* s = sequences.data() + static_cast<size_t>(i) * (T + 1);
    std::copy(s, s + T, host.begin() + static_cast<size_t>(i) * T);
    std::copy(s + 1, s + T + 1, host.begin() + static_cast<size_t>(b + i) * T);
  }
  Buffer tokens(be, host.size() * sizeof(int32_t));
  TensorView all = tokens.view(DType::I32).slice(0, host.size());
  be.copy_from_host(all, host.data());
  const size_t rows = static_cast<size_t>(mb) * T, inputs = static_cast<size_t>(b) * T;
  auto forward = [&](int micro) {
    model.set_tokens(0, all.slice(micro * rows, rows), all.slice(inputs + micro * rows, rows));
    model.forward(0, /*with_grad=*/false, 0.0f, UnitDone{});
  };
  forward(0);
  be.synchronize();
  t0 = Clock::now();
  for (int micro = 0; micro < b / mb; ++micro) forward(micro);
  be.synchronize();
  r.forward_s = seconds_since(t0);
  r.forward_tokens = inputs;
  return r;
}

}   // namespace

void generation_bench(RunConfig cfg, const GenerationBenchOptions& o) {
  const std::vector<int> batches = parse_batches(o.batches);
  if (o.prompt_len < 1) throw InputError(str("bench.gen_prompt_len = ", o.prompt_len, ": must be at least 1"));
  if (o.new_tokens < 2)
    throw InputError(
        str("bench.gen_new_tokens = ", o.new_tokens, ": must be at least 2 (one decode step after the prefill)"));
  if (o.max_rows < 0)
    throw InputError(str("bench.gen_max_rows = ", o.max_rows, ": must be >= 0 (0 = batch + context)"));
  if (o.temperature < 0)
    throw InputError(str("bench.gen_temperature = ", o.temperature, ": must be >= 0 (0 = greedy)"));
  if (cfg.parallel.pp != 1)
    throw InputError("parallel.pp: --bench.generate times a single pipeline stage (its forward comparison needs the "
                     "whole model on each rank); use parallel.tp");
  if (cfg.task == "reward")
    throw InputError(
        "task reward: a reward model has no LM head to generate with; bench generation with task pretrain");
  const int T = o.prompt_len + o.new_tokens;
  if (T > cfg.model.positions())
    throw InputError(str("bench.gen_prompt_len + bench.gen_new_tokens = ", T, " exceeds the model's context of ",
                         cfg.model.positions(), " positions (",
                         cfg.model.n_positions > 0 ? "model.n_positions" : "model.seq_len", ")"));
  // The benchmark times the model whatever the task: only its shape, layout and micro-batch count.
  const int world = comm_size(MPI_COMM_WORLD), rank = comm_rank(MPI_COMM_WORLD);
  cfg.task = "pretrain";
  cfg.model.seq_len = T;
  cfg.train.global_batch_size = cfg.train.micro_batch_size * (world / std::max(1, cfg.parallel.tp));
  validate_run_config(cfg, world);
  check_memory_fits(cfg, MPI_COMM_WORLD, false);   // parameters and scratch; KV cache and activations on top
  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  const ParallelGroups& g = rt.groups;
  // The weights, initialised once (on the host): each batch size's generator runs on them and its
  // forward's stage gets a copy.
  GptStage weights(cfg.model, g, *rt.backend, 1, /*n_slots=*/0, bucket_elements(cfg.parallel), /*with_grads=*/false);
  weights.init_params(cfg.train.seed);

  if (rank == 0)
    std::printf("\n%-10s %-14s %6s %11s %13s %10s %14s %14s %8s %14s %11s\n", "model", "layout", "batch", "prompt+new",
                "gen tokens/s", "decode ms", "prefill tok/s", "forward tok/s", "gen/fwd", "1st run tok/s",
                "GEMM plans");
  std::vector<std::pair<int, StepProfile>> profiles;   // rank 0's, printed after the table
  for (const int B : batches) {
    const RankTimes mine = bench_batch(cfg, rt, weights, o, B);
    if (!mine.decode.ops.empty()) profiles.emplace_back(B, mine.decode);
    // Tokens over the replicas (each TP group counted once), seconds of the slowest rank.
    const bool counted = g.coord.tp == 0;
    const auto sum = [&](uint64_t v) {
      return static_cast<double>(all_reduce(counted ? v : 0, HostReduce::Sum, MPI_COMM_WORLD));
    };
    const auto slowest = [&](double s) { return all_reduce(s, HostReduce::Max, MPI_COMM_WORLD); };
    const double new_tokens = sum(mine.new_tokens), prompt_tokens = sum(mine.prompt_tokens),
                 forward_tokens = sum(mine.forward_tokens);
    const double first_s = slowest(mine.first_s), gen_s = slowest(mine.generate_s), prefill_s = slowest(mine.prefill_s),
                 decode_s = slowest(mine.decode_s), forward_s = slowest(mine.forward_s);
    if (rank != 0) continue;
    const double gen_rate = new_tokens / gen_s, forward_rate = forward_tokens / forward_s;
    std::printf("%-10s %-14s %6d %11s %13.0f %10.2f %14.0f %14.0f %8.3f %14.0f %11ld\n",
                str("L", cfg.model.n_layer, "C", cfg.model.n_embd).c_str(),
                str("dp", g.topo.dp(), " tp", g.topo.tp()).c_str(), B, str(o.prompt_len, "+", o.new_tokens).c_str(),
                gen_rate, 1e3 * decode_s / (o.new_tokens - 1), prompt_tokens / prefill_s, forward_rate,
                gen_rate / forward_rate, new_tokens / first_s, mine.first_plans);
  }
  if (rank != 0) return;
  std::printf(
      "(random weights and prompts; %s; gen tokens/s: new tokens over all replicas / the slowest rank's "
      "Generator::generate time, after one untimed run; decode ms: one step of every sequence at once (its blocks and its head each one CUDA graph at tp 1); "
      "prefill: the prompts fed whole, their first token sampled; forward: no-grad forward with the loss of "
      "the same batch x (prompt+new) tokens in micro-batches of at most train.micro_batch_size; 1st run: the untimed "
      "run's rate and the GEMM plans it built on rank 0 (cuBLASLt plans, autotuned, one per new row count); "
      "tokens per feed: %s; backend %s)\n",
      o.temperature > 0 ? str("sampled at temperature ", o.temperature, " on the device").c_str()
                        : "greedy, on the device",
      o.max_rows > 0 ? str("at most max(", o.max_rows, ", slots + context)").c_str() : "at most slots + context",
      rt.backend->name().c_str());
  for (const auto& [B, prof] : profiles) {
    std::printf("\nbatch %d:", B);
    print_profile(prof, o.new_tokens - 1, "decode step");
  }
}

}   // namespace trident
