// HfTokenizer: Hugging Face byte-level BPE tokenizers (GPT-2, Llama 3, Qwen 2/3) from their
// tokenizer.json and, when present, tokenizer_config.json.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "byte_level_bpe.hpp"
#include "split_pretokenize.hpp"
#include "trident/io/tokenizer.hpp"
#include "trident/io/tokenizer_files.hpp"

namespace trident {

// A tokenizer_config.json token entry (bos_token, eos_token, ...): a string, an AddedToken object
// {"content": ...}, or nullopt for null or missing.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key);

class HfTokenizer : public Tokenizer {
 public:
  // `path`: a tokenizer.json file, or a directory holding one. tokenizer_config.json beside it is
  // read when it exists. Throws InputError naming the file for anything missing, malformed or
  // outside what trident implements (the message says which part).
  explicit HfTokenizer(const std::string& path);
  // The same from the files a checkpoint keeps; `where` names them in errors (e.g. the checkpoint).
  HfTokenizer(const TokenizerFiles& files, const std::string& where);

  // Added tokens (special or not) are cut out of the text first, longest match first; the text
  // between them is normalized, pre-tokenized and merged.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  int32_t eot_id() const override { return eot_id_; }
  int32_t bos_id() const override { return bos_id_; }
  bool is_added_token(int32_t id) const override;
  std::string name() const override { return name_; }

 private:
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> next;   // byte -> node
    int32_t token = -1;                               // the added token ending here
  };

  // Everything the constructors share, from the parsed tokenizer.json and tokenizer_config.json
  // (an empty object where there is none); the where strings name them in errors.
  void load(const nlohmann::json& root, const nlohmann::json& config, const std::string& where,
            const std::string& config_where);
  void load_model(const nlohmann::json& model, const std::string& where);
  // Length of the longest added token at `pos` and its id through `id`; 0 for none.
  size_t added_token_at(std::string_view text, size_t pos, int32_t& id) const;
  void encode_section(std::string_view text, std::vector<int32_t>& ids) const;

  std::string name_;
  std::vector<std::string> token_bytes_;   // id -> the bytes it decodes to
  std::vector<bool> has_token_;            // false for ids neither the vocab nor added tokens use
  ByteLevelBpe bpe_;
  std::optional<SplitPattern> split_;      // nullopt: GPT-2's pattern (ByteLevel with use_regex)
  bool nfc_ = false;
  std::vector<TrieNode> added_;            // a byte trie of the added tokens; node 0 is the root
  int32_t eot_id_ = -1, bos_id_ = -1;
};

}  // namespace trident
