// TensorBoard encoding: CRC-32C against its check value, the TFRecord framing, and an Event's bytes
// against the protocol-buffer encoding worked out by hand.
#include <gtest/gtest.h>

#include <cstring>

#include "trident/io/tensorboard.hpp"

namespace trident {
namespace {

TEST(TensorBoard, Crc32cCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);   // the CRC-32C catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, RecordFraming) {
  const std::string r = tfrecord("abc");
  ASSERT_EQ(r.size(), 8u + 4 + 3 + 4);
  uint64_t length = 0;
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length, r.data(), 8);
  std::memcpy(&length_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 15, 4);
  EXPECT_EQ(length, 3u);
  EXPECT_EQ(length_crc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(data_crc, masked_crc32c("abc", 3));
}

TEST(TensorBoard, ScalarEventBytes) {
  // wall_time (1, fixed64) 1.0; step (2, varint) 3; summary (5) { value (1) { tag (1) "a",
  // simple_value (2, fixed32) 1.0f } }.
  const unsigned char want[] = {0x09, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 0x10, 0x03, 0x2A, 0x0A, 0x0A, 0x08,
                                0x0A, 0x01, 'a', 0x15, 0, 0, 0x80, 0x3F};
  EXPECT_EQ(scalar_event(1.0, 3, {{"a", 1.0f}}), std::string(reinterpret_cast<const char*>(want), sizeof want));
  // file_version (3) "brain.Event:2" after the wall time, no step.
  const std::string v = file_version_event(1.0);
  EXPECT_EQ(v.substr(9), std::string("\x1a\x0d") + "brain.Event:2");
}

}  // namespace
}  // namespace trident
