// Element types of tensors and communication buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace trident {

enum class DType : uint8_t { F32, BF16, F16, I32 };

constexpr size_t dtype_size(DType t) {
  return t == DType::F32 || t == DType::I32 ? 4 : 2;
}

const char* dtype_name(DType t);

// Round-to-nearest-even fp32 -> bf16 and back, for host-side conversions and tests. Inline, so
// that a loop over many elements (the host optimizer's) vectorises.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_to_float(uint16_t b);
// The same for IEEE fp16: values past 65504 round to infinity, small ones to fp16 subnormals,
// NaN stays NaN (quiet, sign kept).
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

}  // namespace trident
