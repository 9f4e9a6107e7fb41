// MetricsWriter: appends one JSON object per optimizer step to a JSON Lines file.
#pragma once

#include <fstream>
#include <string>

#include "trident/train/trainer.hpp"

namespace trident {

// Throws InputError naming `option` when `path` (non-empty) cannot be opened for writing; does not
// change an existing file.
void check_writable(const char* option, const std::string& path);

class MetricsWriter {
 public:
  // Empty path: writes nothing. Throws InputError when the file cannot be opened for appending.
  explicit MetricsWriter(const std::string& path);
  void write(const StepStats& s);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace trident
