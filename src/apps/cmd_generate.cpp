// `trident generate`: sample text from a checkpoint with a KV cache (any tp and pp), one prompt or
// a file of them in batches split over the data-parallel ranks, on CPU ranks or GPUs. The model
// shape comes from the checkpoint's stored configuration.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "auto_layout.hpp"
#include "checkpoint_config.hpp"
#include "commands.hpp"
#include "runtime.hpp"
#include "trident/config/parse.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/chat_template.hpp"
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
  std::string checkpoint, prompt, prompts_file, tokenizer = "auto", vocab, merges, chat_template, system;
  int max_new_tokens = 64, batch = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;
  uint64_t seed = 1234;
  bool stop_at_eot = true;
};

po::options_description generate_options(GenerateOptions& o) {
  po::options_description d("Generation");
  d.add_options()("checkpoint", po::value(&o.checkpoint), "checkpoint file (.h5) to sample from")(
      "prompt", po::value(&o.prompt)->default_value(""), "text to continue; empty starts from <|endoftext|> (or the tokenizer's BOS)")(
      "prompts", po::value(&o.prompts_file),
      "file of prompts, one a line (blank lines skipped): plain text, a JSON string, or a JSON object with a "
      "\"prompt\" string; printed as JSON lines")(
      "batch", po::value(&o.batch)->default_value(16), "sequences generated at once (per data-parallel rank)")(
      "stop", po::value(&o.stop)->multitoken(),
      "stop after this token: an id, or a text the tokenizer encodes as one token (repeatable)")(
      "max-new-tokens", po::value(&o.max_new_tokens)->default_value(64), "tokens to generate")(
      "temperature", po::value(&o.sampling.temperature)->default_value(1.0, "1"), "softmax temperature; 0 = greedy")(
      "top-k", po::value(&o.sampling.top_k)->default_value(0), "sample among the k most likely tokens; 0 = all")(
      "top-p", po::value(&o.sampling.top_p)->default_value(1.0, "1"), "nucleus sampling threshold; 1 = off")(
      "seed", po::value(&o.seed)->default_value(1234), "sampling seed")(
      "stop-at-eot", po::value(&o.stop_at_eot)->default_value(true, "true"), "stop at <|endoftext|>")(
      "chat-template", po::value(&o.chat_template),
      "plain, chatml or llama3: each prompt is a user message, rendered as `tokenize --format chat` renders it and "
      "followed by the assistant's header; generation stops at the template's end of turn")(
      "system", po::value(&o.system), "with --chat-template: a system message before each prompt")(
      "tokenizer", po::value(&o.tokenizer)->default_value("auto"),
      "byte, gpt2, a Hugging Face tokenizer.json (or its directory), or auto (the tokenizer the checkpoint keeps, "
      "else byte for vocab_size 257, gpt2 for 50257)")(
      "vocab", po::value(&o.vocab)->default_value(kGpt2Vocab), "gpt2: vocab.json / encoder.json")(
      "merges", po::value(&o.merges)->default_value(kGpt2Merges), "gpt2: merges.txt / vocab.bpe");
  return d;
}

std::unique_ptr<Tokenizer> tokenizer_for(const GenerateOptions& o, int vocab_size) {
  std::string kind = o.tokenizer;
  // The tokenizer the run kept, where it kept one (checked against the vocabulary when it was kept).
  if (kind == "auto") {
    const TokenizerFiles kept = read_checkpoint_tokenizer(o.checkpoint);
    if (!kept.empty()) return make_tokenizer(kept, o.checkpoint);
  }
  if (kind == "auto") kind = vocab_size == 257 ? "byte" : vocab_size == 50257 ? "gpt2" : "";
  if (kind.empty())
    throw InputError(str("--tokenizer auto cannot tell the tokenizer of a vocabulary of ", vocab_size,
                         " (the checkpoint keeps none); pass --tokenizer byte, gpt2 or a tokenizer.json"));
  const bool builtin = kind == "byte" || kind == "gpt2";
  std::unique_ptr<Tokenizer> t = kind == "gpt2" ? make_tokenizer(kind, o.vocab, o.merges) : make_tokenizer(kind, "", "");
  // A published model's embedding may be padded past its tokenizer's ids (Qwen: 151936 rows for
  // 151669 tokens); the built-in tokenizers must match exactly.
  if (builtin ? t->vocab_size() != vocab_size : t->vocab_size() > vocab_size)
    throw InputError(str("--tokenizer ", kind, " has ", t->vocab_size(), " tokens but the checkpoint's model has ",
                         vocab_size));
  return t;
}

// The prompts of --prompts: one a line, blank lines skipped; a line that starts with '"' or '{'
// is JSON (a string, or an object with a "prompt" string).
std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(str("--prompts ", quoted_text(path), ": cannot open the file"));
  std::vector<std::string> prompts;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line[0] != '"' && line[0] != '{') {
      prompts.push_back(line);
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const nlohmann::json* text = j.is_object() && j.contains("prompt") ? &j["prompt"] : &j;
    if (!text->is_string())
      throw InputError(str("--prompts ", quoted_text(path), " line ", number,
                           ": not a JSON string or an object with a \"prompt\" string; plain-text prompts must not "
                           "start with '\"' or '{'"));
    prompts.push_back(text->get<std::string>());
  }
  if (prompts.empty()) throw InputError(str("--prompts ", quoted_text(path), ": no prompt in the file"));
  return prompts;
}

// --stop values as token ids: a number, or a text that is exactly one token.
std::vector<int32_t> stop_tokens(const GenerateOptions& o, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  if (o.stop_at_eot) ids.push_back(tok.eot_id());
  for (const std::string& s : o.stop) {
    const bool number = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 10;
    if (number && std::stoi(s) < tok.vocab_size()) {
      ids.push_back(std::stoi(s));
      continue;
    }
    const std::vector<int32_t> enc = tok.encode(s);
    if (enc.size() != 1)
      throw InputError(str("--stop ", quoted_text(s), " is ", enc.size(),
                           " tokens; give a token id or a text that is exactly one token"));
    ids.push_back(enc[0]);
  }
  return ids;
}

// A prompt's tokens: under a chat template, the text as the user's message (after the system
// message, if any) and the assistant's header; else the tokenizer's BOS first if it has one, and an
// empty prompt starts from <|endoftext|>.
std::vector<int32_t> prompt_tokens(const Tokenizer& tok, const ChatTemplate* tmpl, const std::string& system,
                                   const std::string& text) {
  if (tmpl) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", text});
    return tmpl->render_prompt(messages).tokens;
  }
  std::vector<int32_t> ids = tok.encode(text);
  if (tok.bos_id() >= 0) ids.insert(ids.begin(), tok.bos_id());
  if (ids.empty()) ids.push_back(tok.eot_id());
  return ids;
}

}  // namespace

int cmd_generate(const Args& args) {
  GenerateOptions o;
  po::options_description extra = generate_options(o);
  ParsedArgs parsed = parse_args(args, &extra);
  if (parsed.help) {
    log_info("usage: trident generate --checkpoint FILE [--prompt TEXT | --prompts FILE] [options]\n"
             "Runs under mpirun like training; the layout is parallel.tp and parallel.pp (the stages pass each\n"
             "step's rows on, the last samples), the rest of the ranks are data-parallel replicas: with --prompt\n"
             "each generates the same text, with --prompts each its share of the file (the same tokens as on one\n"
             "rank: sampling is keyed on prompt and position).\n\n" +
             run_options_help(&extra, {"backend", "parallel.tp", "parallel.pp", "parallel.timeout_s",
                                       "parallel.tp_comm_ctas", "cuda."}));
    return 0;
  }
  if (o.checkpoint.empty()) throw InputError("--checkpoint is required (a step_<n>.h5 file)");
  if (o.max_new_tokens < 1) throw InputError(str("--max-new-tokens = ", o.max_new_tokens, ": must be at least 1"));
  if (o.batch < 1) throw InputError(str("--batch = ", o.batch, ": must be at least 1"));
  if (o.sampling.top_p <= 0 || o.sampling.top_p > 1) throw InputError(str("--top-p = ", o.sampling.top_p, ": must be in (0, 1]"));
  if (!o.prompts_file.empty() && !o.prompt.empty()) throw InputError("--prompt and --prompts: give one of them");
  if (!o.system.empty() && o.chat_template.empty())
    throw InputError("--system needs --chat-template (plain, chatml or llama3) to render it");
  const int world = comm_size(MPI_COMM_WORLD);

  CheckpointInfo info;
  RunConfig cfg = config_for_checkpoint(o.checkpoint, parsed.cfg, &info);
  if (cfg.model.score_head)
    throw InputError(str("--checkpoint ", o.checkpoint, ": a reward model (task = reward) scores text but has no LM head "
                         "to generate with; use a language model's checkpoint"));
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatTemplate> tmpl;
  std::vector<std::string> texts{o.prompt};
  GenerationParams gp{o.sampling, o.max_new_tokens, {}, o.seed};
  collective_check(MPI_COMM_WORLD, [&] {
    tok = tokenizer_for(o, cfg.model.vocab_size);
    gp.stop_tokens = stop_tokens(o, *tok);
    if (!o.chat_template.empty()) {
      tmpl = std::make_unique<ChatTemplate>(o.chat_template, *tok);
      gp.stop_tokens.push_back(tmpl->render_prompt({{"user", ""}}).end_of_turn);
    }
    // Ids past the tokenizer's (the padding of a published model's embedding) cannot be decoded.
    if (tok->vocab_size() < cfg.model.vocab_size) gp.sampling.vocab_limit = tok->vocab_size();
    if (!o.prompts_file.empty()) texts = read_prompts(o.prompts_file);
  });
  std::vector<std::vector<int32_t>> prompts;
  size_t longest = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    prompts.push_back(prompt_tokens(*tok, tmpl.get(), o.system, texts[i]));
    longest = std::max(longest, prompts.back().size());
    if (prompts.back().size() >= static_cast<size_t>(cfg.model.positions()))
      throw InputError(str(o.prompts_file.empty() ? std::string("the prompt") : str("prompt ", i + 1), " has ",
                           prompts.back().size(), " tokens; the model's context is ", cfg.model.positions()));
  }
  // Micro-batches of one sequence for the model, pp per data-parallel replica (the fewest a
  // pipeline schedule validates; the generator runs none and has its own batch).
  cfg.train.micro_batch_size = 1;
  cfg.train.global_batch_size = world / std::max(1, cfg.parallel.tp);
  validate_run_config(cfg, world);
  check_memory_fits(cfg, MPI_COMM_WORLD, false);   // parameters and scratch; the KV cache comes on top

  Runtime rt = make_runtime(cfg, MPI_COMM_WORLD);
  // No activation slot: the Generator keeps its own activations and KV cache, and the head
  // reads only the stage's scratch (a training slot would be B*T of every layer's activations).
  GptStage model(cfg.model, rt.groups, *rt.backend, 1, /*n_slots=*/0, size_t(1) << 20, /*with_grads=*/false);
  collective_check(MPI_COMM_WORLD, [&] { load_checkpoint(o.checkpoint, model, nullptr, rt.groups); });

  // A single prompt: every data-parallel replica generates it (as before --prompts existed); a
  // file: each replica its share, sampled with the prompts' global indices as keys.
  const int dp = rt.groups.topo.dp(), dp_rank = rt.groups.coord.dp;
  const auto [first, last] = o.prompts_file.empty() ? std::pair<size_t, size_t>{0, 1} : prompt_share(prompts.size(), dp_rank, dp);
  const std::vector<std::vector<int32_t>> mine(prompts.begin() + first, prompts.begin() + last);
  const int max_len = std::min<int>(cfg.model.positions(), static_cast<int>(longest) + o.max_new_tokens);
  Generator gen(model, std::min<int>(o.batch, std::max<size_t>(1, mine.size())), max_len);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Completion> done = mine.empty() ? std::vector<Completion>{} : gen.generate(mine, gp, first);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The text of a completion, without the stop token that ended it.
  auto completion_text = [&](const Completion& c) {
    return tok->decode(std::vector<int32_t>(c.tokens.begin(), c.tokens.end() - (c.stopped ? 1 : 0)));
  };
  uint64_t generated = 0;
  for (const Completion& c : done) generated += c.tokens.size();
  if (o.prompts_file.empty()) {
    log_info((tmpl ? tok->decode(prompts[0]) : o.prompt) + completion_text(done[0]));
  } else {
    std::string lines;
    const bool writes = rt.groups.coord.tp == 0 && rt.groups.first_stage();   // once per replica
    if (writes)
      for (size_t i = 0; i < done.size(); ++i)
        lines += nlohmann::ordered_json{{"prompt", texts[first + i]},
                                {"completion", completion_text(done[i])},
                                {"tokens", done[i].tokens.size()},
                                {"stopped", done[i].stopped}}
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                 "\n";
    lines = gather_text_at_0(lines, MPI_COMM_WORLD);
    if (comm_rank(MPI_COMM_WORLD) == 0) std::fwrite(lines.data(), 1, lines.size(), stdout);
    // Every replica's tokens over the slowest replica's time.
    generated = all_reduce(writes ? generated : uint64_t{0}, HostReduce::Sum, MPI_COMM_WORLD);
    s = all_reduce(s, HostReduce::Max, MPI_COMM_WORLD);
  }
  log_info(str("\n[", generated, " tokens of ", o.prompts_file.empty() ? 1 : prompts.size(), " prompt(s) in ", s,
               " s: ", generated / s, " tokens/s; batch ", gen.slots(), ", checkpoint step ", info.step, ", backend ",
               rt.backend->name(), ", tp ", cfg.parallel.tp, ", pp ",
               cfg.parallel.pp, ", dp ", dp, "]"));
  return 0;
}

}  // namespace trident
