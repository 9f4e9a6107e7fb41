// Byte-level BPE: GPT-2's byte alphabet, merges through bpe_merge, and a per-thread cache of
// encoded pieces.
#include "byte_level_bpe.hpp"

#include <atomic>

#include "trident/core/error.hpp"
#include "utf8.hpp"

namespace trident {
namespace {

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

// Per-thread, so encoding needs no lock; `owner` resets it when another tokenizer uses the thread.
struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>> pieces;
  std::string key;                 // reused, so a lookup allocates only when a piece outgrows it
  std::vector<int32_t> symbols;
};

PieceCache& piece_cache(uint64_t owner) {
  thread_local PieceCache cache;
  if (cache.owner != owner) {
    cache.pieces.clear();
    cache.owner = owner;
  }
  return cache;
}

std::atomic<uint64_t> g_next_instance{1};

}  // namespace

std::string byte_level_to_bytes(const std::string& token, const std::string& where) {
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

ByteLevelBpe::ByteLevelBpe() : instance_id_(g_next_instance++) {}

void ByteLevelBpe::finish_vocab(const std::string& where) {
  for (int b = 0; b < 256; ++b) {
    const int32_t id = find(std::string(1, static_cast<char>(b)));
    if (id < 0) throw InputError(str(where, ": no token for byte ", b, " — not a byte-level BPE vocabulary"));
    byte_id_[b] = id;
  }
}

int32_t ByteLevelBpe::find(const std::string& bytes) const {
  const auto it = bytes_to_id_.find(bytes);
  return it == bytes_to_id_.end() ? -1 : it->second;
}

void ByteLevelBpe::add_merge(const std::string& left, const std::string& right, int32_t rank,
                             const std::string& where) {
  const int32_t l = find(left), r = find(right);
  if (l < 0 || r < 0) return;
  const int32_t merged = find(left + right);
  if (merged < 0)
    throw InputError(str(where, ": the merge of ", quoted_text(left), " and ", quoted_text(right),
                         " is not in the vocabulary"));
  merges_.add(l, r, rank, merged);
}

void ByteLevelBpe::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  PieceCache& cache = piece_cache(instance_id_);
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    cache.key.assign(piece.data(), piece.size());
    const auto hit = cache.pieces.find(cache.key);
    if (hit != cache.pieces.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  std::vector<int32_t>& symbols = cache.symbols;
  const int32_t whole = ignore_merges_ ? find(std::string(piece)) : -1;
  if (whole >= 0) {
    symbols.assign(1, whole);
  } else {
    symbols.resize(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_id_[static_cast<uint8_t>(piece[i])];
    bpe_merge(symbols, merges_);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    if (cache.pieces.size() >= kMaxCachedPieces) cache.pieces.clear();
    cache.pieces.emplace(cache.key, symbols);
  }
}

}  // namespace trident
