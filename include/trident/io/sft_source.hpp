// SftSource: supervised fine-tuning samples from a chat dataset. Unpacked, a sample is one whole
// record (conversation) cut or padded to seq_len + 1 tokens; packed (data.pack), consecutive
// records of the visiting order fill a sample greedily, each its own document (positions restart,
// attention stays inside it). Padding and the tokens the mask does not train are left out of the
// loss. Records are visited in a fresh permutation every epoch (SequenceSampler), and samples are a
// pure function of the sample index, so every layout and resume point reads the same data.
#pragma once

#include <memory>
#include <vector>

#include "trident/io/masked_dataset.hpp"
#include "trident/io/sampler.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

// end - first after checking that [first, end) is a non-empty range of ds's records.
uint64_t record_count(const MaskedDataset& ds, size_t first, size_t end);
// One side of record `record` as a sample row of seq_len + 1 tokens (cut, or padded with token 0),
// and its target mask row of seq_len (the mask shifted by one: target t is token t + 1; padding
// untrained). Token ids out of [0, vocab_size) throw InputError naming the dataset and the record.
// PreferenceSource reads its rows through these; SftSource's samples (packed or not) place their
// records the same way.
void masked_sample_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, int32_t* row);
void masked_target_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, uint8_t* row);

class SftSource : public BatchSource {
 public:
  // Records [first, end) of ds, which must hold at least one.
  SftSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
            uint64_t seed, bool pack);
  // Token ids out of [0, vocab_size) throw InputError naming the dataset and the record. Padding
  // after the last record is token 0 (its targets are not trained, and attention keeps it from
  // the records' positions).
  void samples(int64_t first, int count, int32_t* out) override;
  bool masks_targets() const override { return true; }
  // A record's last token is its last target: the target of the position before the next record
  // (or padding) is not trained.
  void target_mask(int64_t first, int count, uint8_t* out) override;
  bool packs_documents() const override { return pack_; }
  // Padding is a document of its own.
  void doc_starts(int64_t first, int count, int32_t* out) override;

  const MaskedDataset& dataset() const { return *ds_; }
  size_t first_record() const { return first_; }
  size_t end_record() const { return end_; }
  uint64_t records() const { return end_ - first_; }
  // Records longer than seq_len + 1 tokens, whose tail a sample cuts off.
  uint64_t cut_records() const { return cut_; }
  // Samples in the first epoch (records(), unpacked); train.epochs counts these.
  uint64_t epoch_samples() { return packing(0).starts.size() - 1; }
  // Share of the first epoch's sample tokens (seq_len + 1 each) that hold record tokens.
  double fill() { return static_cast<double>(record_tokens_) / (static_cast<double>(epoch_samples()) * (seq_len_ + 1)); }

 private:
  // The samples of one epoch: sample p holds the records at places [starts[p], starts[p + 1]) of
  // the epoch's visiting order (one each unpacked); starts ends with records().
  struct Packing {
    uint64_t epoch = 0;
    std::vector<uint64_t> starts;
  };
  const Packing& packing(uint64_t epoch);
  size_t record_at(uint64_t epoch, uint64_t place) const {
    return first_ + sampler_.window(epoch * records() + place);
  }
  size_t length(size_t record) const;   // tokens a sample takes of the record: at most seq_len + 1
  // Writes sample `sample`'s tokens (seq_len + 1), target mask and doc_start (seq_len each) where
  // given.
  void fill_sample(int64_t sample, int32_t* tokens, uint8_t* mask, int32_t* docs);

  std::shared_ptr<const MaskedDataset> ds_;
  size_t first_, end_;
  int seq_len_, vocab_size_;
  bool pack_;
  SequenceSampler sampler_;
  uint64_t cut_ = 0, record_tokens_ = 0;
  Packing cached_;                          // the epoch read last
  std::vector<uint64_t> epoch_first_{0};    // the first sample of each epoch packed so far
};

}  // namespace trident
