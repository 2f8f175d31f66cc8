package cpu

import (
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
// extend}: for every element of x, the Cox–de Boor recursion over the whole
// knot vector, with the arithmetic of efficient-kan's b_splines:
//
//	t_j      = (j - extend)·h + grid_min, in T (torch.arange(...) * h + grid_range[0])
//	B_{j,0}  = 1 if t_j <= x < t_{j+1} else 0
//	B_{j,k}  = (x - t_j)/(t_{j+k} - t_j) · B_{j,k-1} + (t_{j+k+1} - x)/(t_{j+k+1} - t_{j+1}) · B_{j+1,k-1}
//
// The values are those of efficient-kan's sweep over every basis of every
// degree with whole tensors: so a finite x outside [t_0, t_last) gives
// all-zero bases (no extrapolation), and a non-finite x (or one so far out
// that (x - t_j)/(k·h) overflows) gives NaN for order >= 1, since inf·0 is
// NaN there too. Inside the grid only the order+1 nonzero bases of each
// degree are computed (see kanBsplineRow). The recursion runs in place in a
// scratch row made here.
func buildKanBspline[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.BsplineGridOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	intervals := g.Size + 2*g.Extend
	knots := make([]T, intervals+1)
	h, lo := T(g.H), T(g.Min)
	for j := range knots {
		knots[j] = T(T(j-g.Extend)*h) + lo
	}
	order, nb := g.Order, g.Bases()
	scratch := make([]T, intervals)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		o = o[:len(x)*nb]
		for i, v := range x {
			kanBsplineRow(scratch, knots, v, order, g.H)
			copy(o[i*nb:(i+1)*nb], scratch[:nb])
		}
		return nil
	}, nil
}

// kanBsplineRow writes into b (len(t)-1 long) the bases of degree order of
// x in its first len(b)-order entries; the rest is scratch. For x inside
// [t_0, t_last) in interval i, only B_{i-k..i, k} can be nonzero at degree
// k, so only those are computed, each with exactly the arithmetic the full
// sweep (kanBsplineFull) does on it; the others are the zeros the full sweep
// would give (it adds products with 0, which cannot overflow there). Any
// other x takes the full sweep, so that NaN, infinities and overflow behave
// as in efficient-kan.
func kanBsplineRow[T float](b, t []T, x T, order int, h float64) {
	n := len(b)
	t = t[:n+1]
	if !(x >= t[0] && x < t[n]) {
		kanBsplineFull(b, t, x, order)
		return
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
	for k := 1; k <= order; k++ {
		for j := max(0, i-k); j <= min(i, n-k-1); j++ {
			left := (x - t[j]) / (t[j+k] - t[j])
			right := (t[j+k+1] - x) / (t[j+k+1] - t[j+1])
			b[j] = T(left*b[j]) + T(right*b[j+1])
		}
	}
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
// (softmax as the softmax kernel computes it: shifted by the row maximum,
// summed in index order; the products with the small integer coefficients
// are exact and added in index order), then makes one pass over the
// broadcast output: out = ((A + B·a) + C·b) + D·(a·b).
func buildKanLogicGate[T float](n *kernels.Node) (kernels.Func, error) {
	shape := n.Out.Shape
	gates := shape[len(shape)-1] // rank >= 1, checked by inference
	w := newWalk(shape, broadcastStrides(n.Args[0].Shape, shape), broadcastStrides(n.Args[1].Shape, shape))
	coef := make([]T, 4*gates)
	table := ir.LogicGateCoefficients()
	var ct [4][16]T
	for i, c := range table {
		for k, v := range c {
			ct[k][i] = T(v)
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, a, b, lg := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		for g := range gates {
			kanGateCoefficients(coef[4*g:4*g+4], lg[16*g:16*g+16], &ct)
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
// gate.
func kanGateCoefficients[T float](out, logits []T, ct *[4][16]T) {
	var p [16]T
	m := rowMax(logits)
	var s T
	for i, v := range logits {
		e := exp(v - m)
		p[i] = e
		s += e
	}
	for i := range p {
		p[i] /= s
	}
	for k := range out {
		var acc T
		for i, v := range p {
			acc += T(v * ct[k][i])
		}
		out[k] = acc
	}
}
