// Fuzz target: a safetensors model through SafetensorsModel and every read it offers. The input
// is an index JSON (a piece; empty: no index) and one file's bytes: with an index the file is
// its shard model-00001-of-00001.safetensors, else model.safetensors. Bad input must end in
// InputError.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "trident/core/error.hpp"
#include "trident/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  trident::fuzz::Input in(data, size);
  const std::string index = in.piece();
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "model-00001-of-00001.safetensors"})
    fs::remove(trident::fuzz::scratch_dir() / name);
  if (!index.empty()) trident::fuzz::write_scratch("model.safetensors.index.json", index);
  trident::fuzz::write_scratch(index.empty() ? "model.safetensors" : "model-00001-of-00001.safetensors", in.rest());
  try {
    const trident::SafetensorsModel model(trident::fuzz::scratch_dir().string());
    std::vector<float> values;
    for (const std::string& name : model.tensors()) {
      const trident::SafetensorsTensor& t = model.info(name);
      if (!trident::safetensors_dtype_is_float(t.dtype)) continue;
      // Validation bounds numel by the file's size, so this allocation is at most the input's.
      values.resize(t.numel());
      model.read_f32(name, values.data());
      const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
      model.read_rows_f32(name, rows / 2, rows, values.data());
    }
    model.info("not.in.the.file");
  } catch (const trident::InputError&) {
  }
  return 0;
}
