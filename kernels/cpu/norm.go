package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Normalizations: layer_norm and batch_norm in training mode, and
// layer_norm's gradient with respect to its input. Each group of
// normalized elements is summed in T for the mean (a layer_norm row in
// rowSum's order; a batch_norm channel plane by plane, each in rowSum's
// order, in batch order), then the squared deviations from it likewise
// for the biased variance; 1/sqrt(var + eps) is computed in float64 and
// rounded once. layer_norm_grad computes the composite gradient of
// ir/ops_nn.go (nnNormGrad) instead, with its arithmetic; batch_norm's
// gradient is that composite. Large inputs split their rows (layer_norm,
// layer_norm_grad) or channels (batch_norm) across the workers (par.go),
// which changes no group's arithmetic.

func init() {
	register(ir.OpLayerNorm, ir.F32, buildLayerNorm[float32])
	register(ir.OpLayerNorm, ir.F64, buildLayerNorm[float64])
	register(ir.OpLayerNormGrad, ir.F32, buildLayerNormGrad[float32])
	register(ir.OpLayerNormGrad, ir.F64, buildLayerNormGrad[float64])
	register(ir.OpBatchNorm, ir.F32, buildBatchNorm[float32])
	register(ir.OpBatchNorm, ir.F64, buildBatchNorm[float64])
}

// buildLayerNorm builds layer_norm(x, [weight], [bias]) {axes, eps}: each
// row of the trailing normalized axes becomes (x - mean)·rstd·weight + bias,
// by vector calls on the row (rows of a transformer are in L1): its mean in
// rowSum's order, the deviations, their squares' sum in rowDot's order for
// the biased variance, rstd in float64 rounded once.
func buildLayerNorm[T float](n *kernels.Node) (kernels.Func, error) {
	rows, m, err := ir.LayerNormRows(n.Attrs, n.Args[0].Shape)
	if err != nil {
		return nil, err
	}
	eps, mt := n.Attrs.Float("eps", 1e-5), T(m)
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
			vecScalar(ir.OpSub, yr, xr, rowSum(xr)/mt)
			rstd := T(1 / math.Sqrt(float64(rowDot(yr, yr)/mt)+eps))
			vecScalar(ir.OpMul, yr, yr, rstd)
			if hasW {
				vecVec(ir.OpMul, yr, yr, w)
			}
			if hasB {
				vecVec(ir.OpAdd, yr, yr, b)
			}
		}
		return nil
	}), nil
}

// buildLayerNormGrad builds layer_norm_grad(dy, x[, weight]) {axes, eps}:
// each row of the trailing normalized axes in one pass over it (vector
// calls on rows in L1), with the arithmetic of the composite that
// layer_norm's gradient rule differentiates (ir/ops_nn.go, nnNormGrad),
// op by op in T and with its kernels' sum orders (the means' rowSum, the
// fused_reduce of a product's rowDot), so the result is bit for bit that
// of the composite graph:
//
//	xc = x - mean(x), rstd = 1/sqrt(mean(xc*xc) + eps), xhat = xc*rstd,
//	g = dy*weight, dx = rstd * ((g - mean(g)) - xhat*mean(g*xhat)).
func buildLayerNormGrad[T float](n *kernels.Node) (kernels.Func, error) {
	rows, m, err := ir.LayerNormRows(n.Attrs, n.Args[1].Shape)
	if err != nil {
		return nil, err
	}
	eps, mt := T(n.Attrs.Float("eps", 1e-5)), T(m)
	hasW := len(n.Args) > 2
	parts := parParts(n.Par, rows, 12*m) // split by rows (par.go)
	scratch := make([][]T, parts)        // xhat and g, a row each
	for p := range scratch {
		scratch[p] = make([]T, 2*m)
	}
	return parRows(n.Par, parts, rows, 1, func(p int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		if m == 0 {
			return nil
		}
		dx, dy, x := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		var w []T
		if hasW {
			w = kernels.View[T](args[2])
		}
		xhat, g := scratch[p][:m], scratch[p][m:]
		for r := lo; r < hi; r++ {
			xr, dyr, dxr := x[r*m:(r+1)*m], dy[r*m:(r+1)*m], dx[r*m:(r+1)*m]
			mean := (0 + rowSum(xr)) / mt
			vecScalar(ir.OpSub, xhat, xr, mean)
			variance := (0 + rowDot(xhat, xhat)) / mt
			rstd := 1 / sqrtOf(variance+eps)
			vecScalar(ir.OpMul, xhat, xhat, rstd)
			gr := dyr
			if hasW {
				vecVec(ir.OpMul, g, dyr, w)
				gr = g
			}
			mg := (0 + rowSum(gr)) / mt
			mgx := (0 + rowDot(gr, xhat)) / mt
			vecScalar(ir.OpMul, xhat, xhat, mgx)
			vecScalar(ir.OpSub, dxr, gr, mg)
			vecVec(ir.OpSub, dxr, dxr, xhat)
			vecScalar(ir.OpMul, dxr, dxr, rstd)
		}
		return nil
	}), nil
}

// sqrtOf returns the square root of v rounded once to T, as the sqrt
// kernels compute it.
func sqrtOf[T float](v T) T { return T(math.Sqrt(float64(v))) }

// buildBatchNorm builds batch_norm(x, weight, bias) {eps} with the batch's
// statistics: for each channel c, the planes x[b, c, ...] (contiguous) are
// summed each in rowSum's order and added in order of b for the mean, then
// their deviations from it (written to the output as scratch) likewise in
// rowDot's order for the biased variance; each plane is then normalized,
// scaled by weight[c] and shifted by bias[c], by vector calls.
func buildBatchNorm[T float](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	nb, c, sp := xs[0], xs[1], xs[2:].NumElements()
	m := nb * sp
	eps, mt := n.Attrs.Float("eps", 1e-5), T(m)
	parts := parParts(n.Par, c, 4*m) // split by channels (par.go)
	return parRows(n.Par, parts, c, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		w, b := kernels.View[T](args[1]), kernels.View[T](args[2])
		if m == 0 {
			return nil
		}
		plane := func(bi, ch int) int { return (bi*c + ch) * sp }
		for ch := lo; ch < hi; ch++ {
			var sum T
			for bi := range nb {
				o := plane(bi, ch)
				sum += rowSum(x[o : o+sp])
			}
			mean := sum / mt
			var q T
			for bi := range nb {
				o := plane(bi, ch)
				yr := y[o : o+sp]
				vecScalar(ir.OpSub, yr, x[o:o+sp], mean)
				q += rowDot(yr, yr)
			}
			rstd := T(1 / math.Sqrt(float64(q/mt)+eps))
			for bi := range nb {
				o := plane(bi, ch)
				yr := y[o : o+sp]
				vecScalar(ir.OpMul, yr, yr, rstd)
				vecScalar(ir.OpMul, yr, yr, w[ch])
				vecScalar(ir.OpAdd, yr, yr, b[ch])
			}
		}
		return nil
	}), nil
}
