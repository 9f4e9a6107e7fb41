// The files of a Hugging Face tokenizer (tokenizer.json and those transformers reads beside it),
// kept by a run's checkpoints so that `convert --to-hf` and `generate` find the run's tokenizer.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trident {

struct TokenizerFiles {
  std::vector<std::pair<std::string, std::string>> files;   // (file name, contents), tokenizer.json first
  bool empty() const { return files.empty(); }
  // The contents of `name`, or null where it is not among the files.
  const std::string* find(const std::string& name) const;
};

// The names a tokenizer is made of: tokenizer.json, then tokenizer_config.json,
// special_tokens_map.json, vocab.json and merges.txt where they exist.
const std::vector<std::string>& tokenizer_file_names();

// Reads tokenizer.json (the file, or the directory holding it) and the other files of
// tokenizer_file_names() beside it. InputError naming a file that is missing or cannot be read.
TokenizerFiles read_tokenizer_files(const std::string& src);

// Writes each file into dir (existing), each atomically.
void write_tokenizer_files(const TokenizerFiles& t, const std::string& dir);

}  // namespace trident
