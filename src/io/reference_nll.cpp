// The precomputed reference file: a fixed header (magic, version, key) followed by the NLLs, so
// that its size says whether it is whole before any value is read.
#include "trident/io/reference_nll.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "trident/core/error.hpp"
#include "trident/io/preference_source.hpp"
#include "trident/io/safetensors.hpp"
#include "trident/io/tensorboard.hpp"

namespace trident {
namespace {

constexpr char kMagic[8] = {'T', 'R', 'D', 'P', 'O', 'R', 'E', 'F'};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version, seq_len;
  uint64_t records;
  uint32_t idx_crc, init_from_bytes;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(str(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string reference_nll_path(const std::string& prefix) { return prefix + "_dpo_ref.bin"; }

ReferenceNllKey reference_nll_key(const MaskedDataset& ds, int seq_len, const std::string& init_from) {
  const std::string idx = read_all(ds.tokens().prefix() + ".idx");
  ReferenceNllKey k;
  k.records = ds.num_records();
  k.idx_crc = crc32c(idx.data(), idx.size());
  k.seq_len = static_cast<uint32_t>(seq_len);
  k.init_from = std::filesystem::weakly_canonical(init_from).string();
  return k;
}

std::vector<float> read_reference_nll(const std::string& path, const ReferenceNllKey& key) {
  const std::string rewrite = "; delete it and the run writes it anew from init.from's weights";
  if (!std::filesystem::is_regular_file(path))
    throw InputError(str(path, ": no such file (dpo.reference = precomputed reads it; a new run writes it)"));
  const std::string bytes = read_all(path);
  Header h{};
  if (bytes.size() < sizeof h || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw InputError(str(path, ": not a reference log-probability file (", bytes.size(), " bytes)", rewrite));
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.version != kVersion) throw InputError(str(path, ": version ", h.version, ", expected ", kVersion, rewrite));
  const size_t values = 2 * static_cast<size_t>(key.records);
  if (h.records != key.records || h.idx_crc != key.idx_crc)
    throw InputError(str(path, ": written for another dataset (", h.records, " records, .idx CRC ", h.idx_crc,
                         "; this one has ", key.records, ", CRC ", key.idx_crc, ")", rewrite));
  if (h.seq_len != key.seq_len)
    throw InputError(str(path, ": written for model.seq_len = ", h.seq_len, ", this run has ", key.seq_len, rewrite));
  if (bytes.size() < sizeof h + h.init_from_bytes ||
      bytes.compare(sizeof h, h.init_from_bytes, key.init_from) != 0 || h.init_from_bytes != key.init_from.size())
    throw InputError(str(path, ": written from other reference weights than init.from = ", key.init_from, rewrite));
  const size_t expected = sizeof h + h.init_from_bytes + values * sizeof(float);
  if (bytes.size() != expected)
    throw InputError(str(path, ": ", bytes.size(), " bytes, expected ", expected, " (truncated?)", rewrite));
  std::vector<float> out(values);
  std::memcpy(out.data(), bytes.data() + sizeof h + h.init_from_bytes, values * sizeof(float));
  return out;
}

void write_reference_nll(const std::string& path, const ReferenceNllKey& key, const std::vector<float>& by_record) {
  TRIDENT_CHECK(by_record.size() == 2 * key.records, "write_reference_nll: not two values per record");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.seq_len = key.seq_len;
  h.records = key.records;
  h.idx_crc = key.idx_crc;
  h.init_from_bytes = static_cast<uint32_t>(key.init_from.size());
  std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
  bytes += key.init_from;
  bytes.append(reinterpret_cast<const char*>(by_record.data()), by_record.size() * sizeof(float));
  write_file_atomically(path, bytes);
}

std::vector<float> reference_nll_by_record(const PreferenceSource& all, const std::vector<float>& sample_nll) {
  const size_t records = all.dataset().num_records();
  TRIDENT_CHECK(all.first_record() == 0 && all.end_record() == records && sample_nll.size() == 2 * records,
                "reference_nll_by_record: one epoch of a source over every record");
  std::vector<float> out(2 * records);
  for (size_t s = 0; s < sample_nll.size(); ++s) out[2 * all.record_of(static_cast<int64_t>(s)) + s % 2] = sample_nll[s];
  return out;
}

}  // namespace trident
