// Whole-record samples of a chat dataset: the record's tokens, then padding; its mask shifted by one
// (target t is token t + 1), with padding's targets untrained.
#include "trident/io/sft_source.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {
namespace {

uint64_t record_count(const MaskedDataset& ds, size_t first, size_t end) {
  TRIDENT_CHECK(first < end && end <= ds.num_records(),
                str(ds.tokens().prefix(), ": records [", first, ", ", end, ") of ", ds.num_records()));
  return end - first;
}

}  // namespace

SftSource::SftSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
                     uint64_t seed)
    : ds_(std::move(ds)), first_(first), end_(end), seq_len_(seq_len), vocab_size_(vocab_size),
      sampler_(record_count(*ds_, first, end), seed) {
  for (size_t r = first_; r < end_; ++r) cut_ += ds_->sequence_length(r, 0) > static_cast<size_t>(seq_len_) + 1;
}

void SftSource::samples(int64_t first, int count, int32_t* out) {
  const size_t len = static_cast<size_t>(seq_len_) + 1;
  for (int k = 0; k < count; ++k) {
    const size_t record = record_of(first + k);
    const MaskedTokens r = ds_->read(record, 0, len);
    int32_t* row = out + k * len;
    std::copy(r.tokens.begin(), r.tokens.end(), row);
    std::fill(row + r.tokens.size(), row + len, 0);
    for (size_t i = 0; i < r.tokens.size(); ++i)
      if (r.tokens[i] < 0 || r.tokens[i] >= vocab_size_)
        throw InputError(str(ds_->tokens().prefix(), ".bin: token id ", r.tokens[i], " (record ", record, ", token ",
                             i, ") is outside model.vocab_size = ", vocab_size_,
                             "; the data was tokenized for another vocabulary"));
  }
}

void SftSource::target_mask(int64_t first, int count, uint8_t* out) {
  const size_t len = static_cast<size_t>(seq_len_) + 1;
  for (int k = 0; k < count; ++k) {
    const MaskedTokens r = ds_->read(record_of(first + k), 0, len);
    uint8_t* row = out + k * static_cast<size_t>(seq_len_);
    std::fill(row, row + seq_len_, 0);
    for (size_t t = 0; t + 1 < r.mask.size(); ++t) row[t] = static_cast<uint8_t>(r.mask[t + 1]);
  }
}

}  // namespace trident
