// DocumentWindows: documents [first_doc, end_doc) of an indexed dataset read as one token stream
// (each document already ends with the end-of-text token) and cut into windows of seq_len + 1
// tokens, consecutive windows sharing one token; sample k is the window its own sampler visits at k.
#pragma once

#include <memory>

#include "trident/io/indexed_dataset.hpp"
#include "trident/io/sampler.hpp"

namespace trident {

class DocumentWindows {
 public:
  // Windows that documents [first_doc, end_doc) hold: 0 when they hold fewer than seq_len + 1 tokens.
  static uint64_t count(const IndexedDataset& ds, size_t first_doc, size_t end_doc, int seq_len);

  // The range must hold at least one window (check with count()).
  DocumentWindows(std::shared_ptr<const IndexedDataset> ds, size_t first_doc, size_t end_doc, int seq_len,
                  int vocab_size, uint64_t seed);

  const IndexedDataset& dataset() const { return *ds_; }
  size_t first_doc() const { return first_doc_; }
  size_t end_doc() const { return end_doc_; }
  size_t first_token() const { return first_token_; }
  size_t tokens() const { return tokens_; }
  uint64_t windows() const { return sampler_.n_windows(); }
  int seq_len() const { return seq_len_; }

  // Tokens of this range's sample k into out (seq_len + 1). Throws InputError naming the dataset for
  // a token id outside [0, vocab_size).
  void sample(uint64_t k, int32_t* out) const;

 private:
  std::shared_ptr<const IndexedDataset> ds_;
  size_t first_doc_, end_doc_, first_token_, tokens_;
  int seq_len_, vocab_size_;
  SequenceSampler sampler_;
};

}  // namespace trident
