// The file pair a C++ reference dumper writes for its PyTorch checker: DIR/data.bin holds fp32
// arrays back to back, DIR/manifest.json their names, offsets and shapes (and whatever the
// dumper adds to the manifest). check_vs_torch.py's load() reads it.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trident::test {

class ReferenceDump {
 public:
  explicit ReferenceDump(const std::string& dir) : dir_(dir), bin_(dir + "/data.bin", std::ios::binary) {}
  void add(const std::string& name, const std::vector<float>& v, std::vector<int64_t> shape) {
    manifest_["arrays"][name] = {{"offset", offset_}, {"shape", shape}};
    bin_.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    offset_ += v.size();
  }
  nlohmann::json& manifest() { return manifest_; }
  void finish() { std::ofstream(dir_ + "/manifest.json") << manifest_.dump(1); }

 private:
  std::string dir_;
  std::ofstream bin_;
  nlohmann::json manifest_;
  size_t offset_ = 0;   // in floats
};

}  // namespace trident::test
