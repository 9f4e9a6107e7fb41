// `trident tokenize`: raw text (plain or JSON lines) -> a Megatron indexed dataset, encoded on
// several threads while the next few megabytes are read, written in input order; chat and
// preference records -> a fine-tuning dataset with its loss mask (tokenize_records).
#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "commands.hpp"
#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/batch_encoder.hpp"
#include "trident/io/document_reader.hpp"
#include "trident/io/indexed_dataset.hpp"
#include "trident/io/tokenizer.hpp"
#include "trident/parallel/host_collectives.hpp"
#include "tokenize_records.hpp"

namespace po = boost::program_options;

namespace trident {
namespace {

// Documents read per batch: large enough to keep every thread busy, small enough to stream.
constexpr size_t kBatchBytes = size_t{4} << 20;

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::string format, json_key, output, tokenizer, vocab, merges, over_long;
  std::optional<std::string> separator;
  RecordOptions records;
  int threads = 1, max_len = 0;
  bool append_eot = true;
  bool help = false;
};

const char* kUsage =
    "usage: trident tokenize --input FILE|DIR... --output PREFIX --tokenizer byte|gpt2|TOKENIZER [options]\n"
    "Writes PREFIX.bin and PREFIX.idx (Megatron indexed dataset); see docs/DATA.md. --format chat or\n"
    "preference also writes the loss mask PREFIX_mask.bin/.idx; see docs/FINE_TUNING.md.\n";

po::options_description describe(TokenizeOptions& o) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  po::options_description d("trident tokenize options");
  d.add_options()
      ("help,h", "print this help")
      ("input", po::value(&o.inputs)->multitoken()->required(),
       "raw text files or directories (read recursively, in path order)")
      ("format", po::value(&o.format)->default_value("text"),
       "text; jsonl: one JSON object per line; chat: JSON lines of {\"messages\": [{\"role\", \"content\"}...]} "
       "or {\"prompt\", \"response\"} (only the assistant's tokens train); preference: JSON lines of "
       "{\"prompt\", \"chosen\", \"rejected\"}")
      ("chat-template", po::value(&o.records.chat_template),
       "chat, preference: llama3, chatml, plain (the only one the byte tokenizer can use), hf (the Jinja "
       "chat_template of the tokenizer_config.json beside --tokenizer) or hf:PATH/tokenizer_config.json")
      ("max-len", po::value(&o.max_len)->default_value(0),
       "chat, preference: most tokens of one conversation (0: no limit); see --over-long")
      ("over-long", po::value(&o.over_long)->default_value("drop"),
       "chat, preference: a conversation over --max-len is dropped (counted) or truncated (dropped when no "
       "assistant token is left)")
      ("json-key", po::value(&o.json_key)->default_value("text"),
       "jsonl: the string field that holds the document")
      ("doc-separator", po::value<std::string>(),
       "text: a line exactly equal to this ends a document (% for fortune files); "
       "default: one document per file")
      ("output", po::value(&o.output)->required(), "PREFIX of the .bin/.idx pair to write")
      ("tokenizer", po::value(&o.tokenizer)->required(),
       "byte, gpt2, or a Hugging Face tokenizer.json (or the directory holding it and tokenizer_config.json)")
      ("vocab", po::value(&o.vocab), "gpt2: vocab.json (GPT-2's encoder.json)")
      ("merges", po::value(&o.merges), "gpt2: merges.txt (GPT-2's vocab.bpe)")
      ("threads", po::value(&o.threads)->default_value(cores), "encoding threads (text, jsonl; chat and preference records are encoded on one)")
      ("append-eot", po::value(&o.append_eot)->default_value(true)->implicit_value(true),
       "end every document with <|endoftext|> (tokenizer.json: tokenizer_config.json's eos_token); "
       "--append-eot=false leaves it out");
  return d;
}

// The tokenizer_config.json beside --tokenizer's tokenizer.json (the path given, or the directory holding it).
std::string config_beside(const std::string& tokenizer) {
  namespace fs = std::filesystem;
  if (tokenizer == "byte" || tokenizer == "gpt2")
    throw InputError(str("--chat-template hf reads the tokenizer_config.json beside a tokenizer.json; --tokenizer ",
                         tokenizer, " has none: use --chat-template hf:PATH/tokenizer_config.json"));
  const fs::path dir = fs::is_directory(tokenizer) ? fs::path(tokenizer) : fs::path(tokenizer).parent_path();
  return (dir / "tokenizer_config.json").string();
}

TokenizeOptions parse(const Args& args) {
  TokenizeOptions o;
  po::options_description desc = describe(o);
  po::variables_map vm;
  try {
    // No positional arguments: a stray word is a mistake, not an input.
    const po::positional_options_description none;
    po::store(po::command_line_parser(args).options(desc).positional(none).run(), vm);
    if (vm.count("help")) {
      o.help = true;
      std::cout << kUsage << "\n" << desc << std::flush;
      return o;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(str(e.what(), " (see trident tokenize --help)"));
  }
  if (o.format != "text" && o.format != "jsonl" && o.format != "chat" && o.format != "preference")
    throw InputError(str("--format ", o.format, ": use text, jsonl, chat or preference"));
  const bool records = o.format == "chat" || o.format == "preference";
  for (const char* opt : {"chat-template", "max-len", "over-long"})
    if (!records && vm.count(opt) && !vm[opt].defaulted())
      throw InputError(str("--", opt, " applies to --format chat or preference only"));
  if (records) {
    if (o.records.chat_template.empty())
      throw InputError(str("--format ", o.format, " needs --chat-template llama3, chatml, plain, hf or hf:PATH"));
    if (o.records.chat_template == "hf") o.records.chat_template = "hf:" + config_beside(o.tokenizer);
    if (!vm["append-eot"].defaulted())
      throw InputError(str("--append-eot does not apply to --format ", o.format, " (the chat template ends turns)"));
    if (o.over_long != "drop" && o.over_long != "truncate")
      throw InputError(str("--over-long ", o.over_long, ": use drop or truncate"));
    o.records.format = o.format;
    o.records.output = o.output;
    o.records.truncate = o.over_long == "truncate";
    if (o.max_len < 0) throw InputError(str("--max-len ", o.max_len, ": must be >= 0 (0: no limit)"));
    o.records.max_len = static_cast<size_t>(o.max_len);
  }
  if (vm.count("doc-separator")) {
    if (o.format != "text") throw InputError("--doc-separator applies to --format text only");
    o.separator = vm["doc-separator"].as<std::string>();
  }
  if (!vm["json-key"].defaulted() && o.format != "jsonl")
    throw InputError("--json-key applies to --format jsonl only");
  if (o.threads < 1) throw InputError(str("--threads ", o.threads, ": must be at least 1"));
  return o;
}

void make_output_dir(const std::string& prefix) {
  const std::filesystem::path out_dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!out_dir.empty() && !std::filesystem::create_directories(out_dir, ec) && ec)
    throw InputError(str(out_dir.string(), ": cannot create output directory (", ec.message(), ")"));
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

}  // namespace

int cmd_tokenize(const Args& args) {
  // Tokenizing is a one-process job; extra ranks of an mpirun have nothing to do.
  if (comm_rank(MPI_COMM_WORLD) != 0) return 0;

  const TokenizeOptions o = parse(args);
  if (o.help) return 0;

  std::vector<std::string> skipped;
  const std::vector<std::string> files = expand_input_paths(o.inputs, &skipped);
  if (!skipped.empty()) {
    constexpr size_t kNamed = 5;
    std::string names;
    for (size_t i = 0; i < std::min(skipped.size(), kNamed); ++i) names += (i ? ", " : "") + printable(skipped[i], 300);
    if (skipped.size() > kNamed) names += str(" and ", skipped.size() - kNamed, " more");
    log_warn(str("tokenize: skipped ", skipped.size(), " input file(s): ", names));
  }
  if (files.empty()) throw InputError("--input names no files (only empty directories)");
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(o.tokenizer, o.vocab, o.merges);
  if (o.format == "chat" || o.format == "preference") {
    make_output_dir(o.output);
    tokenize_records(o.records, files, *tokenizer);
    return 0;
  }
  make_output_dir(o.output);

  const auto t0 = std::chrono::steady_clock::now();
  DocumentReader reader(files, DocumentFormat{o.format == "jsonl", o.json_key, o.separator});
  IndexedDatasetWriter writer(o.output, tokenizer->vocab_size());
  // Declared before the encoder, so its workers are joined before the batches they read go away.
  std::vector<std::string> batch, next;
  BatchEncoder encoder(*tokenizer, o.threads, o.append_eot);
  bool have = reader.next_batch(kBatchBytes, batch);
  uint64_t text_bytes = 0;
  while (have) {
    encoder.start(batch);
    next.clear();
    const bool have_next = reader.next_batch(kBatchBytes, next);
    for (const std::vector<int32_t>& ids : encoder.wait()) writer.add_document(ids);
    for (const std::string& d : batch) text_bytes += d.size();
    batch.swap(next);
    have = have_next;
  }
  if (writer.num_documents() == 0)
    throw InputError(str("no documents in ", files.size(), " input file(s): all are empty"));
  writer.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const double tokens_per_s = static_cast<double>(writer.num_tokens()) / std::max(seconds, 1e-9);
  log_info(str("tokenize: ", files.size(), " file(s), ", fixed(text_bytes / 1048576.0, 1), " MB of text -> ",
               writer.num_documents(), " documents, ", writer.num_tokens(), " tokens (", tokenizer->name(), ") in ",
               fixed(seconds, 2), " s: ", fixed(tokens_per_s / 1e6, 2), "M tokens/s on ", o.threads, " thread(s)"));
  log_info(str("tokenize: wrote ", o.output, ".bin and ", o.output, ".idx"));
  return 0;
}

}  // namespace trident
