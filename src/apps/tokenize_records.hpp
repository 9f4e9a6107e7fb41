// `trident tokenize --format chat | preference`: JSON Lines records to a fine-tuning dataset (tokens
// plus loss mask), bad records counted by kind and reported.
#pragma once

#include <string>
#include <vector>

#include "trident/io/tokenizer.hpp"

namespace trident {

struct RecordOptions {
  std::string format;          // chat | preference
  std::string chat_template;   // plain | chatml | llama3 | hf:PATH
  std::string output;          // PREFIX
  size_t max_len = 0;          // tokens per sequence; 0: no limit
  bool truncate = false;       // over max_len: cut (true) or drop the record (false)
};

// Reads every record of `files`, writes PREFIX(.bin/.idx) and PREFIX_mask(.bin/.idx), logs the
// summary line. Throws InputError when no record is usable (nothing is written then).
void tokenize_records(const RecordOptions& o, const std::vector<std::string>& files, const Tokenizer& tokenizer);

}  // namespace trident
