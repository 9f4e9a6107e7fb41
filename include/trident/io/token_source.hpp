// TokenSource: training samples from an indexed dataset viewed as one token stream (documents
// already end with the end-of-text token), cut into windows of seq_len + 1 tokens.
#pragma once

#include <memory>
#include <string>

#include "trident/io/indexed_dataset.hpp"
#include "trident/io/sampler.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

class TokenSource : public BatchSource {
 public:
  // Throws InputError when the dataset is missing, too short for one window, or holds token ids
  // outside [0, vocab_size).
  TokenSource(const std::string& prefix, int seq_len, int vocab_size, uint64_t seed);
  void samples(int64_t first, int count, int32_t* out) override;
  const IndexedDataset& dataset() const { return *ds_; }
  uint64_t windows() const { return sampler_->n_windows(); }

 private:
  std::unique_ptr<IndexedDataset> ds_;
  std::unique_ptr<SequenceSampler> sampler_;
  int seq_len_, vocab_size_;
};

}  // namespace trident
