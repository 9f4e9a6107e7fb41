// make_tokenizer: picks the tokenizer implementation by name or path and checks it got the right files.
#include "trident/io/tokenizer.hpp"

#include <filesystem>

#include "byte_tokenizer.hpp"
#include "gpt2_tokenizer.hpp"
#include "hf_tokenizer.hpp"
#include "trident/core/error.hpp"

namespace trident {

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& kind, const std::string& vocab_file,
                                          const std::string& merges_file) {
  if (kind == "byte") {
    if (!vocab_file.empty() || !merges_file.empty())
      throw InputError("the byte tokenizer takes no vocab or merges file");
    return std::make_unique<ByteTokenizer>();
  }
  if (kind == "gpt2") {
    if (vocab_file.empty() || merges_file.empty())
      throw InputError("the gpt2 tokenizer needs a vocab file (vocab.json) and a merges file (merges.txt); "
                       "tools/fetch_gpt2_tokenizer.sh downloads them into data/gpt2");
    return std::make_unique<Gpt2Tokenizer>(vocab_file, merges_file);
  }
  if (std::filesystem::exists(kind)) {
    if (!vocab_file.empty() || !merges_file.empty())
      throw InputError(str("the tokenizer.json tokenizer ", kind, " takes no vocab or merges file"));
    return std::make_unique<HfTokenizer>(kind);
  }
  throw InputError(str("unknown tokenizer '", kind,
                       "' (use byte, gpt2, or a Hugging Face tokenizer.json or the directory holding one)"));
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerFiles& files, const std::string& where) {
  return std::make_unique<HfTokenizer>(files, where);
}

}  // namespace trident
