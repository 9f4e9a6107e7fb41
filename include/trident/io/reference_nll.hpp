// Task dpo's precomputed reference (dpo.reference = precomputed): the frozen reference model's
// sequence NLLs of every record of a preference dataset, in PREFIX_dpo_ref.bin beside it, keyed to
// the dataset (its record count and .idx checksum), the sequence length and the weights they came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trident/io/masked_dataset.hpp"

namespace trident {

class PreferenceSource;

// PREFIX_dpo_ref.bin for the dataset PREFIX.
std::string reference_nll_path(const std::string& prefix);

// What the NLLs of a file depend on; a file whose key differs belongs to another run's data.
struct ReferenceNllKey {
  uint64_t records = 0;     // the dataset's records (pairs)
  uint32_t idx_crc = 0;     // CRC-32C of PREFIX.idx (sequence sizes and document index)
  uint32_t seq_len = 0;     // sequences are cut to seq_len + 1 tokens
  std::string init_from;    // the reference weights (init.from, as an absolute path)
};
ReferenceNllKey reference_nll_key(const MaskedDataset& ds, int seq_len, const std::string& init_from);

// The NLLs of `path`: 2 * key.records floats, record r's chosen side at 2r, rejected at 2r + 1.
// Throws InputError naming the file and the fix when it is missing, truncated, not such a file,
// or keyed otherwise (another dataset, seq_len or init.from).
std::vector<float> read_reference_nll(const std::string& path, const ReferenceNllKey& key);
// Writes them atomically (PATH.tmp renamed over PATH).
void write_reference_nll(const std::string& path, const ReferenceNllKey& key, const std::vector<float>& by_record);

// By record, as read_reference_nll gives them, from the NLLs of samples [0, 2 * records) of
// `all`, a source over every record of its dataset: one epoch, which reads each record once.
std::vector<float> reference_nll_by_record(const PreferenceSource& all, const std::vector<float>& sample_nll);

}  // namespace trident
