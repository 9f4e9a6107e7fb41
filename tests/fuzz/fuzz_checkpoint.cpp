// Fuzz target: checkpoint attributes and dataset shapes as `trident inspect` reads them. The input
// is a list of operations that build an HDF5 file (attributes of any type, size and element
// count; datasets of any declared shape, some with data), so the fuzzer explores what trident
// reads rather than the HDF5 library's own decoder. Bad files must end in InputError.
#include <cstdint>
#include <string>
#include <vector>

#include "craft_checkpoint.hpp"
#include "fuzz_input.hpp"
#include "trident/core/error.hpp"
#include "trident/io/checkpoint.hpp"

namespace {

const char* const kAttrs[] = {"format_version", "step", "consumed_samples", "seed", "config", "layout", "checksum"};
const char* const kGroups[] = {"/model", "/optim", "/optim/master", "/optim/exp_avg", "/optim/exp_avg_sq", "/other"};

template <size_t N>
const char* pick(const char* const (&names)[N], uint8_t k) { return names[k % N]; }

void build(trident::fuzz::Input& in, trident::test::CraftedFile& f) {
  for (int ops = 0; ops < 32 && in.left() > 0; ++ops) {
    const uint8_t op = in.take<uint8_t>();
    const char* attr = pick(kAttrs, in.take<uint8_t>());
    switch (op % 5) {
      case 0: f.attr_int64(attr, in.take<int64_t>(), 1 + in.take<uint8_t>() % 4); break;
      case 1: f.attr_uint64(attr, in.take<uint64_t>()); break;
      case 2: f.attr_string(attr, in.piece()); break;
      case 3: {   // a dataset of a declared shape, nothing written
        const char* group = pick(kGroups, in.take<uint8_t>());
        const std::string name = in.bytes(in.take<uint8_t>() % 16);
        std::vector<hsize_t> dims(in.take<uint8_t>() % 5);
        for (hsize_t& d : dims) d = in.take<uint32_t>();
        f.dataset(group, name.empty() ? "t" : name, dims);
        break;
      }
      default:    // the whole valid attribute set at once
        f.checkpoint_attrs();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr), true);
  (void)quiet;
  trident::fuzz::Input in(data, size);
  const std::string path = (trident::fuzz::scratch_dir() / "ckpt.h5").string();
  {
    trident::test::CraftedFile f(path);
    if (!f.valid()) return 0;
    build(in, f);
  }
  try {
    trident::describe_checkpoint(path);
  } catch (const trident::InputError&) {
  }
  return 0;
}
