// Text <-> token ids: a byte tokenizer (no files), GPT-2's byte-level BPE (vocab.json +
// merges.txt) and Hugging Face byte-level BPE tokenizers (tokenizer.json). The literal text
// "<|endoftext|>" is ordinary text to the first two, as in GPT-2's reference encoders; a
// tokenizer.json tokenizer matches its added tokens in the text, as Hugging Face does. Only the
// caller inserts bos_id() and eot_id() (e.g. around documents).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "trident/io/tokenizer_files.hpp"

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
  virtual int32_t eot_id() const = 0;   // ends a document: <|endoftext|>, or tokenizer.json's eos_token
  // Starts every document and prompt (Llama 3's <|begin_of_text|>); -1 for none.
  virtual int32_t bos_id() const { return -1; }
  // Whether `id` is an added token (tokenizer.json's added_tokens: <|eot_id|>, <|im_end|>, ...),
  // which encode() matches whole in the text; a chat template's end-of-turn token is one.
  virtual bool is_added_token(int32_t /*id*/) const { return false; }
  virtual std::string name() const = 0;
};

// kind "byte" (no files), "gpt2" (vocab_file = vocab.json / encoder.json, merges_file =
// merges.txt / vocab.bpe), or the path of a Hugging Face tokenizer.json or of a directory holding
// one (no vocab or merges file). Throws InputError for an unknown kind or a missing/malformed file.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file);

// The Hugging Face tokenizer of files a checkpoint keeps (CheckpointInfo::tokenizer); `where`
// names them in errors.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerFiles& files, const std::string& where);

}  // namespace trident
