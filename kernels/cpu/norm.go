package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Normalizations: layer_norm and batch_norm in training mode. Each group of
// normalized elements is summed in index order in T for the mean, then the
// squared deviations from it likewise for the biased variance; 1/sqrt(var +
// eps) is computed in float64 and rounded once. Their gradients are
// composite (ir/ops_nn.go), so no backward kernel is needed. Large inputs
// split their rows (layer_norm) or channels (batch_norm) across the
// workers (par.go), which changes no group's arithmetic.

func init() {
	register(ir.OpLayerNorm, ir.F32, buildLayerNorm[float32])
	register(ir.OpLayerNorm, ir.F64, buildLayerNorm[float64])
	register(ir.OpBatchNorm, ir.F32, buildBatchNorm[float32])
	register(ir.OpBatchNorm, ir.F64, buildBatchNorm[float64])
}

// nnNormStats returns the mean of the elements of x in segs segments of
// length seg, the first at offset 0 and each stride after the one before,
// and 1/sqrt(biased variance + eps), summing in that order.
func nnNormStats[T float](x []T, eps float64, segs, seg, stride int) (mean, rstd T) {
	var s T
	for k := range segs {
		for _, v := range x[k*stride : k*stride+seg] {
			s += v
		}
	}
	m := T(segs * seg)
	mean = s / m
	var q T
	for k := range segs {
		for _, v := range x[k*stride : k*stride+seg] {
			d := v - mean
			q += T(d * d)
		}
	}
	return mean, T(1 / math.Sqrt(float64(q/m)+eps))
}

// buildLayerNorm builds layer_norm(x, [weight], [bias]) {axes, eps}: each
// row of the trailing normalized axes becomes (x - mean)·rstd·weight + bias.
func buildLayerNorm[T float](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	start, err := ir.LayerNormStart(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	m, rows := xs[start:].NumElements(), xs[:start].NumElements()
	eps := n.Attrs.Float("eps", 1e-5)
	hasW, hasB := len(n.Args) > 1, len(n.Args) > 2
	parts := parParts(n.Par, rows, 4*m) // split by rows (par.go)
	return parRows(n.Par, parts, rows, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		if m == 0 {
			return nil
		}
		var w, b []T
		if hasW {
			w = kernels.View[T](args[1])
		}
		if hasB {
			b = kernels.View[T](args[2])
		}
		for r := lo; r < hi; r++ {
			xr, yr := x[r*m:(r+1)*m], y[r*m:(r+1)*m]
			mean, rstd := nnNormStats(xr, eps, 1, m, m)
			for i, v := range xr {
				z := T((v - mean) * rstd)
				if hasW {
					z = T(z * w[i])
				}
				if hasB {
					z += b[i]
				}
				yr[i] = z
			}
		}
		return nil
	}), nil
}

// buildBatchNorm builds batch_norm(x, weight, bias) {eps} with the batch's
// statistics: for each channel c, the elements x[b, c, s...] in order of b
// and then the spatial index are normalized and scaled by weight[c] and
// shifted by bias[c].
func buildBatchNorm[T float](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	nb, c, sp := xs[0], xs[1], xs[2:].NumElements()
	m := nb * sp
	eps := n.Attrs.Float("eps", 1e-5)
	parts := parParts(n.Par, c, 4*m) // split by channels (par.go)
	return parRows(n.Par, parts, c, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		w, b := kernels.View[T](args[1]), kernels.View[T](args[2])
		if m == 0 {
			return nil
		}
		for ch := lo; ch < hi; ch++ {
			mean, rstd := nnNormStats(x[ch*sp:], eps, nb, sp, c*sp)
			wc, bc := w[ch], b[ch]
			for bi := range nb {
				o := (bi*c + ch) * sp
				for i, v := range x[o : o+sp] {
					y[o+i] = T(T((v-mean)*rstd)*wc) + bc
				}
			}
		}
		return nil
	}), nil
}
