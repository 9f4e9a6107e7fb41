// Gpt2Tokenizer: GPT-2's byte-level BPE from the standard vocab.json and merges.txt files.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "bpe_merge.hpp"
#include "trident/io/tokenizer.hpp"

namespace trident {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Throws InputError naming the file (and line) when either file is missing or malformed.
  Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return "gpt2"; }

 private:
  void load_vocab(const std::string& path);
  void load_merges(const std::string& path);

  std::vector<std::string> token_bytes_;                  // id -> the bytes it stands for
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // inverse of token_bytes_
  std::array<int32_t, 256> byte_id_{};                    // single-byte tokens: BPE's start
  MergeTable merges_;
  int32_t eot_id_ = -1;
  uint64_t instance_id_;                                  // keys the per-thread word cache
};

}  // namespace trident
