#include "textflag.h"

// DSB option nibbles: ST = 14 (0xe), LD = 13 (0xd).

// func toDevice()
TEXT ·toDevice(SB), NOSPLIT|NOFRAME, $0-0
	DSB $14 // dsb st
	RET

// func fromDevice()
TEXT ·fromDevice(SB), NOSPLIT|NOFRAME, $0-0
	DSB $13 // dsb ld
	RET

// func wcStart()
TEXT ·wcStart(SB), NOSPLIT|NOFRAME, $0-0
	DSB $14 // dsb st
	RET

// func flush()
TEXT ·flush(SB), NOSPLIT|NOFRAME, $0-0
	DSB $14 // dsb st
	RET

// func store64(dst, src unsafe.Pointer)
TEXT ·store64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD (R1), R2
	MOVD R2, (R0)
	RET

// func store32(dst, src unsafe.Pointer)
TEXT ·store32(SB), NOSPLIT|NOFRAME, $0-16
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVWU (R1), R2
	MOVW R2, (R0)
	RET

// func copy64(dst, src unsafe.Pointer)
// One 64-byte burst: ld4/st4 de- and re-interleave, so together they copy straight.
TEXT ·copy64(SB), NOSPLIT|NOFRAME, $0-16
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	VLD4 (R1), [V0.D2, V1.D2, V2.D2, V3.D2]
	VST4 [V0.D2, V1.D2, V2.D2, V3.D2], (R0)
	RET
