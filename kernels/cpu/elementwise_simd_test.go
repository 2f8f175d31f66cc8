package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// ewScalarOp is the reference: one element of add, sub, mul or div, as a
// plain Go expression.
func ewScalarOp[T float](op ir.Op, x, y T) T {
	switch op {
	case ir.OpAdd:
		return x + y
	case ir.OpSub:
		return x - y
	case ir.OpMul:
		return x * y
	}
	return x / y
}

// ewSpecial returns n values mixing ordinary numbers with zeros of both
// signs, infinities, NaN, subnormals and values near overflow.
func ewSpecial[T float](seed uint64, n int) []T {
	r := newRand(seed)
	var maxv, tiny float64 = math.MaxFloat64, 5e-324
	if _, ok := any(T(0)).(float32); ok {
		maxv, tiny = math.MaxFloat32, 1e-45
	}
	special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), tiny, -tiny * 7, maxv, -maxv / 3, 1, -1}
	out := make([]T, n)
	for i := range out {
		if r.IntN(3) == 0 {
			out[i] = T(special[r.IntN(len(special))])
		} else {
			out[i] = T((r.Float64()*2 - 1) * math.Pow(2, float64(r.IntN(40)-20)))
		}
	}
	return out
}

// TestElementwiseLoops checks vecVec, vecScalar and scalarVec (the SSE2
// loops on amd64, and the AVX2 loops where the CPU has AVX2) against plain
// Go arithmetic, element by element, for every length up to 75 (the AVX2
// loops' four-vector, one-vector and scalar parts) and every misalignment
// of the rows, over special values: equal bits, or NaN for NaN.
func TestElementwiseLoops(t *testing.T) {
	ewCheckLoops[float32](t)
	ewCheckLoops[float64](t)
	if ewAVX2 {
		ewUseAVX2(false)
		defer ewUseAVX2(true)
		t.Run("SSE2", func(t *testing.T) {
			ewCheckLoops[float32](t)
			ewCheckLoops[float64](t)
		})
	}
}

// ewCheckLoops is TestElementwiseLoops for T.
func ewCheckLoops[T float](t *testing.T) {
	same := func(got, want T) bool {
		g, w := float64(got), float64(want)
		return math.Float64bits(g) == math.Float64bits(w) || (math.IsNaN(g) && math.IsNaN(w))
	}
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv} {
		for n := 0; n <= 75; n++ {
			for off := 0; off < 4; off++ {
				a := ewSpecial[T](uint64(n*8+off), n+off)[off:]
				b := ewSpecial[T](uint64(n*8+off+1000), n+off)[off:]
				s := ewSpecial[T](uint64(n*8+off+2000), 1)[0]
				out := make([]T, n+off)[off:]
				what := fmt.Sprintf("%s %T n=%d off=%d", op, s, n, off)
				vecVec(op, out, a, b)
				for i := range out {
					if want := ewScalarOp(op, a[i], b[i]); !same(out[i], want) {
						t.Fatalf("vecVec %s: [%d] %v op %v = %v, want %v", what, i, a[i], b[i], out[i], want)
					}
				}
				vecScalar(op, out, a, s)
				for i := range out {
					if want := ewScalarOp(op, a[i], s); !same(out[i], want) {
						t.Fatalf("vecScalar %s: [%d] %v op %v = %v, want %v", what, i, a[i], s, out[i], want)
					}
				}
				scalarVec(op, out, s, b)
				for i := range out {
					if want := ewScalarOp(op, s, b[i]); !same(out[i], want) {
						t.Fatalf("scalarVec %s: [%d] %v op %v = %v, want %v", what, i, s, b[i], out[i], want)
					}
				}
			}
		}
	}
}

// TestElementwiseLoopsNaNPayloads checks that the AVX2 loops give the SSE2
// loops' bits exactly, NaN payloads included: operands mixing NaNs of
// different payloads (a result NaN keeps its first operand's), signed
// zeros and infinities, every length up to 75.
func TestElementwiseLoopsNaNPayloads(t *testing.T) {
	if !ewAVX2 {
		t.Skip("no AVX2")
	}
	defer ewUseAVX2(true)
	ewCheckPayloads[float32](t)
	ewCheckPayloads[float64](t)
}

// ewCheckPayloads is TestElementwiseLoopsNaNPayloads for T.
func ewCheckPayloads[T float](t *testing.T) {
	r := newRand(5)
	var vals []T
	switch any(T(0)).(type) {
	case float32:
		for _, b := range []uint32{0x7fc00001, 0xffc00002, 0x7f800003, 0x7fc12345, 0, 0x80000000, 0x7f800000, 0xff800000, 0x3f800000} {
			vals = append(vals, any(math.Float32frombits(b)).(T))
		}
	default:
		for _, b := range []uint64{0x7ff8000000000001, 0xfff8000000000002, 0x7ff0000000000003, 0x7ff8000000012345, 0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x3ff0000000000000} {
			vals = append(vals, any(math.Float64frombits(b)).(T))
		}
	}
	bits := func(v T) uint64 {
		if f, ok := any(v).(float32); ok {
			return uint64(math.Float32bits(f))
		}
		return math.Float64bits(float64(v))
	}
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv} {
		for n := 0; n <= 75; n++ {
			a, b := make([]T, n), make([]T, n)
			for i := range a {
				a[i], b[i] = vals[r.IntN(len(vals))], vals[r.IntN(len(vals))]
			}
			s := vals[r.IntN(len(vals))]
			var got [2][3][]T
			for k, on := range []bool{false, true} {
				ewUseAVX2(on)
				for f := range got[k] {
					got[k][f] = make([]T, n)
				}
				vecVec(op, got[k][0], a, b)
				vecScalar(op, got[k][1], a, s)
				scalarVec(op, got[k][2], s, b)
			}
			for f, name := range []string{"vecVec", "vecScalar", "scalarVec"} {
				for i := range n {
					if g, w := bits(got[1][f][i]), bits(got[0][f][i]); g != w {
						t.Fatalf("%s %s %T n=%d [%d]: AVX2 %#x, SSE2 %#x", name, op, s, n, i, g, w)
					}
				}
			}
		}
	}
}

// TestElementwiseStreamingLoops checks the loops with streaming stores
// against the ordinary ones, bitwise: every length up to 75 and every
// alignment of the output (they store single elements until it is 32-byte
// aligned).
func TestElementwiseStreamingLoops(t *testing.T) {
	if !ewAVX2 {
		t.Skip("no AVX2")
	}
	ewCheckStreaming[float32](t)
	ewCheckStreaming[float64](t)
}

// ewCheckStreaming is TestElementwiseStreamingLoops for T.
func ewCheckStreaming[T float](t *testing.T) {
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv} {
		for n := 0; n <= 75; n++ {
			for off := 0; off < 8; off++ {
				a := ewSpecial[T](uint64(n*8+off), n)
				b := ewSpecial[T](uint64(n*8+off+1000), n)
				s := ewSpecial[T](uint64(n*8+off+2000), 1)[0]
				want, got := make([]T, n), make([]T, n+off)[off:]
				what := fmt.Sprintf("%s %T n=%d off=%d", op, s, n, off)
				check := func(form string) {
					storeFence()
					for i := range want {
						if !ewSameBits(got[i], want[i]) {
							t.Fatalf("%s %s: [%d] = %v, want %v", form, what, i, got[i], want[i])
						}
					}
				}
				vecVec(op, want, a, b)
				ewVecVecFunc[T](op, true)(got, a, b)
				check("vecVec")
				vecScalar(op, want, a, s)
				ewVecScalarFunc[T](op, true)(got, a, s)
				check("vecScalar")
				scalarVec(op, want, s, b)
				ewScalarVecFunc[T](op, true)(got, s, b)
				check("scalarVec")
			}
		}
	}
}

// ewSameBits reports whether x and y have the same bits.
func ewSameBits[T float](x, y T) bool {
	if f, ok := any(x).(float32); ok {
		return math.Float32bits(f) == math.Float32bits(any(y).(float32))
	}
	return math.Float64bits(float64(x)) == math.Float64bits(float64(y))
}
