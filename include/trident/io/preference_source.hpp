// PreferenceSource: preference pairs of a preference dataset (chosen and rejected conversation per
// record) as training samples for tasks dpo and reward. Sample 2i is pair i's chosen side, sample
// 2i + 1 its rejected side, each one whole sequence cut or padded to seq_len + 1 tokens with its
// target mask (prompt and padding untrained), as SftSource reads a chat record.
#pragma once

#include <memory>
#include <vector>

#include "trident/io/masked_dataset.hpp"
#include "trident/io/sampler.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

class PreferenceSource : public BatchSource {
 public:
  // Records [first, end) of ds (opened with 2 sequences per record), which must hold at least one.
  PreferenceSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
                   uint64_t seed);
  // Pairs are visited in a fresh permutation every epoch (SequenceSampler over pair indices), a
  // pure function of the sample index, so every layout and resume point reads the same pairs. A
  // micro-batch holds whole pairs when it starts at an even sample and counts an even number of
  // them, which an even train.micro_batch_size guarantees (validate_run_config checks it).
  void samples(int64_t first, int count, int32_t* out) override;
  bool masks_targets() const override { return true; }
  void target_mask(int64_t first, int count, uint8_t* out) override;

  // The reference NLLs of every record of the dataset (not only [first, end)): 2 * num_records
  // floats, record r's chosen side at 2r and its rejected side at 2r + 1 (read_reference_nll).
  void set_reference_nll(std::shared_ptr<const std::vector<float>> by_record);
  bool gives_reference_nll() const override { return reference_ != nullptr; }
  void reference_nll(int64_t first, int count, float* out) override;

  const MaskedDataset& dataset() const { return *ds_; }
  // The record that sample `sample` reads (its side is the sample's parity).
  size_t record_of(int64_t sample) const { return first_ + sampler_.window(static_cast<uint64_t>(sample / 2)); }
  size_t first_record() const { return first_; }
  size_t end_record() const { return end_; }
  uint64_t records() const { return end_ - first_; }
  // Sides (chosen or rejected) longer than seq_len + 1 tokens, whose tail a sample cuts off.
  uint64_t cut_sequences() const { return cut_; }

 private:
  static int side_of(int64_t sample) { return static_cast<int>(sample % 2); }

  std::shared_ptr<const MaskedDataset> ds_;
  size_t first_, end_;
  int seq_len_, vocab_size_;
  SequenceSampler sampler_;
  uint64_t cut_ = 0;
  std::shared_ptr<const std::vector<float>> reference_;
};

}  // namespace trident
