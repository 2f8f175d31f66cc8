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
// loops on amd64) against plain Go arithmetic, element by element, for every
// length up to 37 and every misalignment of the rows, over special values:
// equal bits, or NaN for NaN.
func TestElementwiseLoops(t *testing.T) {
	ewCheckLoops[float32](t)
	ewCheckLoops[float64](t)
}

// ewCheckLoops is TestElementwiseLoops for T.
func ewCheckLoops[T float](t *testing.T) {
	same := func(got, want T) bool {
		g, w := float64(got), float64(want)
		return math.Float64bits(g) == math.Float64bits(w) || (math.IsNaN(g) && math.IsNaN(w))
	}
	for _, op := range []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv} {
		for n := 0; n <= 37; n++ {
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
