// Windows of the token stream in sampler order.
#include "trident/io/token_source.hpp"

#include "trident/core/error.hpp"

namespace trident {

TokenSource::TokenSource(const std::string& prefix, int seq_len, int vocab_size, uint64_t seed)
    : seq_len_(seq_len), vocab_size_(vocab_size) {
  if (prefix.empty()) throw InputError("data.train is empty: give the prefix of a dataset (PREFIX.bin + PREFIX.idx)");
  ds_ = std::make_unique<IndexedDataset>(prefix);
  if (ds_->num_tokens() < static_cast<size_t>(seq_len) + 1)
    throw InputError(str(prefix, ": ", ds_->num_tokens(), " tokens is less than one sequence of model.seq_len + 1 = ",
                         seq_len + 1));
  sampler_ = std::make_unique<SequenceSampler>((ds_->num_tokens() - 1) / seq_len, seed);
}

void TokenSource::samples(int64_t first, int count, int32_t* out) {
  const size_t len = static_cast<size_t>(seq_len_) + 1;
  for (int k = 0; k < count; ++k) {
    uint64_t w = sampler_->window(static_cast<uint64_t>(first + k));
    int32_t* dst = out + k * len;
    ds_->read_tokens(w * seq_len_, len, dst);
    for (size_t i = 0; i < len; ++i)
      if (dst[i] < 0 || dst[i] >= vocab_size_)
        throw InputError(str(ds_->prefix(), ": token id ", dst[i], " is outside model.vocab_size = ", vocab_size_,
                             "; the data was tokenized for another vocabulary"));
  }
}

}  // namespace trident
