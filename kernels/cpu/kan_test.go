package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// kanGridAttrs returns bspline attributes.
func kanGridAttrs(lo, hi float64, size, order, deriv int) ir.Attrs {
	return ir.MakeAttrs("grid_min", ir.Float(lo), "grid_max", ir.Float(hi), "grid_size", ir.Int(size), "order", ir.Int(order), "derivative", ir.Int(deriv))
}

// kanRefKnots returns the knots grid_min + (j - order)·h, j = 0 .. size+2·order.
func kanRefKnots(lo, hi float64, size, order int) []float64 {
	h := (hi - lo) / float64(size)
	t := make([]float64, size+2*order+1)
	for j := range t {
		t[j] = lo + float64(j-order)*h
	}
	return t
}

// kanRefKnots32 returns the knots of an f32 bspline: efficient-kan's float32
// grid buffer, torch.arange(-order, size+order+1) * h + grid_min, each
// operation rounded to float32.
func kanRefKnots32(lo, hi float64, size, order int) []float64 {
	h := float32((hi - lo) / float64(size))
	t := make([]float64, size+2*order+1)
	for j := range t {
		t[j] = float64(float32(float32(j-order)*h) + float32(lo))
	}
	return t
}

// kanRefBasis is the textbook Cox–de Boor recursion on the knot vector t, in
// float64, written independently of the kernel's in-place sweep: B_{j,0} is
// the indicator of [t_j, t_{j+1}), and B_{j,k} blends B_{j,k-1} and
// B_{j+1,k-1}. With d > 0 it is the d-th derivative in x by the textbook
// formula d/dx B_{j,k} = k/(t_{j+k}-t_j)·B_{j,k-1} - k/(t_{j+k+1}-t_{j+1})·B_{j+1,k-1}.
func kanRefBasis(t []float64, j, k, d int, x float64) float64 {
	switch {
	case d > 0:
		fk := float64(k)
		return fk*kanRefBasis(t, j, k-1, d-1, x)/(t[j+k]-t[j]) - fk*kanRefBasis(t, j+1, k-1, d-1, x)/(t[j+k+1]-t[j+1])
	case k == 0:
		if t[j] <= x && x < t[j+1] {
			return 1
		}
		return 0
	}
	return (x-t[j])/(t[j+k]-t[j])*kanRefBasis(t, j, k-1, 0, x) +
		(t[j+k+1]-x)/(t[j+k+1]-t[j+1])*kanRefBasis(t, j+1, k-1, 0, x)
}

// kanRefBases returns the d-th derivatives of the bases of degree order of
// every x, row-major [len(xs), len(t)-1-order].
func kanRefBases(t []float64, order, d int, xs []float64) []float64 {
	nb := len(t) - 1 - order
	out := make([]float64, 0, len(xs)*nb)
	for _, x := range xs {
		for j := range nb {
			out = append(out, kanRefBasis(t, j, order, d, x))
		}
	}
	return out
}

// TestBsplineHandValues checks hand-computed bases and derivatives on
// efficient-kan's default grid (grid_range [-1,1], grid_size 5, so h = 0.4).
// For uniform knots the bases on the interval [t_i, t_i+1) at
// u = (x - t_i)/h are the cardinal B-splines: degree 1: 1-u, u; degree 2:
// (1-u)²/2, (-2u²+2u+1)/2, u²/2; degree 3: (1-u)³/6, (3u³-6u²+4)/6,
// (-3u³+3u²+3u+1)/6, u³/6 for B_{i-3} .. B_i, whose derivatives in x are
// their derivatives in u over h.
func TestBsplineHandValues(t *testing.T) {
	const (
		s6 = 1.0 / 6
		a  = 1.0 / 48 // (1/2)³/6
		c  = 23.0 / 48
	)
	nan := math.NaN()
	tests := []struct {
		name         string
		order, deriv int
		xs           []float64
		want         []float64
	}{
		// Degree 1 (knots -1.4 .. 1.4): hats peaking at the knots.
		{"linear", 1, 0, []float64{0, -1, 1.5}, []float64{
			0, 0, 0.5, 0.5, 0, 0,
			1, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, // right of the last knot
		}},
		// Degree 2 at the middle of [-0.2, 0.2): u = 1/2.
		{"quadratic", 2, 0, []float64{0}, []float64{0, 0, 0.125, 0.75, 0.125, 0, 0}},
		// Degree 3 (efficient-kan's default): knots -2.2 .. 2.2.
		{"cubic", 3, 0, []float64{0, -1, 1, -2.2, 2.2, 5, -7}, []float64{
			0, 0, a, c, c, a, 0, 0, // middle of [-0.2, 0.2)
			s6, 4 * s6, s6, 0, 0, 0, 0, 0, // grid_min = t_3, u = 0
			0, 0, 0, 0, 0, s6, 4 * s6, s6, // grid_max = t_8, u = 0
			0, 0, 0, 0, 0, 0, 0, 0, // t_0: B_0 = u³/6 = 0
			0, 0, 0, 0, 0, 0, 0, 0, // t_11, the last knot: outside
			0, 0, 0, 0, 0, 0, 0, 0, // far right
			0, 0, 0, 0, 0, 0, 0, 0, // far left
		}},
		// First derivatives: -(1-u)²/2, (9u²-12u)/6, (-9u²+6u+3)/6, u²/2
		// over h; at a knot (u = 0) the right derivative.
		{"cubic slope", 3, 1, []float64{0, -1, 7}, []float64{
			0, 0, -0.125 / 0.4, -0.625 / 0.4, 0.625 / 0.4, 0.125 / 0.4, 0, 0,
			-0.5 / 0.4, 0, 0.5 / 0.4, 0, 0, 0, 0, 0,
			0, 0, 0, 0, 0, 0, 0, 0,
		}},
		// Second derivatives: (1-u), (18u-12)/6, (-18u+6)/6, u over h².
		{"cubic curvature", 3, 2, []float64{0}, []float64{0, 0, 0.5 / 0.16, -0.5 / 0.16, -0.5 / 0.16, 0.5 / 0.16, 0, 0}},
		// Third derivatives: -1, 3, -3, 1 over h³.
		{"cubic third", 3, 3, []float64{0}, []float64{0, 0, -1 / 0.064, 3 / 0.064, -3 / 0.064, 1 / 0.064, 0, 0}},
		// Non-finite x: efficient-kan's left·B + right·B is inf·0 = NaN
		// there (and NaN·0 = NaN); kiln computes the same, and has no
		// derivatives there.
		{"non-finite", 3, 0, []float64{nan, math.Inf(1), math.Inf(-1)}, []float64{
			nan, nan, nan, nan, nan, nan, nan, nan,
			nan, nan, nan, nan, nan, nan, nan, nan,
			nan, nan, nan, nan, nan, nan, nan, nan,
		}},
		{"non-finite slope", 1, 1, []float64{nan, math.Inf(-1)}, []float64{
			nan, nan, nan, nan, nan, nan,
			nan, nan, nan, nan, nan, nan,
		}},
		// Degree 0 has no arithmetic, only the indicators: zeros.
		{"non-finite indicators", 0, 0, []float64{nan, math.Inf(1)}, []float64{
			0, 0, 0, 0, 0,
			0, 0, 0, 0, 0,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs := ir.MakeAttrs("order", ir.Int(tc.order), "derivative", ir.Int(tc.deriv))
			shape := []int{len(tc.xs)}
			o32 := mustRun(t, ir.OpBspline, attrs, tensorOf(shape, conv[float32](tc.xs)))
			checkNear(t, "f32", kernels.View[float32](o32), tc.want, 2e-6, 1e-7)
			o64 := mustRun(t, ir.OpBspline, attrs, tensorOf(shape, tc.xs))
			checkNear(t, "f64", kernels.View[float64](o64), tc.want, 1e-13, 1e-15)
		})
	}
}

// kanGrids are the grids the reference tests sweep.
var kanGrids = []struct {
	lo, hi float64
	size   int
}{
	{-1, 1, 5}, // efficient-kan's default
	{0, 3, 3},
	{-2, 0.5, 7},
	{-0.5, 0.5, 1},
	{10, 10.25, 4},
}

// kanSweep returns points from a little left of t_0 to a little right of
// t_last with a step that is no simple fraction of h, plus every knot, the
// ends of the base grid and points just inside and outside the ends of the
// extended grid.
func kanSweep(t []float64, lo, hi float64) []float64 {
	first, last := t[0], t[len(t)-1]
	h := t[1] - t[0]
	var xs []float64
	const steps = 173
	for i := range steps + 1 {
		xs = append(xs, first-0.7*h+(last-first+1.4*h)*float64(i)/steps)
	}
	xs = append(xs, t...)
	return append(xs, lo, hi, first+1e-7*h, last-1e-7*h, first-1e-7*h, last+1e-7*h)
}

// kanDerivScale is the size of d-th derivatives of bases on a grid of
// spacing h, about (2/h)^d: tolerances scale with it.
func kanDerivScale(h float64, d int) float64 { return math.Pow(2/h, float64(d)) }

// TestBsplineReference compares bspline with the recursive float64
// reference for degrees 0 to 6, and every derivative, on several grids, at
// points all over and around the extended grid. f64 must agree to 1e-12
// (abs; the bases are in [0,1]) times the derivatives' scale (2/h)^d. The
// f32 reference is evaluated at the f32 inputs on the f32 knots the kernel
// uses (as efficient-kan's float32 grid buffer) and must agree to 1e-5 times
// that scale: the f32 rounding of a few divisions and products per degree.
func TestBsplineReference(t *testing.T) {
	for _, g := range kanGrids {
		h := (g.hi - g.lo) / float64(g.size)
		for order := 0; order <= 6; order++ {
			for d := 0; d <= order; d++ {
				t.Run(fmt.Sprintf("[%g,%g]x%d/order=%d/derivative=%d", g.lo, g.hi, g.size, order, d), func(t *testing.T) {
					knots := kanRefKnots(g.lo, g.hi, g.size, order)
					attrs := kanGridAttrs(g.lo, g.hi, g.size, order, d)
					xs := kanSweep(knots, g.lo, g.hi)
					want := kanRefBases(knots, order, d, xs)
					o64 := mustRun(t, ir.OpBspline, attrs, tensorOf([]int{len(xs)}, xs))
					checkNear(t, "f64", kernels.View[float64](o64), want, 0, 1e-12*kanDerivScale(h, d))

					x32 := conv[float32](xs)
					want32 := kanRefBases(kanRefKnots32(g.lo, g.hi, g.size, order), order, d, f64s(x32))
					o32 := mustRun(t, ir.OpBspline, attrs, tensorOf([]int{len(xs)}, x32))
					checkNear(t, "f32", kernels.View[float32](o32), want32, 0, 1e-5*kanDerivScale(h, d))
				})
			}
		}
	}
}

// TestBsplineDerivativesAreDerivatives checks derivative 1 and 2 against
// central differences of the f64 bases, away from knots (within h/8 of
// none, where the bases are polynomials): (B(x+δ) - B(x-δ))/2δ with
// δ = 1e-6 (truncation ~δ²·B”' ≈ 1e-12/h³, rounding ~1e-16/δ) and
// (B(x+δ) - 2B(x) + B(x-δ))/δ² with δ = 1e-4 (truncation ~δ²·B”” /12,
// rounding ~4e-16/δ² = 4e-8). Bounds: 1e-8 and 1e-6 times the scale
// (2/h)^d.
func TestBsplineDerivativesAreDerivatives(t *testing.T) {
	for _, g := range kanGrids {
		h := (g.hi - g.lo) / float64(g.size)
		for order := 1; order <= 6; order++ {
			knots := kanRefKnots(g.lo, g.hi, g.size, order)
			var xs []float64
			for _, x := range kanSweep(knots, g.lo, g.hi) {
				if kanFarFromKnots(x, knots, h/8) {
					xs = append(xs, x)
				}
			}
			bases := func(d int, shift float64) []float64 {
				sx := make([]float64, len(xs))
				for i, x := range xs {
					sx[i] = x + shift
				}
				return kernels.View[float64](mustRun(t, ir.OpBspline, kanGridAttrs(g.lo, g.hi, g.size, order, d), tensorOf([]int{len(sx)}, sx)))
			}
			const d1, d2 = 1e-6, 1e-4
			p, m := bases(0, d1), bases(0, -d1)
			num1 := make([]float64, len(p))
			for i := range p {
				num1[i] = (p[i] - m[i]) / (2 * d1)
			}
			name := fmt.Sprintf("[%g,%g]x%d/order=%d", g.lo, g.hi, g.size, order)
			checkNear(t, name+" derivative 1", bases(1, 0), num1, 0, 1e-8*kanDerivScale(h, 1))
			if order >= 2 {
				p, z, m := bases(0, d2), bases(0, 0), bases(0, -d2)
				num2 := make([]float64, len(p))
				for i := range p {
					num2[i] = (p[i] - 2*z[i] + m[i]) / (d2 * d2)
				}
				checkNear(t, name+" derivative 2", bases(2, 0), num2, 0, 1e-6*kanDerivScale(h, 2))
			}
		}
	}
}

func kanFarFromKnots(x float64, knots []float64, d float64) bool {
	for _, k := range knots {
		if math.Abs(x-k) <= d {
			return false
		}
	}
	return true
}

// TestBsplineWindowMatchesFullSweep checks that the kernel's shortcut (only
// the bases that can be nonzero, inside the grid) gives exactly the values
// of efficient-kan's full sweep over every basis followed by the derivative
// formula over every entry, at every knot, next to every knot (one ulp
// either side), at random points in and around the grid, and at non-finite
// and huge x; zeros compare equal whatever their sign.
func TestBsplineWindowMatchesFullSweep(t *testing.T) {
	kanWindowVsFull[float32](t)
	kanWindowVsFull[float64](t)
}

// kanHuge overflows (x - t)/h in f64 and is +inf in f32.
var kanHuge = 1e308

func kanWindowVsFull[T float](t *testing.T) {
	r := newRand(11)
	for _, g := range kanGrids {
		for order := 0; order <= 6; order++ {
			for d := 0; d <= order; d++ {
				gr, err := ir.BsplineGridOf(kanGridAttrs(g.lo, g.hi, g.size, order, d))
				if err != nil {
					t.Fatal(err)
				}
				knots := kanKnots[T](gr)
				n := gr.Intervals()
				var xs []T
				for _, k := range knots {
					xs = append(xs, k, T(math.Nextafter(float64(k), math.Inf(1))), T(math.Nextafter(float64(k), math.Inf(-1))))
					if _, ok := any(k).(float32); ok {
						xs = append(xs, T(math.Nextafter32(float32(k), float32(math.Inf(1)))), T(math.Nextafter32(float32(k), float32(math.Inf(-1)))))
					}
				}
				span := float64(knots[n] - knots[0])
				for range 200 {
					xs = append(xs, T(float64(knots[0])-0.1*span+1.2*span*r.Float64()))
				}
				xs = append(xs, T(math.NaN()), T(math.Inf(1)), T(math.Inf(-1)), T(3e38), T(-3e38), T(kanHuge), T(-kanHuge))
				full, win := make([]T, n), make([]T, n)
				for _, x := range xs {
					kanBsplineFull(full, knots, x, order-d)
					for p := order - d + 1; p <= order; p++ {
						for j := range n - p {
							full[j] = T(p) * (full[j]/(knots[j+p]-knots[j]) - full[j+1]/(knots[j+p+1]-knots[j+1]))
						}
					}
					if v := float64(x); d > 0 && (math.IsNaN(v) || math.IsInf(v, 0)) {
						for j := range full {
							full[j] = T(math.NaN())
						}
					}
					kanBsplineDeriv(win, knots, x, order, d, gr.H)
					for j := range n - order {
						if full[j] != win[j] && (full[j] == full[j] || win[j] == win[j]) {
							t.Fatalf("%s grid %+v x=%v: entry %d = %v by the window, %v by the full sweep", kernels.DTypeOf[T](), gr, x, j, win[j], full[j])
						}
					}
				}
			}
		}
	}
}

// TestBsplineLeftClosed checks that degree-0 bases are the indicators of
// left-closed intervals: x = t_j lies in [t_j, t_j+1) only, and the last
// knot in none.
func TestBsplineLeftClosed(t *testing.T) {
	knots := kanRefKnots(-1, 1, 5, 0)
	attrs := kanGridAttrs(-1, 1, 5, 0, 0)
	out := kernels.View[float64](mustRun(t, ir.OpBspline, attrs, tensorOf([]int{len(knots)}, knots)))
	nb := len(knots) - 1
	for i := range knots {
		for j := range nb {
			want := 0.0
			if i == j {
				want = 1
			}
			if got := out[i*nb+j]; got != want {
				t.Errorf("x = t_%d: B_%d = %v, want %v", i, j, got, want)
			}
		}
	}
}

// TestBsplinePartitionOfUnity checks that the bases sum to 1 on the base
// grid [grid_min, grid_max), for every degree, and to 0 outside the
// extended grid; and that their derivatives sum to 0 everywhere.
func TestBsplinePartitionOfUnity(t *testing.T) {
	for _, g := range kanGrids {
		h := (g.hi - g.lo) / float64(g.size)
		for order := 0; order <= 6; order++ {
			for d := 0; d <= order; d++ {
				t.Run(fmt.Sprintf("[%g,%g]x%d/order=%d/derivative=%d", g.lo, g.hi, g.size, order, d), func(t *testing.T) {
					const n = 257
					xs := make([]float64, 0, n+4)
					for i := range n {
						xs = append(xs, g.lo+(g.hi-g.lo)*float64(i)/n)
					}
					out := []float64{g.lo - float64(order)*h - 0.5*h, g.hi + float64(order)*h + 0.5*h, g.lo - 1e3, g.hi + 1e3}
					attrs := kanGridAttrs(g.lo, g.hi, g.size, order, d)
					inside := 1.0
					if d > 0 {
						inside = 0
					}
					kanCheckSums[float32](t, attrs, xs, out, inside, 2e-6*kanDerivScale(h, d))
					kanCheckSums[float64](t, attrs, xs, out, inside, 1e-13*kanDerivScale(h, d))
				})
			}
		}
	}
}

func kanCheckSums[T float](t *testing.T, attrs ir.Attrs, inside, outside []float64, sumInside, tol float64) {
	t.Helper()
	xs := append(append([]float64(nil), inside...), outside...)
	res := mustRun(t, ir.OpBspline, attrs, tensorOf([]int{len(xs)}, conv[T](xs)))
	nb := res.Type.Shape[1]
	o := kernels.View[T](res)
	for i, x := range xs {
		var s float64
		for _, v := range o[i*nb : (i+1)*nb] {
			s += float64(v)
		}
		want := sumInside
		if i >= len(inside) {
			want = 0
		}
		if math.Abs(s-want) > tol {
			t.Errorf("%s: bases at x = %v sum to %v, want %v", kernels.DTypeOf[T](), x, s, want)
		}
	}
}

// TestBsplineShapes checks the result layout [..., bases] for a rank-2 x, a
// scalar x and zero-size x.
func TestBsplineShapes(t *testing.T) {
	xs := []float64{-0.9, 0.1, 0.35, 0.77, -0.5, 1.3}
	knots := kanRefKnots(-1, 1, 5, 3)
	out := mustRun(t, ir.OpBspline, nil, tensorOf([]int{2, 3}, xs))
	if got := out.Type.Shape; !got.Equal(ir.Shape{2, 3, 8}) {
		t.Fatalf("shape %v, want [2,3,8]", got)
	}
	checkNear(t, "[2,3]", kernels.View[float64](out), kanRefBases(knots, 3, 0, xs), 0, 1e-12)
	out = mustRun(t, ir.OpBspline, ir.MakeAttrs("derivative", ir.Int(2)), tensorOf([]int{3, 2}, xs))
	checkNear(t, "[3,2] derivative 2", kernels.View[float64](out), kanRefBases(knots, 3, 2, xs), 0, 1e-10)

	out = mustRun(t, ir.OpBspline, kanGridAttrs(-1, 1, 5, 2, 0), tensorOf([]int{}, []float32{0}))
	if got := out.Type.Shape; !got.Equal(ir.Shape{7}) {
		t.Fatalf("scalar: shape %v, want [7]", got)
	}
	checkNear(t, "scalar", kernels.View[float32](out), []float64{0, 0, 0.125, 0.75, 0.125, 0, 0}, 1e-6, 0)

	for _, s := range [][]int{{0}, {0, 3}, {3, 0}} {
		out := mustRun(t, ir.OpBspline, nil, tensorOf[float32](s, nil))
		if want := append(ir.Shape(s).Clone(), 8); !out.Type.Shape.Equal(want) {
			t.Errorf("%v: shape %v, want %v", s, out.Type.Shape, want)
		}
		mustRun(t, ir.OpBspline, ir.MakeAttrs("derivative", ir.Int(1)), tensorOf[float64](s, nil))
	}
}

// kanGateRef returns difflogic's op_i(a, b), written out as in its bin_op.
func kanGateRef(i int, a, b float64) float64 {
	switch i {
	case 0:
		return 0
	case 1:
		return a * b
	case 2:
		return a - a*b
	case 3:
		return a
	case 4:
		return b - a*b
	case 5:
		return b
	case 6:
		return a + b - 2*a*b
	case 7:
		return a + b - a*b
	case 8:
		return 1 - (a + b - a*b)
	case 9:
		return 1 - (a + b - 2*a*b)
	case 10:
		return 1 - b
	case 11:
		return 1 - b + a*b
	case 12:
		return 1 - a
	case 13:
		return 1 - a + a*b
	case 14:
		return 1 - a*b
	}
	return 1
}

// kanTruth is the Boolean function of each gate.
var kanTruth = [16]func(a, b bool) bool{
	func(a, b bool) bool { return false },
	func(a, b bool) bool { return a && b },
	func(a, b bool) bool { return a && !b },
	func(a, b bool) bool { return a },
	func(a, b bool) bool { return !a && b },
	func(a, b bool) bool { return b },
	func(a, b bool) bool { return a != b },
	func(a, b bool) bool { return a || b },
	func(a, b bool) bool { return !(a || b) },
	func(a, b bool) bool { return a == b },
	func(a, b bool) bool { return !b },
	func(a, b bool) bool { return !b || a },
	func(a, b bool) bool { return !a },
	func(a, b bool) bool { return !a || b },
	func(a, b bool) bool { return !(a && b) },
	func(a, b bool) bool { return true },
}

// TestLogicGateTruthTables gives gate g the logits 50 at entry g and 0
// elsewhere, so softmax puts all but 15·e^-50 of the weight on op_g, and
// checks every gate on the four Boolean inputs.
func TestLogicGateTruthTables(t *testing.T) {
	logits := make([]float64, 16*16)
	for g := range 16 {
		logits[g*16+g] = 50
	}
	var a, b, want []float64
	for _, in := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		for g := range 16 {
			a = append(a, kanB2F(in[0]))
			b = append(b, kanB2F(in[1]))
			want = append(want, kanB2F(kanTruth[g](in[0], in[1])))
		}
	}
	shape := []int{4, 16}
	o32 := mustRun(t, ir.OpLogicGate, nil, tensorOf(shape, conv[float32](a)), tensorOf(shape, conv[float32](b)), tensorOf([]int{16, 16}, conv[float32](logits)))
	checkNear(t, "f32", kernels.View[float32](o32), want, 0, 1e-6)
	o64 := mustRun(t, ir.OpLogicGate, nil, tensorOf(shape, a), tensorOf(shape, b), tensorOf([]int{16, 16}, logits))
	checkNear(t, "f64", kernels.View[float64](o64), want, 0, 1e-15)
}

func kanB2F(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// TestLogicGateHandValues checks hand-computed mixtures, with b broadcast
// along the batch: gate 0 has uniform logits, where every gate's
// complement cancels it (A = 8/16, B = C = D = 0), so out = 1/2; gate 1 puts
// half the weight on and and half on or (the other logits -1e4 give exp = 0
// exactly): out = (ab + a+b-ab)/2 = (a+b)/2; gate 2 is xor alone:
// a + b - 2ab.
func TestLogicGateHandValues(t *testing.T) {
	logits := make([]float64, 3*16)
	for i := range 16 {
		logits[16+i] = -1e4
		logits[32+i] = -1e4
	}
	logits[16+1], logits[16+7], logits[32+6] = 0, 0, 0
	a := []float64{0.3, 0.3, 0.3, 1, 0.2, 0.5}
	b := []float64{0.9, 0.6, 0.6}
	want := []float64{
		0.5, 0.45, 0.3 + 0.6 - 0.36,
		0.5, 0.4, 0.5 + 0.6 - 0.6,
	}
	o32 := mustRun(t, ir.OpLogicGate, nil, tensorOf([]int{2, 3}, conv[float32](a)), tensorOf([]int{3}, conv[float32](b)), tensorOf([]int{3, 16}, conv[float32](logits)))
	checkNear(t, "f32", kernels.View[float32](o32), want, 1e-6, 1e-7)
	o64 := mustRun(t, ir.OpLogicGate, nil, tensorOf([]int{2, 3}, a), tensorOf([]int{3}, b), tensorOf([]int{3, 16}, logits))
	checkNear(t, "f64", kernels.View[float64](o64), want, 1e-14, 1e-15)
}

// TestLogicGateReference compares logic_gate with Σ_i softmax(logits)_i ·
// op_i(a, b) in float64 for random a, b in [0,1] and logits in [-6,6), with
// every kind of broadcasting between a and b (leading axes, size-1 axes, the
// gate axis itself, a scalar). Tolerance: abs 1e-12 (f64), 2e-6 (f32); the
// values are in [0,1].
func TestLogicGateReference(t *testing.T) {
	tests := []struct{ a, b []int }{
		{[]int{2, 3, 4}, []int{2, 3, 4}},
		{[]int{3, 1, 4}, []int{2, 4}},
		{[]int{4}, []int{5, 4}},
		{[]int{2, 1}, []int{2, 5}},
		{[]int{}, []int{3}},
		{[]int{6, 1}, []int{1, 1}},
		{[]int{2, 3, 1}, []int{1, 3, 7}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%v,%v", tc.a, tc.b), func(t *testing.T) {
			kanLogicGateRandom[float32](t, tc.a, tc.b, uint64(i), 2e-6)
			kanLogicGateRandom[float64](t, tc.a, tc.b, uint64(i), 1e-12)
		})
	}
}

func kanLogicGateRandom[T float](t *testing.T, as, bs []int, seed uint64, tol float64) {
	t.Helper()
	r := newRand(seed + 40)
	out, _ := ir.BroadcastShapes(as, bs)
	gates := out[len(out)-1]
	unit := func(n int) []T {
		v := make([]T, n)
		for i := range v {
			v[i] = T(r.Float64())
		}
		return v
	}
	a, b := unit(ir.Shape(as).NumElements()), unit(ir.Shape(bs).NumElements())
	lg := randVals[T](r, gates*16, false)
	for i := range lg {
		lg[i] *= 3
	}
	want := make([]float64, out.NumElements())
	for i := range want {
		idx := unravel(out, i)
		g := idx[len(idx)-1]
		av, bv := float64(a[bcastIndex(as, idx)]), float64(b[bcastIndex(bs, idx)])
		row := f64s(lg[16*g : 16*g+16])
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		var s, acc float64
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for k, v := range row {
			acc += math.Exp(v-m) / s * kanGateRef(k, av, bv)
		}
		want[i] = acc
	}
	res := mustRun(t, ir.OpLogicGate, nil, tensorOf(as, a), tensorOf(bs, b), tensorOf([]int{gates, 16}, lg))
	if !res.Type.Shape.Equal(out) {
		t.Fatalf("shape %v, want %v", res.Type.Shape, out)
	}
	checkNear(t, kernels.DTypeOf[T]().String(), kernels.View[T](res), want, 0, tol)
}

// TestLogicGateEmpty runs logic_gate on zero-size batches and on zero gates.
func TestLogicGateEmpty(t *testing.T) {
	tests := []struct{ a, b, lg []int }{
		{[]int{0, 4}, []int{4}, []int{4, 16}},
		{[]int{2, 0}, []int{0}, []int{0, 16}},
		{[]int{0}, []int{1}, []int{0, 16}},
		{[]int{3, 0, 2}, []int{1, 2}, []int{2, 16}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v,%v", tc.a, tc.b), func(t *testing.T) {
			mustRun(t, ir.OpLogicGate, nil, tensorOf[float32](tc.a, nil), tensorOf[float32](tc.b, nil), tensorOf[float32](tc.lg, nil))
			mustRun(t, ir.OpLogicGate, nil, tensorOf[float64](tc.a, nil), tensorOf[float64](tc.b, nil), tensorOf[float64](tc.lg, nil))
		})
	}
}

// TestKanFuncsDoNotAllocate checks that neither Func allocates per call.
func TestKanFuncsDoNotAllocate(t *testing.T) {
	r := newRand(3)
	f64 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float64](r, ir.Shape(dims).NumElements(), false))
	}
	tests := []allocCase{
		{ir.OpBspline, nil, []kernels.Tensor{f64(4, 5)}},
		{ir.OpBspline, kanGridAttrs(0, 2, 7, 6, 2), []kernels.Tensor{f64(9)}},
		{ir.OpBspline, kanGridAttrs(0, 2, 7, 3, 3), []kernels.Tensor{f64(2, 7)}},
		{ir.OpLogicGate, nil, []kernels.Tensor{f64(3, 1, 4), f64(2, 4), f64(4, 16)}},
	}
	checkNoAllocs(t, tests)
}

// TestKanBuildRejectsBadNodes checks that the kernels refuse, with ir's
// messages, the nodes inference rejects.
func TestKanBuildRejectsBadNodes(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	canon := func(a ir.Attrs) ir.Attrs {
		c, err := ir.Canonical(ir.OpBspline, a)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"bspline int", kernels.Node{Op: ir.OpBspline, Attrs: canon(nil), Args: []ir.Type{ir.TensorOf(ir.I32, 2)}, Out: f32(2, 8)}, "expected a float operand x"},
		{"bspline grid_size", kernels.Node{Op: ir.OpBspline, Attrs: canon(ir.MakeAttrs("grid_size", ir.Int(0))), Args: []ir.Type{f32(2)}, Out: f32(2, 3)}, "expected grid_size in [1,"},
		{"bspline range", kernels.Node{Op: ir.OpBspline, Attrs: canon(ir.MakeAttrs("grid_min", ir.Float(1))), Args: []ir.Type{f32(2)}, Out: f32(2, 8)}, "expected finite grid_min < grid_max, found grid_min=1.0, grid_max=1.0"},
		{"bspline order", kernels.Node{Op: ir.OpBspline, Attrs: canon(ir.MakeAttrs("order", ir.Int(-1))), Args: []ir.Type{f32(2)}, Out: f32(2, 4)}, "expected order >= 0 with grid_size + 2·order <= 16777216, found order -1, grid_size 5"},
		{"bspline derivative", kernels.Node{Op: ir.OpBspline, Attrs: canon(ir.MakeAttrs("derivative", ir.Int(4))), Args: []ir.Type{f32(2)}, Out: f32(2, 8)}, "expected derivative in [0, order=3], found 4"},
		{"bspline negative derivative", kernels.Node{Op: ir.OpBspline, Attrs: canon(ir.MakeAttrs("derivative", ir.Int(-1))), Args: []ir.Type{f32(2)}, Out: f32(2, 8)}, "expected derivative in [0, order=3], found -1"},
		{"bspline shape", kernels.Node{Op: ir.OpBspline, Attrs: canon(nil), Args: []ir.Type{f32(2)}, Out: f32(2, 5)}, "does not match"},
		{"gate logits", kernels.Node{Op: ir.OpLogicGate, Args: []ir.Type{f32(3, 4), f32(3, 4), f32(4, 15)}, Out: f32(3, 4)}, "expected logits [4,16] for a f32[3,4] and b f32[3,4], found f32[4,15]"},
		{"gate scalar", kernels.Node{Op: ir.OpLogicGate, Args: []ir.Type{f32(), f32(), f32(1, 16)}, Out: f32()}, "rank >= 1"},
		{"gate dtype", kernels.Node{Op: ir.OpLogicGate, Args: []ir.Type{f32(4), ir.TensorOf(ir.F64, 4), f32(4, 16)}, Out: f32(4)}, "of one dtype"},
		{"gate broadcast", kernels.Node{Op: ir.OpLogicGate, Args: []ir.Type{f32(3, 4), f32(2, 4), f32(4, 16)}, Out: f32(3, 4)}, "that broadcast"},
		{"gate int", kernels.Node{Op: ir.OpLogicGate, Args: []ir.Type{ir.TensorOf(ir.I64, 4), ir.TensorOf(ir.I64, 4), ir.TensorOf(ir.I64, 4, 16)}, Out: ir.TensorOf(ir.I64, 4)}, "has no logic_gate kernel for i64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Kernels.Build(&tc.n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestKanRegisteredDTypes pins this family's kernels: floats only (both ops
// are smooth functions of real values).
func TestKanRegisteredDTypes(t *testing.T) {
	for _, op := range []ir.Op{ir.OpBspline, ir.OpLogicGate} {
		for _, dt := range allDTypes {
			if got, want := Kernels.Has(op, dt), dt.IsFloat(); got != want {
				t.Errorf("Has(%s, %s) = %v, want %v", op, dt, got, want)
			}
		}
	}
}
