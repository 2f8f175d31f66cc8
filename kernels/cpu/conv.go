package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Convolutions: conv1d, conv2d and their gradient ops, by im2col and BLAS
// gemm. A 1-D convolution runs as a 2-D one with height 1. Each (batch
// element, group) pair unfolds its input windows into a column matrix
// (im2col) of C_in/groups·kH·kW rows and OH·OW columns, so that the
// convolution is one gemm with the group's weights; the input gradient is
// the transposed gemm folded back (col2im, adding in a fixed order) and the
// weight gradient sums one gemm per batch element, in batch order. Every
// sum therefore has an order fixed by the shapes.

func init() {
	for _, op := range []ir.Op{ir.OpConv1d, ir.OpConv2d} {
		register(op, ir.F32, buildConv[float32])
		register(op, ir.F64, buildConv[float64])
	}
	register(ir.OpConvInputGrad, ir.F32, buildConvInputGrad[float32])
	register(ir.OpConvInputGrad, ir.F64, buildConvInputGrad[float64])
	register(ir.OpConvWeightGrad, ir.F32, buildConvWeightGrad[float32])
	register(ir.OpConvWeightGrad, ir.F64, buildConvWeightGrad[float64])
}

// convGemmFunc computes c = op(a)·op(b) + beta·c for row-major operands,
// op transposing when tA or tB is set; c is m×n and the product's inner
// dimension is k.
type convGemmFunc[T float] func(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int)

func convTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

var (
	convSgemm convGemmFunc[float32] = func(tA, tB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
		blas32.Implementation().Sgemm(convTrans(tA), convTrans(tB), m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	}
	convDgemm convGemmFunc[float64] = func(tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
		blas64.Implementation().Dgemm(convTrans(tA), convTrans(tB), m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	}
)

// convGemmOf returns the gemm for T for products of at most m×k by k×n:
// the blocked gemm (gemm.go) where its micro-kernels run, gonum's BLAS
// otherwise (see gemmOf).
func convGemmOf[T float](m, n, k int) convGemmFunc[T] {
	if gemmAsm {
		return newGemmWork[T](m, n, k).gemm
	}
	var z T
	if _, ok := any(z).(float32); ok {
		return any(convSgemm).(convGemmFunc[T])
	}
	return any(convDgemm).(convGemmFunc[T])
}

// convPlan is a convolution's geometry in 2-D form (a 1-D one has height
// 1) with the sizes the loops use.
type convPlan struct {
	n, cin, cout, groups   int
	h, w, kh, kw, oh, ow   int
	sh, sw, ph, pw, dh, dw int
	cg, og                 int // channels per group in and out
	k, l                   int // rows (cg·kh·kw) and columns (oh·ow) of the column matrix
	hw                     int // h·w
}

func newConvPlan(g ir.ConvGeom) *convPlan {
	p := &convPlan{n: g.N, cin: g.CIn, cout: g.COut, groups: g.Groups,
		h: 1, kh: 1, oh: 1, sh: 1, dh: 1}
	i := 0
	if len(g.In) == 2 {
		p.h, p.kh, p.oh, p.sh, p.ph, p.dh = g.In[0], g.Kernel[0], g.Out[0], g.Stride[0], g.Padding[0], g.Dilation[0]
		i = 1
	}
	p.w, p.kw, p.ow, p.sw, p.pw, p.dw = g.In[i], g.Kernel[i], g.Out[i], g.Stride[i], g.Padding[i], g.Dilation[i]
	p.cg, p.og = p.cin/p.groups, p.cout/p.groups
	p.k, p.l, p.hw = p.cg*p.kh*p.kw, p.oh*p.ow, p.h*p.w
	return p
}

// convIm2col fills col (k×l) with the windows of x, the cg input planes of
// one group: col[(c·kh+i)·kw+j][oy·ow+ox] = x[c][oy·sh-ph+i·dh][ox·sw-pw+j·dw],
// 0 in the padding.
func convIm2col[T float](p *convPlan, col, x []T) {
	r := 0
	for c := range p.cg {
		plane := x[c*p.hw : (c+1)*p.hw]
		for i := range p.kh {
			for j := range p.kw {
				row := col[r*p.l : (r+1)*p.l]
				r++
				for oy := range p.oh {
					dst := row[oy*p.ow : (oy+1)*p.ow]
					iy := oy*p.sh - p.ph + i*p.dh
					if iy < 0 || iy >= p.h {
						clear(dst)
						continue
					}
					src := plane[iy*p.w : (iy+1)*p.w]
					ix := j*p.dw - p.pw
					for ox := range dst {
						if ix >= 0 && ix < p.w {
							dst[ox] = src[ix]
						} else {
							dst[ox] = 0
						}
						ix += p.sw
					}
				}
			}
		}
	}
}

// convCol2im adds the columns of col back onto the input planes x, the
// adjoint of convIm2col, in the same order.
func convCol2im[T float](p *convPlan, x, col []T) {
	r := 0
	for c := range p.cg {
		plane := x[c*p.hw : (c+1)*p.hw]
		for i := range p.kh {
			for j := range p.kw {
				row := col[r*p.l : (r+1)*p.l]
				r++
				for oy := range p.oh {
					iy := oy*p.sh - p.ph + i*p.dh
					if iy < 0 || iy >= p.h {
						continue
					}
					dst := plane[iy*p.w : (iy+1)*p.w]
					ix := j*p.dw - p.pw
					for _, v := range row[oy*p.ow : (oy+1)*p.ow] {
						if ix >= 0 && ix < p.w {
							dst[ix] += v
						}
						ix += p.sw
					}
				}
			}
		}
	}
}

// buildConv builds conv1d and conv2d {stride, padding, dilation, groups}
// with an optional bias, as torch.nn.functional.conv1d/conv2d: for each
// batch element and group, out = W_g · im2col(x), then bias added per
// output channel.
func buildConv[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Args[0].Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	hasBias := len(n.Args) == 3
	col := make([]T, p.k*p.l)
	gemm := convGemmOf[T](p.og, p.l, p.k)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x, w := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		if p.og == 0 {
			return nil // no output channels: y is empty
		}
		var bias []T
		if hasBias {
			bias = kernels.View[T](args[2])
		}
		for b := range p.n {
			for gi := range p.groups {
				yo := y[(b*p.cout+gi*p.og)*p.l : (b*p.cout+(gi+1)*p.og)*p.l]
				if p.k == 0 {
					clear(yo) // no input channels: an empty sum
					continue
				}
				xin := x[(b*p.cin+gi*p.cg)*p.hw : (b*p.cin+(gi+1)*p.cg)*p.hw]
				convIm2col(p, col, xin)
				gemm(false, false, p.og, p.l, p.k, w[gi*p.og*p.k:(gi+1)*p.og*p.k], p.k, col, p.l, 0, yo, p.l)
			}
			if hasBias {
				for co, bv := range bias {
					row := y[(b*p.cout+co)*p.l : (b*p.cout+co+1)*p.l]
					for i := range row {
						row[i] += bv
					}
				}
			}
		}
		return nil
	}, nil
}

// buildConvInputGrad builds conv_input_grad(dy, w) {..., input_shape}: the
// gradient of the convolution with respect to its input, col2im(W_gᵀ · dy_g)
// per batch element and group (the transposed convolution).
func buildConvInputGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Out.Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	col := make([]T, p.k*p.l)
	gemm := convGemmOf[T](p.k, p.l, p.og)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dx, dy, w := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		clear(dx)
		if p.og == 0 || p.k == 0 {
			return nil
		}
		for b := range p.n {
			for gi := range p.groups {
				dyg := dy[(b*p.cout+gi*p.og)*p.l : (b*p.cout+(gi+1)*p.og)*p.l]
				gemm(true, false, p.k, p.l, p.og, w[gi*p.og*p.k:(gi+1)*p.og*p.k], p.k, dyg, p.l, 0, col, p.l)
				convCol2im(p, dx[(b*p.cin+gi*p.cg)*p.hw:(b*p.cin+(gi+1)*p.cg)*p.hw], col)
			}
		}
		return nil
	}, nil
}

// buildConvWeightGrad builds conv_weight_grad(x, dy) {..., weight_shape}:
// the gradient of the convolution with respect to its weight, the sum over
// the batch, in order, of dy_g · im2col(x)ᵀ per group.
func buildConvWeightGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Args[0].Shape, n.Out.Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	col := make([]T, p.k*p.l)
	gemm := convGemmOf[T](p.og, p.k, p.l)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dw, x, dy := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		if p.og == 0 || p.k == 0 {
			return nil // dw is empty
		}
		if p.n == 0 {
			clear(dw)
			return nil
		}
		for gi := range p.groups {
			dwg := dw[gi*p.og*p.k : (gi+1)*p.og*p.k]
			for b := range p.n {
				convIm2col(p, col, x[(b*p.cin+gi*p.cg)*p.hw:(b*p.cin+(gi+1)*p.cg)*p.hw])
				beta := T(1)
				if b == 0 {
					beta = 0
				}
				dyg := dy[(b*p.cout+gi*p.og)*p.l : (b*p.cout+(gi+1)*p.og)*p.l]
				gemm(false, true, p.og, p.k, p.l, dyg, p.l, col, p.l, beta, dwg, p.k)
			}
		}
		return nil
	}, nil
}
