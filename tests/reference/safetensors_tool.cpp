// The C++ side of check_safetensors.py: writes safetensors files from fp32 data the script gives,
// and dumps what trident reads from the script's files. Bad input: one line on stderr, exit 2.
//   safetensors_tool write SPEC.json   SPEC: {"out", "max_shard_bytes"?, "metadata"?, "tensors":
//                                       [{"name", "dtype", "shape", "raw": fp32 file}]}; with
//                                       max_shard_bytes "out" is a directory (sharded writer)
//   safetensors_tool dump PATH OUTDIR  OUTDIR/tensors.json: per tensor name, dtype, shape, file,
//                                       and for float dtypes "raw", an fp32 file of its values
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/core/error.hpp"
#include "trident/io/safetensors.hpp"

namespace {

using nlohmann::json;
using namespace trident;

SafetensorsDtype dtype_of(const std::string& name) {
  for (SafetensorsDtype t : {SafetensorsDtype::F32, SafetensorsDtype::F16, SafetensorsDtype::BF16})
    if (name == safetensors_dtype_name(t)) return t;
  throw InputError("spec: dtype " + name + " is not written");
}

void write(const std::string& spec_path) {
  std::ifstream in(spec_path);
  const json spec = json::parse(in);
  std::vector<std::vector<float>> data;   // kept until the write
  std::vector<SafetensorsEntry> entries;
  for (const json& t : spec["tensors"]) {
    std::ifstream raw(t["raw"].get<std::string>(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(raw)), std::istreambuf_iterator<char>());
    data.emplace_back(bytes.size() / 4);
    std::memcpy(data.back().data(), bytes.data(), bytes.size());
    entries.push_back({t["name"], dtype_of(t["dtype"]), t["shape"].get<std::vector<int64_t>>(), nullptr});
  }
  for (size_t i = 0; i < entries.size(); ++i) entries[i].data = data[i].data();
  const json metadata = spec.value("metadata", json::object());
  if (spec.contains("max_shard_bytes")) {
    SafetensorsShardedWriter w(spec["max_shard_bytes"].get<uint64_t>());
    for (const SafetensorsEntry& e : entries) w.add(e);
    for (const auto& [key, value] : metadata.items()) w.set_metadata(key, value);
    w.write(spec["out"]);
  } else {
    SafetensorsWriter w;
    for (const SafetensorsEntry& e : entries) w.add(e);
    for (const auto& [key, value] : metadata.items()) w.set_metadata(key, value);
    w.write(spec["out"]);
  }
}

void dump(const std::string& path, const std::string& out_dir) {
  const SafetensorsModel model(path);
  json out = {{"sharded", model.sharded()}, {"metadata", model.metadata()}, {"tensors", json::array()}};
  for (const std::string& name : model.tensors()) {
    const SafetensorsTensor& t = model.info(name);
    json entry = {{"name", name}, {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape},
                  {"file", model.file_of(name).path()}};
    if (safetensors_dtype_is_float(t.dtype)) {
      std::vector<float> values(t.numel());
      model.read_f32(name, values.data());
      const std::string raw = out_dir + "/" + std::to_string(out["tensors"].size()) + ".f32";
      std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(values.data()), values.size() * 4);
      entry["raw"] = raw;
    }
    out["tensors"].push_back(entry);
  }
  std::ofstream(out_dir + "/tensors.json") << out.dump(1);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "write" && argc == 3) write(argv[2]);
    else if (mode == "dump" && argc == 4) dump(argv[2], argv[3]);
    else throw InputError("usage: safetensors_tool write SPEC.json | dump PATH OUTDIR");
  } catch (const InputError& e) {
    std::fprintf(stderr, "safetensors_tool: error: %s\n", printable(e.what()).c_str());
    return 2;
  }
  return 0;
}
