//go:build amd64 && !purego

#include "textflag.h"

// The vector kernels of kernels_amd64.go (AVX2, F16C). Each takes n
// elements (a multiple of its vector) at d, x and y; d may be x or y.
// Every element is what the scalar definitions of dtype.go and reduce.go
// give: IEEE float32 arithmetic rounded to nearest even, fp16 rounded by
// VCVTPS2PH (imm 0: to nearest even), NaN results made canonical.
// X15 and R14 are left alone (Go's ABIInternal keeps zero and g there).

// BCASTD broadcasts a 32-bit constant into Y register r.
#define BCASTD(c, r) MOVL $c, AX; MOVQ AX, X14; VPBROADCASTD X14, r
#define BCASTW(c, r) MOVL $c, AX; MOVQ AX, X14; VPBROADCASTW X14, r

// func addF32AVX2(d, x, y *uint32, n int)
TEXT ·addF32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
addf32loop:
	CMPQ BX, CX
	JAE  addf32done
	VMOVUPS   (SI)(BX*4), Y0
	VMOVUPS   32(SI)(BX*4), Y1
	VADDPS    (DX)(BX*4), Y0, Y0
	VADDPS    32(DX)(BX*4), Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VMOVUPS   Y0, (DI)(BX*4)
	VMOVUPS   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       addf32loop
addf32done:
	VZEROUPPER
	RET

// func mulF32AVX2(d, x, y *uint32, n int)
TEXT ·mulF32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
mulf32loop:
	CMPQ BX, CX
	JAE  mulf32done
	VMOVUPS   (SI)(BX*4), Y0
	VMOVUPS   32(SI)(BX*4), Y1
	VMULPS    (DX)(BX*4), Y0, Y0
	VMULPS    32(DX)(BX*4), Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VMOVUPS   Y0, (DI)(BX*4)
	VMOVUPS   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mulf32loop
mulf32done:
	VZEROUPPER
	RET

// MMF32 is MAX (Y9 zero) or MIN (Y9 all ones) of the float32 bits in a
// and b, left in a; Y10 holds 0x7fffffff, Y11 0x7f800000; it uses t, u
// and v. The key of a non-NaN value orders its bits as the values (-0
// below +0): x ^ ((x >> 31 arithmetic) >> 1). b is chosen where key(b) >
// key(a) (MAX; Y9 inverts it for MIN), where a is a NaN, and not where b
// is a NaN; two NaNs give the canonical NaN.
#define MMF32(a, b, t, u, v) \
	VPSRAD    $31, a, t; \
	VPSRLD    $1, t, t; \
	VPXOR     a, t, t; \
	VPSRAD    $31, b, u; \
	VPSRLD    $1, u, u; \
	VPXOR     b, u, u; \
	VPCMPGTD  t, u, t; \
	VPXOR     Y9, t, t; \
	VPAND     Y10, a, u; \
	VPCMPGTD  Y11, u, u; \
	VPAND     Y10, b, v; \
	VPCMPGTD  Y11, v, v; \
	VPANDN    t, v, t; \
	VPOR      u, t, t; \
	VPBLENDVB t, b, a, a; \
	VPAND     u, v, u; \
	VPBLENDVB u, Y10, a, a

// func minMaxF32AVX2(d, x, y *uint32, n int, flip uint32)
//
// 16 elements a step in two independent halves (MMF32).
TEXT ·minMaxF32AVX2(SB), NOSPLIT, $0-36
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL flip+32(FP), AX
	MOVQ AX, X14
	VPBROADCASTD X14, Y9
	BCASTD(0x7fffffff, Y10)
	BCASTD(0x7f800000, Y11)
	XORQ BX, BX
mmf32loop:
	CMPQ BX, CX
	JAE  mmf32done
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y5
	VMOVDQU   (DX)(BX*4), Y1
	VMOVDQU   32(DX)(BX*4), Y6
	MMF32(Y0, Y1, Y2, Y3, Y4)
	MMF32(Y5, Y6, Y7, Y8, Y12)
	VMOVDQU   Y0, (DI)(BX*4)
	VMOVDQU   Y5, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mmf32loop
mmf32done:
	VZEROUPPER
	RET

// func addF16AVX2(d, x, y *uint16, n int)
//
// The float32 sum of two fp16 values, a NaN made 0x7fffffff (which
// VCVTPS2PH makes 0x7fff), rounded to fp16.
TEXT ·addF16AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
addf16loop:
	CMPQ BX, CX
	JAE  addf16done
	VCVTPH2PS (SI)(BX*2), Y0
	VCVTPH2PS 16(SI)(BX*2), Y1
	VCVTPH2PS (DX)(BX*2), Y4
	VCVTPH2PS 16(DX)(BX*2), Y5
	VADDPS    Y4, Y0, Y0
	VADDPS    Y5, Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VCVTPS2PH $0, Y0, (DI)(BX*2)
	VCVTPS2PH $0, Y1, 16(DI)(BX*2)
	ADDQ      $16, BX
	JMP       addf16loop
addf16done:
	VZEROUPPER
	RET

// func mulF16AVX2(d, x, y *uint16, n int)
//
// The float32 product of two fp16 values is exact; rounded once.
TEXT ·mulF16AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
mulf16loop:
	CMPQ BX, CX
	JAE  mulf16done
	VCVTPH2PS (SI)(BX*2), Y0
	VCVTPH2PS 16(SI)(BX*2), Y1
	VCVTPH2PS (DX)(BX*2), Y4
	VCVTPH2PS 16(DX)(BX*2), Y5
	VMULPS    Y4, Y0, Y0
	VMULPS    Y5, Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VCVTPS2PH $0, Y0, (DI)(BX*2)
	VCVTPS2PH $0, Y1, 16(DI)(BX*2)
	ADDQ      $16, BX
	JMP       mulf16loop
mulf16done:
	VZEROUPPER
	RET

// WIDENBF loads 8 bf16 at m into the float32 lanes of r.
#define WIDENBF(m, r) VPMOVZXWD m, r; VPSLLD $16, r, r

// ROUNDBF rounds the float32 lanes of r to bf16 bits in the low half of
// each lane (nearest even, a NaN made 0x7fff through 0x7fff0000); Y10
// holds 0x7fff0000, Y11 1, Y12 0x7fff; it uses t and u.
#define ROUNDBF(r, t, u) \
	VCMPPS    $3, r, r, t; \
	VBLENDVPS t, Y10, r, r; \
	VPSRLD    $16, r, u; \
	VPAND     Y11, u, u; \
	VPADDD    u, r, r; \
	VPADDD    Y12, r, r; \
	VPSRLD    $16, r, r

// func addBF16AVX2(d, x, y *uint16, n int)
//
// 16 elements a step, in two independent halves: the sums rounded in
// the lanes of Y0 and Y4, packed to words (VPACKUSDW interleaves the
// 128-bit lanes; VPERMQ puts them back in order).
TEXT ·addBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fff0000, Y10)
	BCASTD(1, Y11)
	BCASTD(0x7fff, Y12)
	XORQ BX, BX
addbf16loop:
	CMPQ BX, CX
	JAE  addbf16done
	WIDENBF((SI)(BX*2), Y0)
	WIDENBF(16(SI)(BX*2), Y4)
	WIDENBF((DX)(BX*2), Y1)
	WIDENBF(16(DX)(BX*2), Y5)
	VADDPS Y1, Y0, Y0
	VADDPS Y5, Y4, Y4
	ROUNDBF(Y0, Y2, Y3)
	ROUNDBF(Y4, Y6, Y7)
	VPACKUSDW Y4, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   Y0, (DI)(BX*2)
	ADDQ   $16, BX
	JMP    addbf16loop
addbf16done:
	VZEROUPPER
	RET

// TINYBF sets the lanes of t whose float32 product in r has a magnitude
// below 2^-126 but is not zero (Y13 holds 0x7fffffff, Y9 0x00800000, Y8
// zero); it uses u.
#define TINYBF(r, t, u) \
	VPAND    Y13, r, t; \
	VPCMPGTD t, Y9, u; \
	VPCMPGTD Y8, t, t; \
	VPAND    u, t, t

// func mulBF16AVX2(d, x, y *uint16, n int) int
//
// 16 elements a step in two independent halves, as addBF16AVX2. It
// stops before 16 elements whose products include one of magnitude
// below 2^-126 but not zero, and returns the elements done.
TEXT ·mulBF16AVX2(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fff0000, Y10)
	BCASTD(1, Y11)
	BCASTD(0x7fff, Y12)
	BCASTD(0x7fffffff, Y13)
	BCASTD(0x00800000, Y9)
	VPXOR Y8, Y8, Y8
	XORQ BX, BX
mulbf16loop:
	CMPQ BX, CX
	JAE  mulbf16done
	WIDENBF((SI)(BX*2), Y0)
	WIDENBF(16(SI)(BX*2), Y4)
	WIDENBF((DX)(BX*2), Y1)
	WIDENBF(16(DX)(BX*2), Y5)
	VMULPS   Y1, Y0, Y0
	VMULPS   Y5, Y4, Y4
	TINYBF(Y0, Y2, Y3)
	TINYBF(Y4, Y6, Y7)
	VPOR     Y6, Y2, Y2
	VPTEST   Y2, Y2
	JNZ      mulbf16done
	ROUNDBF(Y0, Y2, Y3)
	ROUNDBF(Y4, Y6, Y7)
	VPACKUSDW Y4, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU  Y0, (DI)(BX*2)
	ADDQ     $16, BX
	JMP      mulbf16loop
mulbf16done:
	MOVQ BX, ret+32(FP)
	VZEROUPPER
	RET

// func minMax16AVX2(d, x, y *uint16, n int, flip, nan uint16)
//
// minMaxF32AVX2 over 16-bit lanes: the key x ^ ((x >> 15 arithmetic) >>
// 1), a NaN where the bits without the sign exceed nan.
TEXT ·minMax16AVX2(SB), NOSPLIT, $0-36
	MOVQ  d+0(FP), DI
	MOVQ  x+8(FP), SI
	MOVQ  y+16(FP), DX
	MOVQ  n+24(FP), CX
	MOVWLZX flip+32(FP), AX
	MOVQ  AX, X14
	VPBROADCASTW X14, Y9
	MOVWLZX nan+34(FP), AX
	MOVQ  AX, X14
	VPBROADCASTW X14, Y11
	BCASTW(0x7fff, Y10)
	XORQ BX, BX
mm16loop:
	CMPQ BX, CX
	JAE  mm16done
	VMOVDQU   (SI)(BX*2), Y0
	VMOVDQU   (DX)(BX*2), Y1
	VPSRAW    $15, Y0, Y2
	VPSRLW    $1, Y2, Y2
	VPXOR     Y0, Y2, Y2
	VPSRAW    $15, Y1, Y3
	VPSRLW    $1, Y3, Y3
	VPXOR     Y1, Y3, Y3
	VPCMPGTW  Y2, Y3, Y4
	VPXOR     Y9, Y4, Y4
	VPAND     Y10, Y0, Y5
	VPCMPGTW  Y11, Y5, Y5
	VPAND     Y10, Y1, Y6
	VPCMPGTW  Y11, Y6, Y6
	VPANDN    Y4, Y6, Y4
	VPOR      Y5, Y4, Y4
	VPBLENDVB Y4, Y1, Y0, Y7
	VPAND     Y5, Y6, Y5
	VPBLENDVB Y5, Y10, Y7, Y7
	VMOVDQU   Y7, (DI)(BX*2)
	ADDQ      $16, BX
	JMP       mm16loop
mm16done:
	VZEROUPPER
	RET

// The streaming kernels below are addF32AVX2, addF16AVX2 and addBF16AVX2
// with non-temporal stores (VMOVNTPS, VMOVNTDQ): the destination goes
// to memory without being read for ownership first, so that a
// reduction of operands larger than the caches moves three words per
// element instead of four. d must be 32-byte aligned. They end with
// SFENCE, which orders the stores before whatever the caller does next
// (a signal to a peer).

// func addF32NT(d, x, y *uint32, n int)
TEXT ·addF32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
addf32ntloop:
	CMPQ BX, CX
	JAE  addf32ntdone
	VMOVUPS   (SI)(BX*4), Y0
	VMOVUPS   32(SI)(BX*4), Y1
	VADDPS    (DX)(BX*4), Y0, Y0
	VADDPS    32(DX)(BX*4), Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VMOVNTPS  Y0, (DI)(BX*4)
	VMOVNTPS  Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       addf32ntloop
addf32ntdone:
	SFENCE
	VZEROUPPER
	RET

// func addF16NT(d, x, y *uint16, n int)
TEXT ·addF16NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
addf16ntloop:
	CMPQ BX, CX
	JAE  addf16ntdone
	VCVTPH2PS (SI)(BX*2), Y0
	VCVTPH2PS 16(SI)(BX*2), Y1
	VCVTPH2PS (DX)(BX*2), Y4
	VCVTPH2PS 16(DX)(BX*2), Y5
	VADDPS    Y4, Y0, Y0
	VADDPS    Y5, Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VMOVNTDQ  Y0, (DI)(BX*2)
	ADDQ      $16, BX
	JMP       addf16ntloop
addf16ntdone:
	SFENCE
	VZEROUPPER
	RET

// func addBF16NT(d, x, y *uint16, n int)
TEXT ·addBF16NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fff0000, Y10)
	BCASTD(1, Y11)
	BCASTD(0x7fff, Y12)
	XORQ BX, BX
addbf16ntloop:
	CMPQ BX, CX
	JAE  addbf16ntdone
	WIDENBF((SI)(BX*2), Y0)
	WIDENBF(16(SI)(BX*2), Y4)
	WIDENBF((DX)(BX*2), Y1)
	WIDENBF(16(DX)(BX*2), Y5)
	VADDPS Y1, Y0, Y0
	VADDPS Y5, Y4, Y4
	ROUNDBF(Y0, Y2, Y3)
	ROUNDBF(Y4, Y6, Y7)
	VPACKUSDW Y4, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVNTDQ  Y0, (DI)(BX*2)
	ADDQ   $16, BX
	JMP    addbf16ntloop
addbf16ntdone:
	SFENCE
	VZEROUPPER
	RET

// The streaming forms of mulF32AVX2, minMaxF32AVX2, mulF16AVX2 and
// minMax16AVX2 (d 32-byte aligned), as the sums' above.

// mulF32NT is mulF32AVX2 with non-temporal stores.
TEXT ·mulF32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
mulf32ntloop:
	CMPQ BX, CX
	JAE  mulf32ntdone
	VMOVUPS   (SI)(BX*4), Y0
	VMOVUPS   32(SI)(BX*4), Y1
	VMULPS    (DX)(BX*4), Y0, Y0
	VMULPS    32(DX)(BX*4), Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VMOVNTPS  Y0, (DI)(BX*4)
	VMOVNTPS  Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mulf32ntloop
mulf32ntdone:
	SFENCE
	VZEROUPPER
	RET

// minMaxF32NT is minMaxF32AVX2 with non-temporal stores.
TEXT ·minMaxF32NT(SB), NOSPLIT, $0-36
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL flip+32(FP), AX
	MOVQ AX, X14
	VPBROADCASTD X14, Y9
	BCASTD(0x7fffffff, Y10)
	BCASTD(0x7f800000, Y11)
	XORQ BX, BX
mmf32ntloop:
	CMPQ BX, CX
	JAE  mmf32ntdone
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y5
	VMOVDQU   (DX)(BX*4), Y1
	VMOVDQU   32(DX)(BX*4), Y6
	MMF32(Y0, Y1, Y2, Y3, Y4)
	MMF32(Y5, Y6, Y7, Y8, Y12)
	VMOVNTDQ  Y0, (DI)(BX*4)
	VMOVNTDQ  Y5, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mmf32ntloop
mmf32ntdone:
	SFENCE
	VZEROUPPER
	RET

// mulF16NT is mulF16AVX2 with non-temporal stores.
TEXT ·mulF16NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fffffff, Y10)
	XORQ BX, BX
mulf16ntloop:
	CMPQ BX, CX
	JAE  mulf16ntdone
	VCVTPH2PS (SI)(BX*2), Y0
	VCVTPH2PS 16(SI)(BX*2), Y1
	VCVTPH2PS (DX)(BX*2), Y4
	VCVTPH2PS 16(DX)(BX*2), Y5
	VMULPS    Y4, Y0, Y0
	VMULPS    Y5, Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VCMPPS    $3, Y1, Y1, Y3
	VBLENDVPS Y2, Y10, Y0, Y0
	VBLENDVPS Y3, Y10, Y1, Y1
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VMOVNTDQ  Y0, (DI)(BX*2)
	ADDQ      $16, BX
	JMP       mulf16ntloop
mulf16ntdone:
	SFENCE
	VZEROUPPER
	RET

// minMax16NT is minMax16AVX2 with non-temporal stores.
TEXT ·minMax16NT(SB), NOSPLIT, $0-36
	MOVQ  d+0(FP), DI
	MOVQ  x+8(FP), SI
	MOVQ  y+16(FP), DX
	MOVQ  n+24(FP), CX
	MOVWLZX flip+32(FP), AX
	MOVQ  AX, X14
	VPBROADCASTW X14, Y9
	MOVWLZX nan+34(FP), AX
	MOVQ  AX, X14
	VPBROADCASTW X14, Y11
	BCASTW(0x7fff, Y10)
	XORQ BX, BX
mm16ntloop:
	CMPQ BX, CX
	JAE  mm16ntdone
	VMOVDQU   (SI)(BX*2), Y0
	VMOVDQU   (DX)(BX*2), Y1
	VPSRAW    $15, Y0, Y2
	VPSRLW    $1, Y2, Y2
	VPXOR     Y0, Y2, Y2
	VPSRAW    $15, Y1, Y3
	VPSRLW    $1, Y3, Y3
	VPXOR     Y1, Y3, Y3
	VPCMPGTW  Y2, Y3, Y4
	VPXOR     Y9, Y4, Y4
	VPAND     Y10, Y0, Y5
	VPCMPGTW  Y11, Y5, Y5
	VPAND     Y10, Y1, Y6
	VPCMPGTW  Y11, Y6, Y6
	VPANDN    Y4, Y6, Y4
	VPOR      Y5, Y4, Y4
	VPBLENDVB Y4, Y1, Y0, Y7
	VPAND     Y5, Y6, Y5
	VPBLENDVB Y5, Y10, Y7, Y7
	VMOVNTDQ  Y7, (DI)(BX*2)
	ADDQ      $16, BX
	JMP       mm16ntloop
mm16ntdone:
	SFENCE
	VZEROUPPER
	RET

// mulBF16NT is mulBF16AVX2 with non-temporal stores (d 32-byte aligned).
TEXT ·mulBF16NT(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	BCASTD(0x7fff0000, Y10)
	BCASTD(1, Y11)
	BCASTD(0x7fff, Y12)
	BCASTD(0x7fffffff, Y13)
	BCASTD(0x00800000, Y9)
	VPXOR Y8, Y8, Y8
	XORQ BX, BX
mulbf16ntloop:
	CMPQ BX, CX
	JAE  mulbf16ntdone
	WIDENBF((SI)(BX*2), Y0)
	WIDENBF(16(SI)(BX*2), Y4)
	WIDENBF((DX)(BX*2), Y1)
	WIDENBF(16(DX)(BX*2), Y5)
	VMULPS   Y1, Y0, Y0
	VMULPS   Y5, Y4, Y4
	TINYBF(Y0, Y2, Y3)
	TINYBF(Y4, Y6, Y7)
	VPOR     Y6, Y2, Y2
	VPTEST   Y2, Y2
	JNZ      mulbf16ntdone
	ROUNDBF(Y0, Y2, Y3)
	ROUNDBF(Y4, Y6, Y7)
	VPACKUSDW Y4, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVNTDQ  Y0, (DI)(BX*2)
	ADDQ     $16, BX
	JMP      mulbf16ntloop
mulbf16ntdone:
	MOVQ BX, ret+32(FP)
	SFENCE
	VZEROUPPER
	RET

// The int32 kernels: two's complement sum and product (the low 32 bits,
// wrapping), signed max and min; 16 elements a step. The NT forms store
// non-temporally (d 32-byte aligned) and end with SFENCE.

// func addI32AVX2(d, x, y *uint32, n int)
TEXT ·addI32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
addi32loop:
	CMPQ BX, CX
	JAE  addi32done
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPADDD     (DX)(BX*4), Y0, Y0
	VPADDD     32(DX)(BX*4), Y1, Y1
	VMOVDQU    Y0, (DI)(BX*4)
	VMOVDQU    Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       addi32loop
addi32done:
	VZEROUPPER
	RET

// func addI32NT(d, x, y *uint32, n int)
TEXT ·addI32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
addi32ntloop:
	CMPQ BX, CX
	JAE  addi32ntdone
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPADDD     (DX)(BX*4), Y0, Y0
	VPADDD     32(DX)(BX*4), Y1, Y1
	VMOVNTDQ   Y0, (DI)(BX*4)
	VMOVNTDQ   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       addi32ntloop
addi32ntdone:
	SFENCE
	VZEROUPPER
	RET

// func mulI32AVX2(d, x, y *uint32, n int)
TEXT ·mulI32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
muli32loop:
	CMPQ BX, CX
	JAE  muli32done
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMULLD    (DX)(BX*4), Y0, Y0
	VPMULLD    32(DX)(BX*4), Y1, Y1
	VMOVDQU    Y0, (DI)(BX*4)
	VMOVDQU    Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       muli32loop
muli32done:
	VZEROUPPER
	RET

// func mulI32NT(d, x, y *uint32, n int)
TEXT ·mulI32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
muli32ntloop:
	CMPQ BX, CX
	JAE  muli32ntdone
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMULLD    (DX)(BX*4), Y0, Y0
	VPMULLD    32(DX)(BX*4), Y1, Y1
	VMOVNTDQ   Y0, (DI)(BX*4)
	VMOVNTDQ   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       muli32ntloop
muli32ntdone:
	SFENCE
	VZEROUPPER
	RET

// func maxI32AVX2(d, x, y *uint32, n int)
TEXT ·maxI32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
maxi32loop:
	CMPQ BX, CX
	JAE  maxi32done
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMAXSD    (DX)(BX*4), Y0, Y0
	VPMAXSD    32(DX)(BX*4), Y1, Y1
	VMOVDQU    Y0, (DI)(BX*4)
	VMOVDQU    Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       maxi32loop
maxi32done:
	VZEROUPPER
	RET

// func maxI32NT(d, x, y *uint32, n int)
TEXT ·maxI32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
maxi32ntloop:
	CMPQ BX, CX
	JAE  maxi32ntdone
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMAXSD    (DX)(BX*4), Y0, Y0
	VPMAXSD    32(DX)(BX*4), Y1, Y1
	VMOVNTDQ   Y0, (DI)(BX*4)
	VMOVNTDQ   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       maxi32ntloop
maxi32ntdone:
	SFENCE
	VZEROUPPER
	RET

// func minI32AVX2(d, x, y *uint32, n int)
TEXT ·minI32AVX2(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
mini32loop:
	CMPQ BX, CX
	JAE  mini32done
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMINSD    (DX)(BX*4), Y0, Y0
	VPMINSD    32(DX)(BX*4), Y1, Y1
	VMOVDQU    Y0, (DI)(BX*4)
	VMOVDQU    Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mini32loop
mini32done:
	VZEROUPPER
	RET

// func minI32NT(d, x, y *uint32, n int)
TEXT ·minI32NT(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ BX, BX
mini32ntloop:
	CMPQ BX, CX
	JAE  mini32ntdone
	VMOVDQU   (SI)(BX*4), Y0
	VMOVDQU   32(SI)(BX*4), Y1
	VPMINSD    (DX)(BX*4), Y0, Y0
	VPMINSD    32(DX)(BX*4), Y1, Y1
	VMOVNTDQ   Y0, (DI)(BX*4)
	VMOVNTDQ   Y1, 32(DI)(BX*4)
	ADDQ      $16, BX
	JMP       mini32ntloop
mini32ntdone:
	SFENCE
	VZEROUPPER
	RET
