package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

func init() {
	register(ir.OpBspline, ir.F32, buildKanBspline[float32])
	register(ir.OpBspline, ir.F64, buildKanBspline[float64])
	register(ir.OpLogicGate, ir.F32, buildKanLogicGate[float32])
	register(ir.OpLogicGate, ir.F64, buildKanLogicGate[float64])
}

// buildKanBspline builds bspline {grid_min, grid_max, grid_size, order,
// derivative}: for every element of x, the Cox–de Boor recursion on the knot
// vector with the arithmetic of efficient-kan's b_splines,
//
//	t_j      = (j - order)·h + grid_min, in T (torch.arange(...) * h + grid_range[0])
//	B_{j,0}  = 1 if t_j <= x < t_{j+1} else 0
//	B_{j,p}  = (x - t_j)/(t_{j+p} - t_j) · B_{j,p-1} + (t_{j+p+1} - x)/(t_{j+p+1} - t_{j+1}) · B_{j+1,p-1}
//
// up to degree order - derivative, then the derivative formula once per
// remaining degree p (derivatives of the lower-degree bases, on the same
// knots):
//
//	D B_{j,p} = p · (D B_{j,p-1} / (t_{j+p} - t_j) - D B_{j+1,p-1} / (t_{j+p+1} - t_{j+1}))
//
// The values are those of efficient-kan's sweep over every basis of every
// degree with whole tensors: so a finite x outside [t_0, t_last) gives
// all-zero bases (no extrapolation), and a non-finite x (or one so far out
// that (x - t_j)/(p·h) overflows) gives NaN for order >= 1, since inf·0 is
// NaN there too; derivatives at non-finite x are NaN as well. Inside the grid
// only the bases that can be nonzero are computed (see kanBsplineRow). The
// recursion runs in place in a scratch row made here.
//
// From kanSplitElems elements of x on, the elements are split into one
// contiguous range per worker, each with its own scratch row: every
// element's bases are computed alone, by the same arithmetic, so the result
// is the same for any split.
func buildKanBspline[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.BsplineGridOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	knots := kanKnots[T](g)
	nb := g.Bases()
	count := n.Args[0].Shape.NumElements()
	parts := 1
	if count >= kanSplitElems {
		parts = min(kernels.Workers(n.Par), count)
	}
	scratch := make([][]T, parts)
	bounds := make([]int, parts+1)
	for p := range parts {
		scratch[p] = make([]T, g.Intervals())
		bounds[p+1] = (p + 1) * count / parts
	}
	var o, x []T
	body := func(p int) {
		b := scratch[p]
		for i := bounds[p]; i < bounds[p+1]; i++ {
			kanBsplineDeriv(b, knots, x[i], g.Order, g.Deriv, g.H)
			copy(o[i*nb:(i+1)*nb], b[:nb])
		}
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x = kernels.View[T](out), kernels.View[T](args[0])
		kernels.Run(par, parts, body)
		o, x = nil, nil
		return nil
	}, nil
}

// kanSplitElems is the number of elements of x from which bspline splits
// them across the executor's workers.
var kanSplitElems = 1 << 13 // a variable for the tests

// kanKnots returns g's knots in T, computed as efficient-kan computes its
// grid buffer: T(j - order)·T(h) + T(grid_min), each operation rounded to T.
func kanKnots[T float](g ir.BsplineGrid) []T {
	knots := make([]T, g.Intervals()+1)
	h, lo := T(g.H), T(g.Min)
	for j := range knots {
		knots[j] = T(T(j-g.Order)*h) + lo
	}
	return knots
}

// kanBsplineDeriv writes into b (len(t)-1 long) the deriv-th derivatives of
// the degree order bases of x, in its first len(b)-order entries; the rest
// is scratch.
func kanBsplineDeriv[T float](b, t []T, x T, order, deriv int, h float64) {
	lo, hi := kanBsplineRow(b, t, x, order-deriv, h)
	if deriv == 0 {
		return
	}
	if v := float64(x); math.IsNaN(v) || math.IsInf(v, 0) { // no derivative
		nan := T(math.NaN())
		for j := range b {
			b[j] = nan
		}
		return
	}
	for p := order - deriv + 1; p <= order; p++ {
		// D B_{j,p} needs D B_{j,p-1} and D B_{j+1,p-1}: the entries that
		// can be nonzero move one to the left, and there is one fewer.
		lo, hi = max(lo-1, 0), min(hi, len(b)-p-1)
		tp := T(p)
		for j := lo; j <= hi; j++ {
			b[j] = tp * (b[j]/(t[j+p]-t[j]) - b[j+1]/(t[j+p+1]-t[j+1]))
		}
	}
}

// kanBsplineRow writes into b (len(t)-1 long) the bases of degree order of
// x in its first len(b)-order entries, and returns the range [lo, hi] of
// those that can be nonzero; the rest of b is zero up to len(b)-order and
// scratch after. For x inside [t_0, t_last) in interval i, only
// B_{i-p..i, p} can be nonzero at degree p, so only those are computed, each
// with exactly the arithmetic the full sweep (kanBsplineFull) does on it; the
// others are the zeros the full sweep would give (it adds products with 0,
// which cannot overflow there). Any other x takes the full sweep, so that
// NaN, infinities and overflow behave as in efficient-kan.
func kanBsplineRow[T float](b, t []T, x T, order int, h float64) (lo, hi int) {
	n := len(b)
	t = t[:n+1]
	if !(x >= t[0] && x < t[n]) {
		kanBsplineFull(b, t, x, order)
		return 0, n - order - 1
	}
	// Estimate the interval, then settle it against the rounded knots.
	i := min(max(int((float64(x)-float64(t[0]))/h), 0), n-1)
	for i > 0 && x < t[i] {
		i--
	}
	for i < n-1 && x >= t[i+1] {
		i++
	}
	clear(b)
	b[i] = 1
	lo, hi = i, i
	for k := 1; k <= order; k++ {
		lo, hi = max(i-k, 0), min(i, n-k-1)
		for j := lo; j <= hi; j++ {
			left := (x - t[j]) / (t[j+k] - t[j])
			right := (t[j+k+1] - x) / (t[j+k+1] - t[j+1])
			b[j] = T(left*b[j]) + T(right*b[j+1])
		}
	}
	return lo, hi
}

// kanBsplineFull is efficient-kan's sweep over every basis of every degree:
// degree 0 into b, then each degree in place. Products are rounded before
// they are added, so that no platform fuses them.
func kanBsplineFull[T float](b, t []T, x T, order int) {
	t = t[:len(b)+1]
	for j := range b {
		if x >= t[j] && x < t[j+1] {
			b[j] = 1
		} else {
			b[j] = 0
		}
	}
	for k := 1; k <= order; k++ {
		for j := range len(b) - k {
			left := (x - t[j]) / (t[j+k] - t[j])
			right := (t[j+k+1] - x) / (t[j+k+1] - t[j+1])
			b[j] = T(left*b[j]) + T(right*b[j+1])
		}
	}
}

// buildKanLogicGate builds logic_gate(a, b, logits [G,16]). Each call first
// turns every gate's logits into [A,B,C,D] = softmax(logits[g]) @ coeff
// (softmax as the softmax kernel computes it, softmaxRow; the products
// with the small integer coefficients are exact and added in index order),
// then makes one pass over the broadcast output: out = ((A + B·a) + C·b) + D·(a·b).
func buildKanLogicGate[T float](n *kernels.Node) (kernels.Func, error) {
	shape := n.Out.Shape
	gates := shape[len(shape)-1] // rank >= 1, checked by inference
	w := newWalk(shape, broadcastStrides(n.Args[0].Shape, shape), broadcastStrides(n.Args[1].Shape, shape))
	coef := make([]T, 4*gates)
	table := ir.LogicGateCoefficients()
	var ct [4][16]T
	p := make([]T, 16) // softmax's row: made here, as softmaxRow's vector calls would make a local array escape
	for i, c := range table {
		for k, v := range c {
			ct[k][i] = T(v)
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, a, b, lg := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		for g := range gates {
			kanGateCoefficients(coef[4*g:4*g+4], lg[16*g:16*g+16], &ct, p)
		}
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(oo, ao, bo int) {
			g := oo % gates
			for j := range y[oo : oo+inner] {
				c := coef[4*g : 4*g+4]
				av, bv := a[ao], b[bo]
				y[oo+j] = c[0] + T(c[1]*av) + T(c[2]*bv) + T(c[3]*T(av*bv))
				ao += ia
				bo += ib
				if g++; g == gates {
					g = 0
				}
			}
		})
		return nil
	}, nil
}

// kanGateCoefficients writes [A,B,C,D] = softmax(logits) @ coeff for one
// gate, with p (16 elements) for the probabilities.
func kanGateCoefficients[T float](out, logits []T, ct *[4][16]T, p []T) {
	p = p[:16]
	softmaxRow(p, logits, false)
	for k := range out {
		var acc T
		for i, v := range p {
			acc += T(v * ct[k][i])
		}
		out[k] = acc
	}
}
