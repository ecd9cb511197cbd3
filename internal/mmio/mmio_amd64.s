#include "textflag.h"

// Assembly functions are never inlined, so every call is at least a compiler barrier.

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	// x86 keeps stores in program order towards the device: a compiler barrier suffices.
	RET

// func fromDevice()
TEXT ·fromDevice(SB), NOSPLIT|NOFRAME, $0-0
	LFENCE
	RET

// func wcStart()
TEXT ·wcStart(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func flush()
TEXT ·flush(SB), NOSPLIT|NOFRAME, $0-0
	SFENCE
	RET

// func store64(dst, src unsafe.Pointer)
TEXT ·store64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ (SI), AX
	MOVQ AX, (DI)
	RET

// func store32(dst, src unsafe.Pointer)
TEXT ·store32(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVL (SI), AX
	MOVL AX, (DI)
	RET

// func copy64(dst, src unsafe.Pointer)
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ 0(SI), AX
	MOVQ AX, 0(DI)
	MOVQ 8(SI), AX
	MOVQ AX, 8(DI)
	MOVQ 16(SI), AX
	MOVQ AX, 16(DI)
	MOVQ 24(SI), AX
	MOVQ AX, 24(DI)
	MOVQ 32(SI), AX
	MOVQ AX, 32(DI)
	MOVQ 40(SI), AX
	MOVQ AX, 40(DI)
	MOVQ 48(SI), AX
	MOVQ AX, 48(DI)
	MOVQ 56(SI), AX
	MOVQ AX, 56(DI)
	RET
