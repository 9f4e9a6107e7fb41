// Text <-> token ids: a byte tokenizer (no files) and GPT-2's byte-level BPE (vocab.json +
// merges.txt). The literal text "<|endoftext|>" is ordinary text to both, as in GPT-2's
// reference encoders; only the caller inserts eot_id() (e.g. between documents).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace trident {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Thread-safe: `trident tokenize` encodes documents on several threads with one tokenizer.
  // Any byte string encodes, valid UTF-8 or not, and decode(encode(x)) == x.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws InputError for an id outside [0, vocab_size()).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual int32_t eot_id() const = 0;   // <|endoftext|>
  virtual std::string name() const = 0;
};

// kind "byte" (no files) or "gpt2" (vocab_file = vocab.json / encoder.json, merges_file =
// merges.txt / vocab.bpe). Throws InputError for an unknown kind or a missing/malformed file.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file);

}  // namespace trident
