package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestMatmulValues checks a hand-computed product in f32 and f64.
func TestMatmulValues(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6}                          // [2,3]
	b := []float64{7, 8, 9, 10, 11, 12}                       // [3,2]
	want := []float64{58, 64, 139, 154}                       // [2,2]
	wantVec := []float64{1*7 + 2*9 + 3*11, 1*8 + 2*10 + 3*12} // a[0,:] @ b
	out := mustRun(t, ir.OpMatmul, nil, tensorOf([]int{2, 3}, conv[float32](a)), tensorOf([]int{3, 2}, conv[float32](b)))
	checkEqual(t, "f32", kernels.View[float32](out), conv[float32](want))
	out = mustRun(t, ir.OpMatmul, nil, tensorOf([]int{2, 3}, a), tensorOf([]int{3, 2}, b))
	checkEqual(t, "f64", kernels.View[float64](out), want)
	out = mustRun(t, ir.OpMatmul, nil, tensorOf([]int{3}, a[:3]), tensorOf([]int{3, 2}, b))
	if !out.Type.Shape.Equal(ir.Shape{2}) {
		t.Fatalf("[3]@[3,2] has shape %s, want [2]", out.Type.Shape)
	}
	checkEqual(t, "f64 vector", kernels.View[float64](out), wantVec)
}

// matmulRef is a naive triple loop in float64 over the NumPy definition. It
// also returns, per element, the sum of |a·b| over the inner dimension, the
// scale of the rounding error of any summation order.
func matmulRef(as, bs ir.Shape, a, b []float64) (out, scale []float64, shape ir.Shape) {
	a2, b2 := as, bs
	if len(as) == 1 {
		a2 = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		b2 = ir.Shape{bs[0], 1}
	}
	m, k, n := a2[len(a2)-2], a2[len(a2)-1], b2[len(b2)-1]
	batch, _ := ir.BroadcastShapes(a2[:len(a2)-2], b2[:len(b2)-2])
	nb := batch.NumElements()
	out = make([]float64, nb*m*n)
	scale = make([]float64, nb*m*n)
	for bi := range nb {
		idx := unravel(batch, bi)
		ao := bcastIndex(a2[:len(a2)-2], idx) * m * k
		bo := bcastIndex(b2[:len(b2)-2], idx) * k * n
		for i := range m {
			for j := range n {
				s, abs := 0.0, 0.0
				for p := range k {
					v := a[ao+i*k+p] * b[bo+p*n+j]
					s += v
					abs += math.Abs(v)
				}
				out[(bi*m+i)*n+j] = s
				scale[(bi*m+i)*n+j] = abs
			}
		}
	}
	shape, _ = ir.MatmulShape(as, bs)
	return out, scale, shape
}

// TestMatmul compares matmul with the naive loop on random shapes: with
// integer inputs every summation order is exact, so results must be equal;
// with real inputs the error of any order is at most about k·u·Σ|a·b|, so
// the bound is max(rel, (k+1)·u)·Σ|a·b| with u the unit roundoff.
func TestMatmul(t *testing.T) {
	shapes := [][2][]int{
		{{2, 3}, {3, 4}},
		{{1, 1}, {1, 1}},
		{{5, 7}, {7, 3}},
		{{3}, {3, 4}},             // 1-D @ 2-D
		{{4, 3}, {3}},             // 2-D @ 1-D
		{{6}, {6}},                // 1-D @ 1-D
		{{2, 1, 3, 4}, {5, 4, 6}}, // broadcast batch dims -> [2,5,3,6]
		{{3, 4}, {2, 4, 5}},       // batch only in b
		{{2, 3, 4}, {4}},          // batched @ 1-D
		{{5}, {2, 5, 3}},          // 1-D @ batched
		{{3, 1, 2, 3}, {1, 4, 3, 2}},
		{{67, 65}, {65, 70}},   // odd sizes across gonum's 64 blocks
		{{130, 33}, {33, 129}}, // large enough for gonum's parallel path
	}
	testMatmul[float32](t, shapes)
	testMatmul[float64](t, shapes)
}

func testMatmul[T float](t *testing.T, shapes [][2][]int) {
	dt := kernels.DTypeOf[T]()
	r := newRand(3)
	u := math.Pow(2, -53)
	if dt == ir.F32 {
		u = math.Pow(2, -24)
	}
	for _, sh := range shapes {
		as, bs := ir.Shape(sh[0]), ir.Shape(sh[1])
		for _, ints := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%v@%v/ints=%v", dt, as, bs, ints), func(t *testing.T) {
				a := randVals[T](r, as.NumElements(), ints)
				b := randVals[T](r, bs.NumElements(), ints)
				want, scale, shape := matmulRef(as, bs, f64s(a), f64s(b))
				out := mustRun(t, ir.OpMatmul, nil, tensorOf(as, a), tensorOf(bs, b))
				if !out.Type.Shape.Equal(shape) {
					t.Fatalf("shape %s, want %s", out.Type.Shape, shape)
				}
				got := kernels.View[T](out)
				if ints {
					checkEqual(t, "integer inputs", got, conv[T](want))
					return
				}
				k := as[len(as)-1]
				bound := max(rel[T](), float64(k+1)*u)
				for i, g := range got {
					if math.Abs(float64(g)-want[i]) > bound*scale[i] {
						t.Fatalf("element %d = %v, want %v (bound %g)", i, g, want[i], bound*scale[i])
					}
				}
			})
		}
	}
}

// TestGonumGemmKeepsNaN checks the gemms of builds without the
// micro-kernels (gonum's BLAS, which skips the products of a zero element):
// a NaN or ±Inf of one operand against a zero of the other still gives NaN,
// as IEEE and PyTorch do, in matmul's and the convolutions' gemm, plain and
// transposed; and on finite operands gemmPlain agrees with gonum.
func TestGonumGemmKeepsNaN(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	// a [2,2] has zeros where b [2,3] has NaN and +Inf in the matching row.
	a64 := []float64{0, 1, 2, 0}
	b64 := []float64{nan, 1, inf, 2, 3, 4}
	a, b := conv[float32](a64), conv[float32](b64)
	want := []string{"NaN", "3", "NaN", "NaN", "2", "+Inf"}
	check := func(what string, c []float32) {
		t.Helper()
		for i, w := range want {
			if got := fmt.Sprint(float64(c[i])); got != w && !(w == "NaN" && math.IsNaN(float64(c[i]))) {
				t.Errorf("%s: c[%d] = %v, want %s", what, i, c[i], w)
			}
		}
	}
	c := make([]float32, 6)
	sgemm(2, 3, 2, a, 2, b, 3, c, 3)
	check("sgemm", c)
	c64 := make([]float64, 6)
	dgemm(2, 3, 2, a64, 2, b64, 3, c64, 3)
	check("dgemm", conv32(c64))
	at := []float32{0, 2, 1, 0}                          // aᵀ
	bt := conv[float32]([]float64{nan, 2, 1, 3, inf, 4}) // bᵀ
	clear(c)
	convSgemm(true, true, 2, 3, 2, at, 2, bt, 2, 0, c, 3)
	check("convSgemm transposed", c)
	clear(c64)
	convDgemm(false, false, 2, 3, 2, a64, 2, b64, 3, 0, c64, 3)
	check("convDgemm", conv32(c64))

	r := rand.New(rand.NewPCG(1, 2))
	fa, fb := make([]float64, 5*7), make([]float64, 7*4)
	for i := range fa {
		fa[i] = r.NormFloat64()
	}
	for i := range fb {
		fb[i] = r.NormFloat64()
	}
	got, ref := make([]float64, 5*4), make([]float64, 5*4)
	for i := range got {
		got[i], ref[i] = r.NormFloat64(), 0
	}
	copy(ref, got)
	gemmPlain(false, false, 5, 4, 7, fa, 7, fb, 4, 0.5, got, 4)
	blas64.Implementation().Dgemm(blas.NoTrans, blas.NoTrans, 5, 4, 7, 1, fa, 7, fb, 4, 0.5, ref, 4)
	checkNear(t, "gemmPlain", got, ref, 1e-12, 1e-12)
}

func conv32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
