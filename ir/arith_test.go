package ir

import (
	"math"
	"testing"
)

func TestArith(t *testing.T) {
	// f32 arithmetic rounds to f32 at each op: 1 + 2^-30 is 1 in f32.
	if r, ok := Arith(OpAdd, float32(1), float32(math.Ldexp(1, -30))); !ok || r != 1 {
		t.Errorf("f32 1 + 2^-30 = %v, %v; want 1, true", r, ok)
	}
	if r, ok := Arith(OpAdd, 1.0, math.Ldexp(1, -30)); !ok || r == 1 {
		t.Errorf("f64 1 + 2^-30 = %v, %v; want more than 1", r, ok)
	}
	if r, ok := Arith(OpMul, int32(math.MaxInt32), int32(2)); !ok || r != -2 {
		t.Errorf("i32 MaxInt32*2 = %v, %v; want -2 (wrapping), true", r, ok)
	}
	if r, ok := Arith(OpDiv, 7.0, 2.0); !ok || r != 3.5 {
		t.Errorf("f64 7/2 = %v, %v; want 3.5, true", r, ok)
	}
	if _, ok := Arith(OpDiv, int64(7), int64(2)); ok {
		t.Error("integer division was folded; its rounding is the caller's")
	}
	if _, ok := Arith(OpSqrt, int64(4), 0); ok {
		t.Error("integer sqrt was folded")
	}
	if _, ok := Arith(OpGreater, 1.0, 0.0); ok {
		t.Error("greater was folded as arithmetic")
	}
	if r, ok := Arith(OpSqrt, float32(2), 0); !ok || r != float32(math.Sqrt(2)) {
		t.Errorf("f32 sqrt 2 = %v, %v", r, ok)
	}
}
