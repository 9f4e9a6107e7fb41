// Fine-tuning datasets: token sequences with a per-token loss mask. PREFIX.bin/.idx hold the tokens
// (a Megatron indexed dataset like pre-training data); PREFIX_mask.bin/.idx is a second indexed
// dataset of uint8, aligned token for token: 1 where the token is a trained target (an assistant
// token), 0 where the loss ignores it. A chat dataset has one sequence per document (a record); a
// preference dataset two (the chosen, then the rejected conversation). See docs/FINE_TUNING.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trident/io/indexed_dataset.hpp"

namespace trident {

std::string mask_prefix(const std::string& prefix);   // PREFIX_mask

// The tokens of one sequence and its loss mask (1: trained), of equal length.
struct MaskedTokens {
  std::vector<int32_t> tokens;
  std::vector<int32_t> mask;
};

class MaskedDataset {
 public:
  // Opens PREFIX and PREFIX_mask and checks that they agree: the mask is uint8, with the same
  // sequence sizes and document index as the tokens, and every document holds `sequences_per_document`
  // sequences (1: chat, 2: preference). Throws InputError naming the file and the fix.
  MaskedDataset(const std::string& prefix, int sequences_per_document);

  const IndexedDataset& tokens() const { return *tokens_; }
  size_t num_records() const { return tokens_->num_documents(); }
  // Record r's sequence `which` (0, or 1 for a preference pair's rejected side), its first `max_len`
  // tokens at most. Throws InputError naming PREFIX_mask.bin for a mask value other than 0 or 1.
  MaskedTokens read(size_t record, int which, size_t max_len) const;
  size_t sequence_length(size_t record, int which) const;

 private:
  std::shared_ptr<const IndexedDataset> tokens_, mask_;
  int per_doc_;
};

// Writes PREFIX.bin/.idx and PREFIX_mask.bin/.idx together; files appear only at finish().
class MaskedDatasetWriter {
 public:
  MaskedDatasetWriter(const std::string& prefix, int vocab_size);
  void add_sequence(const MaskedTokens& s);
  void end_document();
  void finish();
  size_t num_documents() const { return tokens_.num_documents(); }
  size_t num_tokens() const { return tokens_.num_tokens(); }
  size_t num_trained_tokens() const { return trained_; }

 private:
  IndexedDatasetWriter tokens_, mask_;
  size_t trained_ = 0;
};

}  // namespace trident
