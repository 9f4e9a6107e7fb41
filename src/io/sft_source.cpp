// Supervised fine-tuning samples of a chat dataset: whole records, one per sample or packed
// greedily in visiting order; each record's mask shifted by one (target t is token t + 1), with
// the targets across a record's end and padding's untrained.
#include "trident/io/sft_source.hpp"

#include <algorithm>

#include "trident/core/error.hpp"

namespace trident {

uint64_t record_count(const MaskedDataset& ds, size_t first, size_t end) {
  TRIDENT_CHECK(first < end && end <= ds.num_records(),
                str(ds.tokens().prefix(), ": records [", first, ", ", end, ") of ", ds.num_records()));
  return end - first;
}

SftSource::SftSource(std::shared_ptr<const MaskedDataset> ds, size_t first, size_t end, int seq_len, int vocab_size,
                     uint64_t seed, bool pack)
    : ds_(std::move(ds)), first_(first), end_(end), seq_len_(seq_len), vocab_size_(vocab_size), pack_(pack),
      sampler_(record_count(*ds_, first, end), seed) {
  for (size_t r = first_; r < end_; ++r) {
    cut_ += ds_->sequence_length(r, 0) > static_cast<size_t>(seq_len_) + 1;
    record_tokens_ += length(r);
  }
}

namespace {

// Side `which` of record `record`, its first `room` tokens (each checked against the vocabulary),
// placed at token `at` of a sample: its tokens into tokens[at...] and its mask shifted by one
// (target t is token t + 1) into mask[at...], each where given. Returns the tokens it takes.
size_t place_record(const MaskedDataset& ds, size_t record, int which, size_t room, int vocab_size, int32_t* tokens,
                    uint8_t* mask, size_t at) {
  const MaskedTokens r = ds.read(record, which, room);
  for (size_t i = 0; i < r.tokens.size(); ++i)
    if (r.tokens[i] < 0 || r.tokens[i] >= vocab_size)
      throw InputError(str(ds.tokens().prefix(), ".bin: token id ", r.tokens[i], " (record ", record,
                           which ? ", rejected side" : "", ", token ", i, ") is outside model.vocab_size = ",
                           vocab_size, "; the data was tokenized for another vocabulary"));
  if (tokens) std::copy(r.tokens.begin(), r.tokens.end(), tokens + at);
  if (mask)
    for (size_t t = 0; t + 1 < r.mask.size(); ++t) mask[at + t] = static_cast<uint8_t>(r.mask[t + 1]);
  return r.tokens.size();
}

}  // namespace

void masked_sample_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, int32_t* row) {
  const size_t len = static_cast<size_t>(seq_len) + 1;
  std::fill(row, row + len, 0);
  place_record(ds, record, which, len, vocab_size, row, nullptr, 0);
}

void masked_target_row(const MaskedDataset& ds, size_t record, int which, int seq_len, int vocab_size, uint8_t* row) {
  std::fill(row, row + seq_len, 0);
  place_record(ds, record, which, static_cast<size_t>(seq_len) + 1, vocab_size, nullptr, row, 0);
}

size_t SftSource::length(size_t record) const {
  return std::min(ds_->sequence_length(record, 0), static_cast<size_t>(seq_len_) + 1);
}

// Greedy: a record joins the current sample while the sample's seq_len + 1 tokens hold it, else
// it starts the next one (a record longer than a sample is cut, alone in its sample).
const SftSource::Packing& SftSource::packing(uint64_t epoch) {
  if (!cached_.starts.empty() && cached_.epoch == epoch) return cached_;
  cached_.epoch = epoch;
  cached_.starts.clear();
  const size_t room = static_cast<size_t>(seq_len_) + 1;
  size_t used = room;   // no sample open yet
  for (uint64_t place = 0; place < records(); ++place) {
    const size_t len = pack_ ? length(record_at(epoch, place)) : room;
    if (used + len > room) {
      cached_.starts.push_back(place);
      used = 0;
    }
    used += len;
  }
  cached_.starts.push_back(records());
  return cached_;
}

void SftSource::fill_sample(int64_t sample, int32_t* tokens, uint8_t* mask, int32_t* docs) {
  // The epoch of the sample: epochs hold different numbers of packed samples, counted in order.
  const uint64_t s = static_cast<uint64_t>(sample);
  while (epoch_first_.back() <= s)
    epoch_first_.push_back(epoch_first_.back() + packing(epoch_first_.size() - 1).starts.size() - 1);
  const uint64_t epoch = static_cast<uint64_t>(std::upper_bound(epoch_first_.begin(), epoch_first_.end(), s) -
                                               epoch_first_.begin()) - 1;
  const Packing& p = packing(epoch);
  const uint64_t index = s - epoch_first_[epoch];
  const size_t room = static_cast<size_t>(seq_len_) + 1, T = static_cast<size_t>(seq_len_);
  size_t at = 0;   // the next free token of the sample
  if (tokens) std::fill(tokens, tokens + room, 0);
  if (mask) std::fill(mask, mask + T, 0);
  for (uint64_t place = p.starts[index]; place < p.starts[index + 1]; ++place) {
    const size_t record = record_at(epoch, place);
    const size_t taken = place_record(*ds_, record, 0, room, vocab_size_, tokens, mask, at);
    if (docs) std::fill(docs + std::min(at, T), docs + std::min(at + taken, T), static_cast<int32_t>(at));
    at += taken;
  }
  if (docs && at < T) std::fill(docs + at, docs + T, static_cast<int32_t>(at));
}

void SftSource::samples(int64_t first, int count, int32_t* out) {
  const size_t len = static_cast<size_t>(seq_len_) + 1;
  for (int k = 0; k < count; ++k) fill_sample(first + k, out + k * len, nullptr, nullptr);
}

void SftSource::target_mask(int64_t first, int count, uint8_t* out) {
  for (int k = 0; k < count; ++k) fill_sample(first + k, nullptr, out + k * static_cast<size_t>(seq_len_), nullptr);
}

void SftSource::doc_starts(int64_t first, int count, int32_t* out) {
  for (int k = 0; k < count; ++k) fill_sample(first + k, nullptr, nullptr, out + k * static_cast<size_t>(seq_len_));
}

}  // namespace trident
