// open_data: the training and validation sources a run's [data] options describe (blends of
// indexed datasets, optionally split by documents into training and validation parts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "trident/config/run_config.hpp"
#include "trident/train/batch_source.hpp"

namespace trident {

struct DataSources {
  std::unique_ptr<BatchSource> train;
  std::unique_ptr<BatchSource> val;   // null when there is no validation data
  std::string description;            // one line per dataset part, for the log
  uint64_t train_sequences = 0;       // sequences in one pass over every training part (an epoch)
};

// Opens every dataset of data.train (and data.val, or the documents data.split holds out). Throws
// InputError naming the file or option: a missing or corrupt file, a malformed spec, a dataset or
// split part too short for one sequence of seq_len + 1 tokens. Token ids >= vocab_size are reported
// when a sample holding them is read.
DataSources open_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed);

// The same for supervised fine-tuning (task sft): data.train (and data.val) name one chat dataset
// each (PREFIX with PREFIX_mask, see docs/FINE_TUNING.md), read one record per sample, or packed
// with data.pack (SftSource); data.split holds out the last records. train_sequences counts the
// first epoch's samples (records, unpacked). Throws InputError for a
// blend, a dataset without its mask, a preference dataset, or a split that leaves no record.
DataSources open_sft_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed);

// The same for preference pairs (tasks dpo and reward): data.train (and data.val) name one preference
// dataset each (trident tokenize --format preference), read as PreferenceSource: samples 2i and 2i + 1
// are pair i's chosen and rejected sides. train_sequences counts sequences (twice the records). Throws
// InputError for a blend, a dataset without its mask, a chat dataset, or a split that leaves no record.
DataSources open_preference_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed);

// The validation source alone, as open_data (task sft: open_sft_data; dpo, reward:
// open_preference_data) builds it: data.val, else the documents data.split holds out of
// data.train; null when there is neither. data.train is opened only for a split.
std::unique_ptr<BatchSource> open_validation_data(const DataConfig& cfg, int seq_len, int vocab_size, uint64_t seed,
                                                  const std::string& task = "pretrain");

}  // namespace trident
