// TempDir: a fresh directory under the system temp dir for one test, removed with everything in it.
#pragma once

#include <filesystem>
#include <random>
#include <string>

namespace trident::test {

class TempDir {
 public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() / ("trident_test_" + std::to_string(std::random_device{}()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace trident::test
