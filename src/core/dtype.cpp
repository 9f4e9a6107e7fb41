// dtype names and host-side bf16 and fp16 conversion.
#include "trident/core/dtype.hpp"

#include <cstring>

namespace trident {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    case DType::I32: return "int32";
  }
  return "?";
}

float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quiet
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up (and inf): infinity
  if (abs < 0x38800000u) {
    // Below fp16's smallest normal 2^-14: a subnormal, mantissa = round(|f| * 2^24). The implicit
    // bit is made explicit and the 24-bit significand shifted right with the rounding bits kept.
    const int exp = static_cast<int>(abs >> 23);
    if (exp < 102) return sign;  // under half the smallest subnormal 2^-24 (ties at 2^-25 go to even, 0)
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - exp;  // 14..24: the bits that fall off
    const uint32_t half = 1u << (shift - 1), rest = mant & ((1u << shift) - 1);
    uint32_t h = mant >> shift;
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest
  // even; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebased = abs - 0x38000000u;
  const uint32_t h = (rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);  // inf, NaN (payload kept)
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {
    // Subnormal: mant * 2^-24, normalised for fp32.
    int e = -1;
    uint32_t m = mant;
    do {
      m <<= 1;
      ++e;
    } while (!(m & 0x400u));
    u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace trident
