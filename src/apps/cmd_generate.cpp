// `trident generate`: sample text from a checkpoint with a KV cache (pp = 1, any tp), on CPU
// ranks or GPUs. The model shape comes from the checkpoint's stored configuration.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>

#include "auto_layout.hpp"
#include "checkpoint_config.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/checkpoint.hpp"
#include "trident/io/tokenizer.hpp"
#include "trident/model/generator.hpp"
#include "trident/parallel/collective_error.hpp"
#include "trident/parallel/host_collectives.hpp"

namespace po = boost::program_options;

namespace trident {

namespace {

// Where `make data-gpt2` (tools/fetch_gpt2_tokenizer.sh) puts GPT-2's files.
constexpr const char* kGpt2Vocab = "data/gpt2/encoder.json";
constexpr const char* kGpt2Merges = "data/gpt2/vocab.bpe";

struct GenerateOptions {
  std::string checkpoint, prompt, tokenizer = "auto", vocab, merges;
  int max_new_tokens = 64;
  SamplingParams sampling;
  uint64_t seed = 1234;
  bool stop_at_eot = true;
};

po::options_description generate_options(GenerateOptions& o) {
  po::options_description d("Generation");
  d.add_options()("checkpoint", po::value(&o.checkpoint), "checkpoint file (.h5) to sample from")(
      "prompt", po::value(&o.prompt)->default_value(""), "text to continue; empty starts from <|endoftext|> (or the tokenizer's BOS)")(
      "max-new-tokens", po::value(&o.max_new_tokens)->default_value(64), "tokens to generate")(
      "temperature", po::value(&o.sampling.temperature)->default_value(1.0, "1"), "softmax temperature; 0 = greedy")(
      "top-k", po::value(&o.sampling.top_k)->default_value(0), "sample among the k most likely tokens; 0 = all")(
      "top-p", po::value(&o.sampling.top_p)->default_value(1.0, "1"), "nucleus sampling threshold; 1 = off")(
      "seed", po::value(&o.seed)->default_value(1234), "sampling seed")(
      "stop-at-eot", po::value(&o.stop_at_eot)->default_value(true, "true"), "stop at <|endoftext|>")(
      "tokenizer", po::value(&o.tokenizer)->default_value("auto"),
      "byte, gpt2, a Hugging Face tokenizer.json (or its directory), or auto (byte for vocab_size 257, gpt2 for "
      "50257)")(
      "vocab", po::value(&o.vocab)->default_value(kGpt2Vocab), "gpt2: vocab.json / encoder.json")(
      "merges", po::value(&o.merges)->default_value(kGpt2Merges), "gpt2: merges.txt / vocab.bpe");
  return d;
}

std::unique_ptr<Tokenizer> tokenizer_for(const GenerateOptions& o, int vocab_size) {
  std::string kind = o.tokenizer;
  if (kind == "auto") kind = vocab_size == 257 ? "byte" : vocab_size == 50257 ? "gpt2" : "";
  if (kind.empty())
    throw InputError(str("--tokenizer auto cannot tell the tokenizer of a vocabulary of ", vocab_size,
                         "; pass --tokenizer byte or gpt2"));
  const bool builtin = kind == "byte" || kind == "gpt2";
  std::unique_ptr<Tokenizer> t = kind == "gpt2" ? make_tokenizer(kind, o.vocab, o.merges) : make_tokenizer(kind, "", "");
  // A published model's embedding may be padded past its tokenizer's ids (Qwen: 151936 rows for
  // 151669 tokens); the built-in tokenizers must match exactly.
  if (builtin ? t->vocab_size() != vocab_size : t->vocab_size() > vocab_size)
    throw InputError(str("--tokenizer ", kind, " has ", t->vocab_size(), " tokens but the checkpoint's model has ",
                         vocab_size));
  return t;
}

}  // namespace

int cmd_generate(const Args& args) {
  GenerateOptions o;
  po::options_description extra = generate_options(o);
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident generate --checkpoint FILE [--prompt TEXT] [options]\n"
             "Runs under mpirun like training; the layout is parallel.tp (pp = 1), the rest of the ranks are\n"
             "data-parallel replicas that generate the same text.\n\n" +
             run_options_help(&extra, {"backend", "parallel.tp", "parallel.timeout_s", "parallel.tp_comm_ctas", "cuda."}));
    return 0;
  }
  if (o.checkpoint.empty()) throw InputError("--checkpoint is required (a step_<n>.h5 file)");
  if (o.max_new_tokens < 1) throw InputError(str("--max-new-tokens = ", o.max_new_tokens, ": must be at least 1"));
  if (o.sampling.top_p <= 0 || o.sampling.top_p > 1) throw InputError(str("--top-p = ", o.sampling.top_p, ": must be in (0, 1]"));
  const int world = comm_size(MPI_COMM_WORLD);

  if (parsed.cfg.parallel.pp != 1)
    throw InputError("parallel.pp: generation runs on one pipeline stage; use parallel.tp to split the model");
  CheckpointInfo info;
  RunConfig cfg = config_for_checkpoint(o.checkpoint, parsed.cfg, &info);
  if (cfg.model.score_head)
    throw InputError(str("--checkpoint ", o.checkpoint, ": a reward model (task = reward) scores text but has no LM head "
                         "to generate with; use a language model's checkpoint"));
  std::unique_ptr<Tokenizer> tok;
  collective_check(MPI_COMM_WORLD, [&] { tok = tokenizer_for(o, cfg.model.vocab_size); });
  // One sequence per data-parallel replica.
  cfg.train.micro_batch_size = 1;
  cfg.train.global_batch_size = world / std::max(1, cfg.parallel.tp);
  validate_run_config(cfg, world);
  check_memory_fits(cfg, MPI_COMM_WORLD, false);   // parameters and scratch; the KV cache comes on top

  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  // No activation slot: the Generator keeps its own activations and KV cache, and the head
  // reads only the stage's scratch (a training slot would be B*T of every layer's activations).
  GptStage model(cfg.model, rt.groups, *rt.backend, 1, /*n_slots=*/0, size_t(1) << 20, /*with_grads=*/false);
  collective_check(MPI_COMM_WORLD, [&] { load_checkpoint(o.checkpoint, model, nullptr, rt.groups); });

  std::vector<int32_t> ids = tok->encode(o.prompt);
  if (tok->bos_id() >= 0) ids.insert(ids.begin(), tok->bos_id());
  if (ids.empty()) ids.push_back(tok->eot_id());
  const int max_len = std::min<int>(cfg.model.positions(), static_cast<int>(ids.size()) + o.max_new_tokens);
  if (static_cast<int>(ids.size()) >= cfg.model.positions())
    throw InputError(str("the prompt has ", ids.size(), " tokens; the model's context is ", cfg.model.positions()));
  Generator gen(model, max_len);
  Rng rng(o.seed, 0x67656e);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = gen.feed(ids);
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < o.max_new_tokens) {
    int32_t next = sample_token(logits, o.sampling, rng);
    if (next == tok->eot_id() && o.stop_at_eot) break;
    out.push_back(next);
    if (gen.position() == max_len) break;
    logits = gen.feed({next});
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info(o.prompt + tok->decode(out));
  log_info(str("\n[", out.size(), " tokens in ", s, " s: ", out.size() / s, " tokens/s; checkpoint step ", info.step,
               ", backend ", rt.backend->name(), ", tp ", cfg.parallel.tp, "]"));
  return 0;
}

}  // namespace trident
