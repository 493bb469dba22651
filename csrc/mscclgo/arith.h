// arith.h holds the element arithmetic of the interpreter's reductions
// (sum, prod, max, min: red_word<DT, OP>): one IEEE rounding per
// operation, in the order the caller gives, so that results are
// byte-identical to the CPU backend's (executor.F32ToF16,
// executor.ElemType.Reduce and friends). The device build uses the CUDA intrinsics, in their two-lane
// forms (half2, bfloat162) on 32-bit words; the host build (csrc/host)
// computes the same roundings in software. prim.h keeps ordering and
// atomics; nothing here touches memory.
#ifndef MSCCLGO_ARITH_H
#define MSCCLGO_ARITH_H

#include <stdint.h>
#if !defined(__CUDACC__)
#include <cmath>
#include <cstring>
#endif

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

// The products: one rounding each (__hmul2 and __fmul_rn keep
// subnormals; nvcc's default is -ftz=false). Before sm_80 a bf16
// product goes through float, which is exact but below float's normal
// range (never reached by the sm_80 and sm_90 builds of make gpu).
MG_DEV uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  __half2 x = *reinterpret_cast<__half2*>(&a), y = *reinterpret_cast<__half2*>(&b);
  __half2 p = __hmul2(x, y);
  return *reinterpret_cast<uint32_t*>(&p);
}
MG_DEV uint16_t mul_f16(uint16_t a, uint16_t b) {
  return __half_as_ushort(__hmul(__ushort_as_half(a), __ushort_as_half(b)));
}
MG_DEV uint16_t mul_bf16(uint16_t a, uint16_t b) {
#if __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__hmul(__ushort_as_bfloat16(a), __ushort_as_bfloat16(b)));
#else
  return __bfloat16_as_ushort(
      __float2bfloat16_rn(__bfloat162float(__ushort_as_bfloat16(a)) * __bfloat162float(__ushort_as_bfloat16(b))));
#endif
}
MG_DEV uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= 800
  __nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162*>(&a), y = *reinterpret_cast<__nv_bfloat162*>(&b);
  __nv_bfloat162 p = __hmul2(x, y);
  return *reinterpret_cast<uint32_t*>(&p);
#else
  return uint32_t(mul_bf16(uint16_t(a), uint16_t(b))) | uint32_t(mul_bf16(a >> 16, b >> 16)) << 16;
#endif
}
MG_DEV uint32_t mul_f32(uint32_t a, uint32_t b) { return __float_as_uint(__fmul_rn(__uint_as_float(a), __uint_as_float(b))); }

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

// f32_bf16 rounds to bf16, to nearest even, as executor.F32ToBF16.
MG_DEV uint16_t f32_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fff;
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

MG_DEV uint16_t add_f16(uint16_t a, uint16_t b) { return f32_f16(f16_f32(a) + f16_f32(b)); }
MG_DEV uint16_t add_bf16(uint16_t a, uint16_t b) {
  return f32_bf16(bits_f32(uint32_t(a) << 16) + bits_f32(uint32_t(b) << 16));
}
MG_DEV uint32_t add_f32(uint32_t a, uint32_t b) {
  float s = bits_f32(a) + bits_f32(b);
  return s != s ? 0x7fffffffu : f32_bits(s);
}

// The products, rounded once as __hmul, __hmul2 and __fmul_rn do. The
// float product of two fp16 values is exact (22 significant bits, in
// float's normal range), so rounding it to fp16 is rounding the exact
// product; a bf16 product (16 bits) is exact in float too, except below
// float's normal range, where float would round first: there the exact
// double product is rounded to bf16's subnormal grid (2^-133) directly,
// as executor.mulBF16 does.
MG_DEV uint16_t mul_f16(uint16_t a, uint16_t b) { return f32_f16(f16_f32(a) * f16_f32(b)); }
MG_DEV uint16_t mul_bf16(uint16_t a, uint16_t b) {
  float x = bits_f32(uint32_t(a) << 16), y = bits_f32(uint32_t(b) << 16), p = x * y;
  uint32_t abs = f32_bits(p) & 0x7fffffff;
  if (abs == 0 || abs >= 0x00800000) return f32_bf16(p);
  double v = double(x) * double(y);
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double r = std::nearbyint(std::ldexp(std::fabs(v), 133));  // default rounding: to nearest even
  return sign | uint16_t(r);
}
MG_DEV uint32_t mul_f32(uint32_t a, uint32_t b) {
  float p = bits_f32(a) * bits_f32(b);
  return p != p ? 0x7fffffffu : f32_bits(p);
}
MG_DEV uint32_t mul_f16x2(uint32_t a, uint32_t b) {
  return uint32_t(mul_f16(uint16_t(a), uint16_t(b))) | uint32_t(mul_f16(a >> 16, b >> 16)) << 16;
}
MG_DEV uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  return uint32_t(mul_bf16(uint16_t(a), uint16_t(b))) | uint32_t(mul_bf16(a >> 16, b >> 16)) << 16;
}
MG_DEV uint32_t add_f16x2(uint32_t a, uint32_t b) {
  return uint32_t(add_f16(uint16_t(a), uint16_t(b))) | uint32_t(add_f16(a >> 16, b >> 16)) << 16;
}
MG_DEV uint32_t add_bf16x2(uint32_t a, uint32_t b) {
  return uint32_t(add_bf16(uint16_t(a), uint16_t(b))) | uint32_t(add_bf16(a >> 16, b >> 16)) << 16;
}

#endif

// MAX and MIN, the same code on the device and the host (integer
// operations only, so that both builds give the same bits on every
// input): the larger (smaller) operand, −0 ordered below +0, a NaN
// operand ignored and two NaNs giving the canonical NaN, as __hmax2,
// __hmin2, fmaxf and fminf are documented to (docs/executor.md §5.4);
// int32 compares signed. key16 and key32 map sign-magnitude bits (not
// NaN) to integers in the values' order.
MG_DEV int32_t key16(uint32_t h) {
  int32_t s = int32_t(int16_t(uint16_t(h)));
  return s ^ ((s >> 15) & 0x7fff);
}
MG_DEV int32_t key32(uint32_t x) {
  int32_t s = int32_t(x);
  return s ^ ((s >> 31) & 0x7fffffff);
}

// minmax16 is one lane (the low 16 bits of a and b) of type DT (MG_F16
// or MG_BF16); MIN when IS_MIN.
template <int DT, bool IS_MIN>
MG_DEV uint32_t minmax16(uint32_t a, uint32_t b) {
  constexpr uint32_t inf = DT == MG_BF16 ? 0x7f80u : 0x7c00u;
  a &= 0xffff;
  b &= 0xffff;
  bool na = (a & 0x7fff) > inf, nb = (b & 0x7fff) > inf;
  if (na && nb) return 0x7fff;
  if (na) return b;
  if (nb) return a;
  return (key16(a) < key16(b)) == IS_MIN ? a : b;
}

template <bool IS_MIN>
MG_DEV uint32_t minmax_f32(uint32_t a, uint32_t b) {
  bool na = (a & 0x7fffffff) > 0x7f800000u, nb = (b & 0x7fffffff) > 0x7f800000u;
  if (na && nb) return 0x7fffffffu;
  if (na) return b;
  if (nb) return a;
  return (key32(a) < key32(b)) == IS_MIN ? a : b;
}

template <bool IS_MIN>
MG_DEV uint32_t minmax_i32(uint32_t a, uint32_t b) {
  return (int32_t(a) < int32_t(b)) == IS_MIN ? a : b;
}

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

// red_word reduces two 32-bit words lane-wise with reduction OP (MG_SUM,
// MG_PROD, MG_MAX, MG_MIN) in element type DT; both are template
// parameters, so each instantiation is one straight-line function and
// ReduceSum's is add_word itself.
template <int DT, int OP>
MG_DEV uint32_t red_word(uint32_t a, uint32_t b) {
  if (OP == MG_SUM) return add_word<DT>(a, b);
  if (OP == MG_PROD) {
    if (DT == MG_F16) return mul_f16x2(a, b);
    if (DT == MG_BF16) return mul_bf16x2(a, b);
    if (DT == MG_F32) return mul_f32(a, b);
    return a * b;
  }
  constexpr bool is_min = OP == MG_MIN;
  if (DT == MG_F16 || DT == MG_BF16) return minmax16<DT, is_min>(a, b) | minmax16<DT, is_min>(a >> 16, b >> 16) << 16;
  if (DT == MG_F32) return minmax_f32<is_min>(a, b);
  return minmax_i32<is_min>(a, b);
}

template <int DT, int OP>
MG_DEV v16 red_v16(v16 a, v16 b) {
  return v16{red_word<DT, OP>(a.x, b.x), red_word<DT, OP>(a.y, b.y), red_word<DT, OP>(a.z, b.z),
             red_word<DT, OP>(a.w, b.w)};
}

// red_elem reduces one element of 2 or 4 bytes held in the low bits.
template <int DT, int OP>
MG_DEV uint32_t red_elem(uint32_t a, uint32_t b) {
  if (OP == MG_SUM) return add_elem<DT>(a, b);
  if (DT == MG_F16 || DT == MG_BF16) {
    if (OP == MG_PROD) return DT == MG_F16 ? mul_f16(uint16_t(a), uint16_t(b)) : mul_bf16(uint16_t(a), uint16_t(b));
    return minmax16<DT, OP == MG_MIN>(a, b);
  }
  return red_word<DT, OP>(a, b);
}

}  // namespace mg

#endif  // MSCCLGO_ARITH_H
