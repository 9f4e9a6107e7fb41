// Fuzz target: a Megatron .idx/.bin pair through IndexedDataset (open, then every document's
// tokens read). Bad input must end in InputError.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "trident/core/error.hpp"
#include "trident/io/indexed_dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trident::fuzz::Input in(data, size);
  trident::fuzz::write_scratch("ds.idx", in.piece());
  trident::fuzz::write_scratch("ds.bin", in.rest());
  try {
    const trident::IndexedDataset ds((trident::fuzz::scratch_dir() / "ds").string());
    std::vector<int32_t> tokens;
    for (size_t d = 0; d < ds.num_documents(); ++d) {
      const size_t first = ds.document_offset(d), end = ds.document_offset(d + 1);
      tokens.resize(std::min<size_t>(end - first, 1 << 16));
      ds.read_tokens(first, tokens.size(), tokens.data());
    }
    for (size_t s = 0; s < std::min<size_t>(ds.num_sequences(), 64); ++s) ds.sequence(s);
  } catch (const trident::InputError&) {
  }
  return 0;
}
