// Helpers of the fuzz targets: the input cut into pieces, and a scratch directory per process
// for parsers that read files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace trident::fuzz {

// Reads the fuzzer's bytes front to back; past the end every read gives zeros / empty text.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t left() const { return size_ - pos_; }
  template <class T>
  T take() {
    T v{};
    const size_t n = std::min(sizeof(T), left());
    std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  std::string bytes(size_t n) {
    n = std::min(n, left());
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // A piece with a 2-byte length in front.
  std::string piece() { return bytes(take<uint16_t>()); }
  std::string rest() { return bytes(left()); }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() / ("trident_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, const std::string& bytes) {
  const std::string path = (scratch_dir() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

}  // namespace trident::fuzz
