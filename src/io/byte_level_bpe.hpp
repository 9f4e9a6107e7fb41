// The byte-level BPE core shared by the GPT-2 and tokenizer.json tokenizers: GPT-2's byte <->
// character alphabet of vocabulary files, the vocabulary as byte strings, merges over token ids,
// and the encoding of one pre-tokenized piece through a bounded per-thread cache.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bpe_merge.hpp"

namespace trident {

// The bytes a vocabulary or merges token stands for: vocabulary files spell each byte as one
// character (GPT-2's bytes_to_unicode). Throws InputError naming `where` for a foreign character.
std::string byte_level_to_bytes(const std::string& token, const std::string& where);

class ByteLevelBpe {
 public:
  ByteLevelBpe();

  // Adds vocabulary token `id` standing for `bytes`; false when those bytes already have an id.
  bool add_token(const std::string& bytes, int32_t id) { return bytes_to_id_.emplace(bytes, id).second; }
  // Call once every token is added. Throws InputError naming `where` when a byte has no token.
  void finish_vocab(const std::string& where);
  // The id of a vocabulary token, or -1.
  int32_t find(const std::string& bytes) const;
  // Merge number `rank` of the two tokens (as bytes). A side missing from the vocabulary can
  // never be formed, so that merge is ignored; a result missing from it throws naming `where`.
  void add_merge(const std::string& left, const std::string& right, int32_t rank, const std::string& where);
  void reserve_merges(size_t n) { merges_.reserve(n); }
  // A piece that is itself a vocabulary token encodes to that token, without merging
  // (tokenizer.json's ignore_merges, which Llama 3 sets).
  void set_ignore_merges(bool on) { ignore_merges_ = on; }

  // Appends the ids of one pre-tokenized piece. Thread-safe.
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;

 private:
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::array<int32_t, 256> byte_id_{};   // single-byte tokens: BPE's start
  MergeTable merges_;
  bool ignore_merges_ = false;
  uint64_t instance_id_;                 // keys the per-thread piece cache
};

}  // namespace trident
