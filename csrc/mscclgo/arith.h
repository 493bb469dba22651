// arith.h holds the element arithmetic of the interpreter's reductions:
// one IEEE rounding per addition, in the order the caller gives, so that
// results are byte-identical to the CPU backend's (executor.F32ToF16 and
// friends). The device build uses the CUDA intrinsics, in their two-lane
// forms (half2, bfloat162) on 32-bit words; the host build (csrc/host)
// computes the same roundings in software. prim.h keeps ordering and
// atomics; nothing here touches memory.
#ifndef MSCCLGO_ARITH_H
#define MSCCLGO_ARITH_H

#include <stdint.h>

#include "mscclgo/layout.h"
#include "mscclgo/prim.h"

namespace mg {

#if defined(__CUDACC__)

MG_DEV uint16_t add_f16(uint16_t a, uint16_t b) {
  return __half_as_ushort(__hadd(__ushort_as_half(a), __ushort_as_half(b)));
}
MG_DEV uint16_t add_bf16(uint16_t a, uint16_t b) {
#if __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__hadd(__ushort_as_bfloat16(a), __ushort_as_bfloat16(b)));
#else
  return __bfloat16_as_ushort(
      __float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(a)) + __bfloat162float(__ushort_as_bfloat16(b))));
#endif
}
MG_DEV uint32_t add_f32(uint32_t a, uint32_t b) { return __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(b))); }

// Two lanes at once: each lane is rounded once, as the scalar forms.
MG_DEV uint32_t add_f16x2(uint32_t a, uint32_t b) {
  __half2 x = *reinterpret_cast<__half2*>(&a), y = *reinterpret_cast<__half2*>(&b);
  __half2 s = __hadd2(x, y);
  return *reinterpret_cast<uint32_t*>(&s);
}
MG_DEV uint32_t add_bf16x2(uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= 800
  __nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162*>(&a), y = *reinterpret_cast<__nv_bfloat162*>(&b);
  __nv_bfloat162 s = __hadd2(x, y);
  return *reinterpret_cast<uint32_t*>(&s);
#else
  return uint32_t(add_bf16(uint16_t(a), uint16_t(b))) | uint32_t(add_bf16(a >> 16, b >> 16)) << 16;
#endif
}

#else  // host build

MG_DEV float bits_f32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
MG_DEV uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// f16_f32 widens fp16 bits exactly.
MG_DEV float f16_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_f32(sign | 0x7f800000 | m << 13);
  if (e == 0) {
    if (m == 0) return bits_f32(sign);
    e = 113;
    while ((m & 0x400) == 0) {
      m <<= 1;
      e--;
    }
    return bits_f32(sign | e << 23 | (m & 0x3ff) << 13);
  }
  return bits_f32(sign | (e + 112) << 23 | m << 13);
}

// f32_f16 rounds to fp16, to nearest even, as executor.F32ToF16.
MG_DEV uint16_t f32_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = uint16_t(x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x > 0x7f800000) return 0x7fff;
  if (x >= 0x477ff000) return sign | 0x7c00;
  if (x >= 0x38800000) {
    x -= 112u << 23;
    x += 0xfff + ((x >> 13) & 1);
    return sign | uint16_t(x >> 13);
  }
  if (x < 0x33000000) return sign;
  uint32_t e = x >> 23, m = (x & 0x7fffff) | 0x800000, s = 126 - e;
  uint32_t r = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (r & 1))) r++;
  return sign | uint16_t(r);
}

MG_DEV uint16_t add_f16(uint16_t a, uint16_t b) { return f32_f16(f16_f32(a) + f16_f32(b)); }
MG_DEV uint16_t add_bf16(uint16_t a, uint16_t b) {
  uint32_t x = f32_bits(bits_f32(uint32_t(a) << 16) + bits_f32(uint32_t(b) << 16));
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fff;
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
MG_DEV uint32_t add_f32(uint32_t a, uint32_t b) {
  float s = bits_f32(a) + bits_f32(b);
  return s != s ? 0x7fffffffu : f32_bits(s);
}
MG_DEV uint32_t add_f16x2(uint32_t a, uint32_t b) {
  return uint32_t(add_f16(uint16_t(a), uint16_t(b))) | uint32_t(add_f16(a >> 16, b >> 16)) << 16;
}
MG_DEV uint32_t add_bf16x2(uint32_t a, uint32_t b) {
  return uint32_t(add_bf16(uint16_t(a), uint16_t(b))) | uint32_t(add_bf16(a >> 16, b >> 16)) << 16;
}

#endif

// add_word adds two 32-bit words lane-wise in element type DT (resolved
// at compile time: the kernel is instantiated per element type).
template <int DT>
MG_DEV uint32_t add_word(uint32_t a, uint32_t b) {
  if (DT == MG_F16) return add_f16x2(a, b);
  if (DT == MG_BF16) return add_bf16x2(a, b);
  if (DT == MG_F32) return add_f32(a, b);
  return a + b;
}

template <int DT>
MG_DEV v16 add_v16(v16 a, v16 b) {
  return v16{add_word<DT>(a.x, b.x), add_word<DT>(a.y, b.y), add_word<DT>(a.z, b.z), add_word<DT>(a.w, b.w)};
}

// add_elem adds one element of ES bytes (2 or 4) held in the low bits.
template <int DT>
MG_DEV uint32_t add_elem(uint32_t a, uint32_t b) {
  if (DT == MG_F16) return add_f16(uint16_t(a), uint16_t(b));
  if (DT == MG_BF16) return add_bf16(uint16_t(a), uint16_t(b));
  return add_word<DT>(a, b);
}

}  // namespace mg

#endif  // MSCCLGO_ARITH_H
