// GPT-2 byte-level BPE: loads vocab.json + merges.txt, encodes through the hand-written
// pre-tokenizer and the byte-level BPE core.
#include "gpt2_tokenizer.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpt2_pretokenize.hpp"
#include "trident/core/error.hpp"

namespace trident {
namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

std::ifstream open_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(str(path, ": cannot open (", std::strerror(errno), ")"));
  return in;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file) {
  load_vocab(vocab_file);
  load_merges(merges_file);
}

void Gpt2Tokenizer::load_vocab(const std::string& path) {
  std::ifstream in = open_text(path);
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(str(path, ": not valid JSON (", e.what(), ")"));
  }
  if (!vocab.is_object() || vocab.empty())
    throw InputError(str(path, ": expected a JSON object mapping token -> id"));

  token_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() >= static_cast<int64_t>(vocab.size()) || seen[id_json.get<size_t>()])
      throw InputError(str(path, ": ids must be 0..", vocab.size() - 1, ", each once; ", quoted_text(token), " has ",
                           quoted_text(id_json.dump())));
    const int32_t id = id_json.get<int32_t>();
    seen[id] = true;
    token_bytes_[id] = byte_level_to_bytes(token, path);
    bpe_.add_token(token_bytes_[id], id);
  }
  bpe_.finish_vocab(path);
  eot_id_ = bpe_.find(kEndOfText);
  if (eot_id_ < 0) throw InputError(str(path, ": has no ", kEndOfText, " token"));
}

void Gpt2Tokenizer::load_merges(const std::string& path) {
  std::ifstream in = open_text(path);
  bpe_.reserve_merges(token_bytes_.size());
  std::string line;
  int32_t rank = 0;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::string where = str(path, ":", line_no);
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      throw InputError(str(where, ": expected two tokens separated by one space, got ", quoted_text(line)));
    bpe_.add_merge(byte_level_to_bytes(line.substr(0, space), where),
                   byte_level_to_bytes(line.substr(space + 1), where), rank++, where);
  }
  if (in.bad()) throw InputError(str(path, ": read failed (", std::strerror(errno), ")"));
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = gpt2_piece_end(text, pos);
    bpe_.encode_piece(text.substr(pos, end - pos), ids);
    pos = end;
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw InputError(str("token id ", id, " is outside the GPT-2 vocabulary (size ", vocab_size(), ")"));
    out += token_bytes_[id];
  }
  return out;
}

}  // namespace trident
