// GPT-2 byte-level BPE: loads vocab.json + merges.txt, encodes through the hand-written
// pre-tokenizer, BPE over token ids and a bounded per-thread cache of encoded pieces.
#include "gpt2_tokenizer.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpt2_pretokenize.hpp"
#include "trident/core/error.hpp"
#include "utf8.hpp"

namespace trident {
namespace {

constexpr const char* kEndOfText = "<|endoftext|>";
// Pieces up to this size are cached; longer ones are rare and would bloat the cache.
constexpr size_t kMaxCachedPieceBytes = 64;
// Cleared when full: crude, but bounded, and natural text re-warms it within a few KB.
constexpr size_t kMaxCachedPieces = size_t{1} << 16;

// GPT-2's bytes_to_unicode(), inverted: vocab strings spell each byte as one code point, the
// printable Latin-1 bytes as themselves and the rest as U+0100 + n in byte order.
std::array<int, 324> make_unicode_to_byte() {
  std::array<int, 324> to_byte;
  to_byte.fill(-1);
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    to_byte[printable ? b : 256 + n++] = b;
  }
  return to_byte;
}

// The bytes a vocab/merges token stands for; throws naming `where` for a foreign character.
std::string token_to_bytes(const std::string& token, const std::string& where) {
  static const std::array<int, 324> to_byte = make_unicode_to_byte();
  std::string bytes;
  for (size_t pos = 0; pos < token.size();) {
    const Utf8Char c = decode_utf8(token, pos);
    if (!c.valid || c.cp >= to_byte.size() || to_byte[c.cp] < 0)
      throw InputError(str(where, ": token ", quoted_text(token), " has a character outside GPT-2's byte alphabet"));
    bytes += static_cast<char>(to_byte[c.cp]);
    pos += c.len;
  }
  return bytes;
}

std::ifstream open_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(str(path, ": cannot open (", std::strerror(errno), ")"));
  return in;
}

// Per-thread, so encode() needs no lock; `owner` resets it when another tokenizer uses the thread.
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>> pieces;
};

WordCache& word_cache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.owner != owner) {
    cache.pieces.clear();
    cache.owner = owner;
  }
  return cache;
}

std::atomic<uint64_t> g_next_instance{1};

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file)
    : instance_id_(g_next_instance++) {
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
    token_bytes_[id] = token_to_bytes(token, path);
    bytes_to_id_.emplace(token_bytes_[id], id);
  }

  for (int b = 0; b < 256; ++b) {
    const auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    if (it == bytes_to_id_.end())
      throw InputError(str(path, ": no token for byte ", b, " — not a GPT-2 byte-level vocabulary"));
    byte_id_[b] = it->second;
  }
  const auto eot = bytes_to_id_.find(kEndOfText);
  if (eot == bytes_to_id_.end()) throw InputError(str(path, ": has no ", kEndOfText, " token"));
  eot_id_ = eot->second;
}

void Gpt2Tokenizer::load_merges(const std::string& path) {
  std::ifstream in = open_text(path);
  merges_.reserve(token_bytes_.size());
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
    const std::string left = token_to_bytes(line.substr(0, space), where);
    const std::string right = token_to_bytes(line.substr(space + 1), where);
    const auto l = bytes_to_id_.find(left), r = bytes_to_id_.find(right);
    const int32_t this_rank = rank++;
    // A side missing from the vocab can never be formed, so the merge can never apply.
    if (l == bytes_to_id_.end() || r == bytes_to_id_.end()) continue;
    const auto merged = bytes_to_id_.find(left + right);
    if (merged == bytes_to_id_.end())
      throw InputError(str(where, ": the merge of ", quoted_text(line), " is not in the vocabulary"));
    merges_.add(l->second, r->second, this_rank, merged->second);
  }
  if (in.bad()) throw InputError(str(path, ": read failed (", std::strerror(errno), ")"));
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  WordCache& cache = word_cache(instance_id_);
  std::string key;   // reused, so a cache lookup allocates only when a piece outgrows it
  std::vector<int32_t> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = gpt2_piece_end(text, pos);
    const std::string_view piece = text.substr(pos, end - pos);
    pos = end;

    const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
    if (cacheable) {
      key.assign(piece.data(), piece.size());
      const auto hit = cache.pieces.find(key);
      if (hit != cache.pieces.end()) {
        ids.insert(ids.end(), hit->second.begin(), hit->second.end());
        continue;
      }
    }
    symbols.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_id_[static_cast<uint8_t>(piece[i])];
    bpe_merge(symbols, merges_);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    if (cacheable) {
      if (cache.pieces.size() >= kMaxCachedPieces) cache.pieces.clear();
      cache.pieces.emplace(key, symbols);
    }
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
