// TensorBoardWriter: scalar summaries in a TensorBoard event file (TFRecord framing around Event
// protocol-buffer messages), encoded by hand: the few fields needed are written directly (see
// docs/OPERATIONS.md for why no protobuf library).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "trident/train/trainer.hpp"

namespace trident {

// CRC-32C (Castagnoli), and TFRecord's masked form of it.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// One TFRecord: length (u64 LE), masked CRC of the length, data, masked CRC of the data.
std::string tfrecord(const std::string& data);

// A serialized Event{wall_time, step, summary{value{tag, simple_value}...}}; with no scalars and a
// file_version instead, the event that opens a file.
std::string scalar_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
std::string file_version_event(double wall_time);

class TensorBoardWriter {
 public:
  // Empty dir: writes nothing. Otherwise creates dir if needed and a new
  // events.out.tfevents.<time>.<host>.<pid> in it; never overwrites a file. Throws InputError.
  explicit TensorBoardWriter(const std::string& dir);
  // The step's measured values (NaN ones left out) as scalars tagged train/..., val/..., perf/....
  void write(const StepStats& s);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace trident
