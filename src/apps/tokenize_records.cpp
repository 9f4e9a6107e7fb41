// Chat and preference records, one JSON object per line, through a chat template into a masked
// dataset; a record that cannot be used is counted under its reason and named in a warning (the
// first few of each reason), never dropped silently.
#include "tokenize_records.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "trident/core/error.hpp"
#include "trident/core/log.hpp"
#include "trident/io/chat_template.hpp"
#include "trident/io/masked_dataset.hpp"

namespace trident {
namespace {

// Warnings naming file:line per reason; the rest are only counted.
constexpr int kNamedPerKind = 3;

struct Counts {
  size_t records = 0, written = 0, truncated = 0;
  std::map<std::string, size_t> bad;   // by reason
};

// A sequence over max_len tokens: cut, or refused (BadRecord "over-long").
void fit(MaskedTokens& s, const RecordOptions& o, bool& truncated) {
  if (o.max_len == 0 || s.tokens.size() <= o.max_len) return;
  if (!o.truncate)
    throw BadRecord("over-long", str(s.tokens.size(), " tokens, over --max-len ", o.max_len, " (--over-long drop)"));
  s.tokens.resize(o.max_len);
  s.mask.resize(o.max_len);
  truncated = true;
  for (int32_t m : s.mask)
    if (m) return;
  throw BadRecord("over-long", str("no assistant token within --max-len ", o.max_len, " (--over-long truncate)"));
}

// The sequences of one record: [chat] or [chosen, rejected]. Throws BadRecord.
std::vector<MaskedTokens> render(const std::string& line, const RecordOptions& o, const ChatTemplate& tmpl,
                                 bool& truncated) {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw BadRecord("invalid JSON", e.what());
  }
  std::vector<MaskedTokens> out;
  if (o.format == "chat") out.push_back(tmpl.render(chat_messages(record)));
  else
    for (const std::vector<ChatMessage>& c : preference_conversations(record)) out.push_back(tmpl.render(c));
  for (MaskedTokens& s : out) fit(s, o, truncated);
  return out;
}

std::string summary(const Counts& c, const RecordOptions& o) {
  size_t bad = 0;
  std::string kinds;
  for (const auto& [kind, n] : c.bad) {
    bad += n;
    kinds += str(kinds.empty() ? ": " : ", ", n, " ", kind);
  }
  return str(c.records, " records: ", c.written, " written", c.truncated ? str(" (", c.truncated, " truncated to --max-len ", o.max_len, ")") : "",
             ", ", bad, " bad", kinds);
}

}  // namespace

void tokenize_records(const RecordOptions& o, const std::vector<std::string>& files, const Tokenizer& tokenizer) {
  const ChatTemplate tmpl(o.chat_template, tokenizer);
  MaskedDatasetWriter writer(o.output, tokenizer.vocab_size());
  Counts c;
  std::string line;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(str(path, ": cannot read (", std::strerror(errno), ")"));
    for (size_t line_no = 1; std::getline(in, line); ++line_no) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ++c.records;
      bool truncated = false;
      try {
        for (const MaskedTokens& s : render(line, o, tmpl, truncated)) writer.add_sequence(s);
        writer.end_document();
        ++c.written;
        c.truncated += truncated;
      } catch (const BadRecord& e) {
        if (++c.bad[e.kind()] <= kNamedPerKind)
          log_warn(str("tokenize: ", path, ":", line_no, ": ", e.kind(), ": ", e.what(), " (record skipped)"));
      } catch (const InputError& e) {
        // A Jinja template that fails on a record fails on the data set: the template is at fault.
        throw InputError(str(path, ":", line_no, ": ", e.what()));
      }
    }
    if (in.bad()) throw InputError(str(path, ": read failed (", std::strerror(errno), ")"));
  }
  log_info(str("tokenize: ", summary(c, o)));
  if (c.written == 0)
    throw InputError(str("--input holds no usable ", o.format, " record (", summary(c, o),
                         "); see docs/FINE_TUNING.md for the record format"));
  writer.finish();
  log_info(str("tokenize: ", writer.num_documents(), " ", o.format == "chat" ? "conversations" : "pairs", ", ",
               writer.num_tokens(), " tokens (", writer.num_trained_tokens(), " trained) with the ", o.chat_template,
               " template (", tokenizer.name(), "); wrote ", o.output, ".bin/.idx and ", mask_prefix(o.output),
               ".bin/.idx"));
}

}  // namespace trident
