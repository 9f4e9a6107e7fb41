// SftSource: supervised fine-tuning samples, one whole record (conversation) of a chat dataset per
// sample, cut or padded to seq_len + 1 tokens; padding and the tokens the mask does not train are
// left out of the loss. Records are visited in a fresh permutation every epoch (SequenceSampler),
// a pure function of the sample index, so every layout and resume point reads the same data.
#pragma once

#include <memory>

#include "trident/io/masked_dataset.hpp"
#include "trident/io/sampler.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

// end - first after checking that [first, end) is a non-empty range of ds's records.
uint64_t record_count(const MaskedDataset& ds, size_t first, size_t end);
// One side of record `record` as a sample row of seq_len + 1 tokens (cut, or padded with token 0),
// and its target mask row of seq_len (the mask shifted by one: target t is token t + 1; padding
// untrained). Token ids out of [0, vocab_size) throw InputError naming the dataset and the record.
// SftSource and PreferenceSource read their rows through these.
void masked_sample_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, int32_t* row);
void masked_target_row(const MaskedDataset& ds, size_t record, int which, int seq_len, uint8_t* row);

class SftSource : public BatchSource {
 public:
  // Records [first, end) of ds, which must hold at least one.
  SftSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
            uint64_t seed);
  // Token ids out of [0, vocab_size) throw InputError naming the dataset and the record. Padding
  // after a record's end is token 0 (its targets are not trained, and causal attention keeps it
  // from the record's own positions).
  void samples(int64_t first, int count, int32_t* out) override;
  bool masks_targets() const override { return true; }
  void target_mask(int64_t first, int count, uint8_t* out) override;

  const MaskedDataset& dataset() const { return *ds_; }
  size_t first_record() const { return first_; }
  size_t end_record() const { return end_; }
  uint64_t records() const { return end_ - first_; }
  // Records longer than seq_len + 1 tokens, whose tail a sample cuts off.
  uint64_t cut_records() const { return cut_; }

 private:
  size_t record_of(int64_t sample) const { return first_ + sampler_.window(static_cast<uint64_t>(sample)); }

  std::shared_ptr<const MaskedDataset> ds_;
  size_t first_, end_;
  int seq_len_, vocab_size_;
  SequenceSampler sampler_;
  uint64_t cut_ = 0;
};

}  // namespace trident
