package cpu

import (
	"runtime"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Convolutions: conv1d, conv2d and their gradient ops, by im2col and gemm.
// A 1-D convolution runs as a 2-D one with height 1. The batch is taken in
// chunks of at most nb elements (convPlan.nb, from the shapes): each
// chunk's input windows, for one group, are unfolded side by side into one
// column matrix (im2col) of C_in/groups·kH·kW rows and nb·OH·OW columns,
// a few hundred KiB that stay in the core's cache for the gemms that read
// them. Each image then has its own gemms, on its columns of the chunk
// and on its planes of the NCHW tensors in place (their og planes of one
// group are an og×OH·OW matrix): the forward writes W_g·cols into the
// output and adds the bias; the input gradient writes W_gᵀ·dy into the
// columns and folds them back (col2im, adding in a fixed order); the
// weight gradient adds dy·colsᵀ of the images one after another. The batch
// splits across the executor's workers (convRun); every output element is
// computed by one worker with an order fixed by the shapes, so the result
// is the same for any number of workers.

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
		if !gemmFinite(tA, tB, m, n, k, a, lda, b, ldb) {
			gemmPlain(tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
			return
		}
		blas32.Implementation().Sgemm(convTrans(tA), convTrans(tB), m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	}
	convDgemm convGemmFunc[float64] = func(tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
		if !gemmFinite(tA, tB, m, n, k, a, lda, b, ldb) {
			gemmPlain(tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
			return
		}
		blas64.Implementation().Dgemm(convTrans(tA), convTrans(tB), m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
	}
)

// convPlan is a convolution's geometry in 2-D form (a 1-D one has height
// 1) with the sizes the loops use.
type convPlan struct {
	n, cin, cout, groups   int
	h, w, kh, kw, oh, ow   int
	sh, sw, ph, pw, dh, dw int
	cg, og                 int  // channels per group in and out
	k, l                   int  // rows (cg·kh·kw) and columns (oh·ow) of an image's column matrix
	hw                     int  // h·w
	nb                     int  // batch elements per chunk
	direct                 bool // one gemm per image on the tensors in place (l ≥ convDirectL)
	shifted                bool // unit strides and ow = w: im2col and col2im move whole planes
}

// convChunkElems bounds the elements of a chunk's column matrix and of its
// gathered output (or dy): nb is the most batch elements whose k·l and
// og·l columns fit, at least 1.
var convChunkElems = 1 << 18 // a variable for the tests

// convDirectL is the fewest output positions per image (l) from which
// each image has gemms of its own, reading and writing the NCHW tensors in
// place: wide enough for the micro-kernel, and the gathering and scattering
// copies of a chunk's gemm, a pass over the output or dy, are saved. Below
// it the chunk's images share one gemm, nb·l wide.
var convDirectL = 512 // a variable for the tests

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
	p.direct = p.l >= convDirectL
	rows := max(p.k, p.og)
	if p.direct {
		rows = p.k // no gathered output or dy
	}
	p.nb = max(1, min(p.n, convChunkElems/max(1, rows*p.l)))
	p.shifted = p.sw == 1 && p.sh == 1 && p.ow == p.w
	return p
}

// convTapRange returns, for kernel column j, the input column of output
// column 0 (ix0, which may lie in the padding) and the output columns
// [lo, hi) whose tap falls inside the input row; the others read padding.
func convTapRange(p *convPlan, j int) (ix0, lo, hi int) {
	ix0 = j*p.dw - p.pw
	if ix0 < 0 {
		lo = min(p.ow, (-ix0+p.sw-1)/p.sw)
	}
	hi = p.ow
	if ix0 >= p.w {
		hi = lo
	} else if ix0+(p.ow-1)*p.sw >= p.w {
		hi = max(lo, min(p.ow, (p.w-1-ix0)/p.sw+1))
	}
	return ix0, lo, hi
}

// convTap is where kernel tap (i, j) reads: output (oy, ox) reads input
// row oy·sh+dy and column ox·sw+ix0, inside the input for the output
// columns [lo, hi). For a shifted plan (unit strides, ow = w) it also
// holds the output rows [oyLo, oyHi) whose input row exists and the run
// [d0, d1) of output positions d that read plane[d+off], which covers
// them (the positions in it outside [lo, hi) of their row read padding).
type convTap struct {
	dy, ix0, lo, hi int
	oyLo, oyHi      int
	off, d0, d1     int
}

// newConvTap returns the convTap of kernel tap (i, j) under p.
func newConvTap(p *convPlan, i, j int) convTap {
	t := convTap{dy: i*p.dh - p.ph}
	t.ix0, t.lo, t.hi = convTapRange(p, j)
	if p.shifted {
		t.oyLo, t.oyHi = max(0, -t.dy), min(p.oh, p.h-t.dy)
		t.off = t.dy*p.w + t.ix0
		t.d0, t.d1 = max(t.oyLo*p.w, -t.off), min(t.oyHi*p.w, p.hw-t.off)
	}
	return t
}

// convIm2col fills the column matrix col (row stride ld) with the windows
// of n images, the cg input planes of one group each, the first at x and
// the next ones xs elements apart: image m's l columns start at column
// m·l, and col[(c·kh+i)·kw+j][m·l + oy·ow+ox] =
// x_m[c][oy·sh-ph+i·dh][ox·sw-pw+j·dw], 0 in the padding. Taps are the outer
// loop and images the inner one, so that a tap's geometry is worked out
// once for the n images (the images of a small network are a few dozen
// values per row).
//
// With unit strides and rows as wide as the input's (a "same" convolution),
// a kernel tap's row of col is the plane shifted by a constant: one run
// moves it, and then the columns that read padding are zeroed.
func convIm2col[T float](p *convPlan, col []T, ld int, x []T, xs, n int) {
	convTaps(p, n, func(r, c, img int, t convTap) {
		plane := x[img*xs+c*p.hw : img*xs+(c+1)*p.hw]
		row := col[r*ld+img*p.l : r*ld+(img+1)*p.l]
		if p.shifted {
			convIm2colShifted(p, row, plane, &t)
		} else {
			convIm2colRow(p, row, plane, &t)
		}
	})
}

// convTaps calls f for every row r of a column matrix, the kernel tap
// (c, i, j) with r = (c·kh+i)·kw+j, and every image img in [0, n), taps
// outer and images inner, with the tap's geometry worked out once.
func convTaps(p *convPlan, n int, f func(r, c, img int, t convTap)) {
	r := 0
	for c := range p.cg {
		for i := range p.kh {
			for j := range p.kw {
				t := newConvTap(p, i, j)
				for img := range n {
					f(r, c, img, t) // by value: a pointer would escape
				}
				r++
			}
		}
	}
}

// convIm2colRow fills row, one image's columns of a kernel tap, output row
// by output row.
func convIm2colRow[T float](p *convPlan, row, plane []T, t *convTap) {
	ix0, lo, hi := t.ix0, t.lo, t.hi
	for oy := range p.oh {
		dst := row[oy*p.ow : (oy+1)*p.ow]
		iy := oy*p.sh + t.dy
		if iy < 0 || iy >= p.h || hi <= lo {
			for ox := range dst {
				dst[ox] = 0
			}
			continue
		}
		src := plane[iy*p.w : (iy+1)*p.w]
		for ox := range lo {
			dst[ox] = 0
		}
		if p.sw == 1 {
			in := src[ix0+lo : ix0+hi]
			for ox, v := range in {
				dst[lo+ox] = v
			}
		} else {
			ix := ix0 + lo*p.sw
			for ox := lo; ox < hi; ox++ {
				dst[ox] = src[ix]
				ix += p.sw
			}
		}
		for ox := hi; ox < p.ow; ox++ {
			dst[ox] = 0
		}
	}
}

// convIm2colShifted fills row, one image's columns of a kernel tap, when
// the strides are 1 and ow = w: then row[oy·w+ox] = plane[(oy+dy)·w +
// ox+ix0], plane shifted by t.off, for the oy whose input row exists,
// except the columns outside [lo, hi), which read padding.
func convIm2colShifted[T float](p *convPlan, row, plane []T, t *convTap) {
	w := p.w
	if t.oyHi <= t.oyLo || t.hi <= t.lo {
		clear(row)
		return
	}
	clear(row[:t.oyLo*w])
	clear(row[t.oyHi*w:])
	dst, src := row[t.d0:t.d1], plane[t.d0+t.off:t.d1+t.off]
	if len(dst) < 64 {
		for i, v := range src[:len(dst)] {
			dst[i] = v
		}
	} else {
		copy(dst, src)
	}
	convZeroPadding(row, w, t)
}

// convZeroPadding zeroes, in the rows [t.oyLo, t.oyHi) of row (one image's
// columns of a kernel tap, rows w wide), the columns outside [t.lo, t.hi),
// which read padding.
//
// The columns go outer and the rows inner: a tap reads padding in only a
// column or two of each row (one for a 3×3 kernel padded by 1), so loops
// over each row's padding columns would run once or not at all, and their
// overhead cost more than the stores (on bench/cnn28.kir's second layer,
// 8% of each convolution kernel's time).
func convZeroPadding[T float](row []T, w int, t *convTap) {
	if t.oyHi <= t.oyLo {
		return
	}
	rows := row[t.oyLo*w : t.oyHi*w]
	for ox := range t.lo {
		for i := ox; i < len(rows); i += w {
			rows[i] = 0
		}
	}
	for ox := t.hi; ox < w; ox++ {
		for i := ox; i < len(rows); i += w {
			rows[i] = 0
		}
	}
}

// convCol2im adds the columns of col (row stride ld) of n images back onto
// their input planes, the cg planes of one group each, the first at x and
// the next ones xs elements apart: the adjoint of convIm2col, in the same
// order for each input element.
//
// With unit strides and ow = w it adds a kernel tap's row to the shifted
// plane in one run, after zeroing the row's padding columns (col is
// scratch): adding +0 changes no bit of a sum that started at +0, which can
// never be -0.
func convCol2im[T float](p *convPlan, x []T, xs, n int, col []T, ld int) {
	convTaps(p, n, func(r, c, img int, t convTap) {
		if t.hi <= t.lo {
			return // every tap in the padding
		}
		plane := x[img*xs+c*p.hw : img*xs+(c+1)*p.hw]
		row := col[r*ld+img*p.l : r*ld+(img+1)*p.l]
		if p.shifted {
			convCol2imShifted(p, plane, row, &t)
		} else {
			convCol2imRow(p, plane, row, &t)
		}
	})
}

// convCol2imRow adds row, one image's columns of a kernel tap, onto plane,
// output row by output row.
func convCol2imRow[T float](p *convPlan, plane, row []T, t *convTap) {
	ix0, lo, hi := t.ix0, t.lo, t.hi
	for oy := range p.oh {
		iy := oy*p.sh + t.dy
		if iy < 0 || iy >= p.h {
			continue
		}
		dst := plane[iy*p.w : (iy+1)*p.w]
		src := row[oy*p.ow+lo : oy*p.ow+hi]
		if p.sw == 1 {
			d := dst[ix0+lo : ix0+hi]
			for ox, v := range src {
				d[ox] += v
			}
			continue
		}
		ix := ix0 + lo*p.sw
		for _, v := range src {
			dst[ix] += v
			ix += p.sw
		}
	}
}

// convCol2imShifted adds row, one image's columns of a kernel tap (see
// convIm2colShifted), onto plane, for unit strides and ow = w.
func convCol2imShifted[T float](p *convPlan, plane, row []T, t *convTap) {
	w := p.w
	if t.oyHi <= t.oyLo {
		return
	}
	convZeroPadding(row, w, t)
	dst, src := plane[t.d0+t.off:t.d1+t.off], row[t.d0:t.d1]
	if len(dst) < 64 {
		for i, v := range src[:len(dst)] {
			dst[i] += v
		}
		return
	}
	vecVec(ir.OpAdd, dst, dst, src)
}

// convRun is a convolution kernel's state: the bounds of its parts (batch
// elements, or the weight gradient's slabs) and a set of chunk buffers
// and gemm for each part that may run at once.
//
// A large convolution on the blocked gemm splits its batch into
// contiguous ranges (convPartsPerWorker per worker), and each part takes
// its images through every pass (unfold, gemm, scatter or fold) alone,
// chunk after chunk, in the buffers it took: what a pass writes is read by
// the next one on the same core, never moved between cores. An image's
// result does not depend on the chunk it falls in or its columns there
// (the gemms' sums depend only on the inner dimension, gemm.go), so the
// bits are the same for any split. Otherwise (a small convolution, one
// image, or gonum's BLAS) one part takes the batch, and each gemm splits
// across the workers as a matmul's does.
type convRun[T float] struct {
	p      *convPlan
	par    kernels.Parallel
	parts  int
	bounds []int
	// sets are the buffer sets, one per worker, and taken[i] says set i
	// is in use: a part takes a free one and gives it back, so the few
	// sets stay in the caches however many parts there are. Part q takes
	// set q·len(sets)/parts when it is free: the set of the block of
	// parts q falls in (the executor's pool hands CPU c the parts
	// [c·n/W, (c+1)·n/W) first, kernels.Parallel), so a core goes on with
	// the set it last wrote (a megabyte of columns for a 3×3 convolution
	// over 32 channels) rather than with the other core's.
	sets  []*convPart[T]
	taken []atomic.Bool
	body  func(q int, pt *convPart[T]) // the kernel's part q, made by its builder
	part  func(q int)                  // body with a buffer set taken
}

// convPart is a set of chunk buffers and a gemm.
type convPart[T float] struct {
	col  []T // a chunk's column matrix: k rows of nb·l
	buf  []T // a chunk's output or dy for one group: og rows of nb·l (not direct)
	gemm *convGemm[T]
}

// convPartsPerWorker is how many parts a split convolution makes per
// worker: the pool hands parts out one at a time, so a worker that starts
// late (waking it takes microseconds) or is held up by another process
// leaves its parts to the others rather than making them wait.
const convPartsPerWorker = 4

// convSplitMACs is the least number of multiply-adds of a convolution
// whose batch splits across the workers.
var convSplitMACs = 1 << 20 // a variable for the tests

// newConvRun returns the state of a convolution kernel under p whose
// gemms multiply at most m×k by k×n, with units (batch elements, or slabs)
// to split across the parts.
func newConvRun[T float](p *convPlan, par kernels.Parallel, m, n, k, units int) *convRun[T] {
	cr := &convRun[T]{p: p, par: par}
	parts := 1
	if w := kernels.Workers(par); gemmAsm && w > 1 && p.n*p.cout*p.k*p.l >= convSplitMACs {
		parts = max(1, min(convPartsPerWorker*w, units))
	}
	gemmPar := par
	if parts > 1 {
		gemmPar = nil // each part's gemms run on the part's goroutine
	}
	sets := min(parts, kernels.Workers(par))
	cr.parts, cr.taken = parts, make([]atomic.Bool, sets)
	for range sets {
		pt := &convPart[T]{col: make([]T, p.k*p.nb*p.l), gemm: newConvGemm[T](gemmPar, m, n, k)}
		if !p.direct {
			pt.buf = make([]T, p.og*p.nb*p.l)
		}
		cr.sets = append(cr.sets, pt)
	}
	cr.bounds = parBounds(units, parts, 1)
	cr.part = func(q int) {
		i := cr.take(q * sets / parts)
		defer cr.taken[i].Store(false)
		cr.body(q, cr.sets[i])
	}
	return cr
}

// take marks a free buffer set taken and returns it: set pref when it is
// free, else the next free one. With more parts running at once than sets
// (a pool that runs every part on a goroutine of its own) it waits for
// one to be given back.
func (cr *convRun[T]) take(pref int) int {
	for {
		for d := range cr.taken {
			i := (pref + d) % len(cr.taken)
			if !cr.taken[i].Load() && cr.taken[i].CompareAndSwap(false, true) {
				return i
			}
		}
		runtime.Gosched()
	}
}

// run runs the kernel's parts.
func (cr *convRun[T]) run() { kernels.Run(cr.par, cr.parts, cr.part) }

// convChunks returns how many chunks the batch elements [lo, hi) take:
// ceil((hi-lo)/nb), chunk c being [lo+c·(hi-lo)/nc, lo+(c+1)·(hi-lo)/nc).
func convChunks(p *convPlan, lo, hi int) int { return (hi - lo + p.nb - 1) / p.nb }

// convGatherDy copies the dy (or any NCHW tensor shaped like the output)
// of the batch elements [b0, b1) for group gi into buf, rows ld long: the
// gemm's layout, og rows of the chunk's positions.
func convGatherDy[T float](p *convPlan, buf, dy []T, gi, b0, b1, ld int) {
	for b := b0; b < b1; b++ {
		for co := range p.og {
			src := dy[(b*p.cout+gi*p.og+co)*p.l : (b*p.cout+gi*p.og+co+1)*p.l]
			copy(buf[co*ld+(b-b0)*p.l:co*ld+(b-b0+1)*p.l], src)
		}
	}
}

// buildConv builds conv1d and conv2d {stride, padding, dilation, groups}
// with an optional bias, as torch.nn.functional.conv1d/conv2d: for each
// image and group, out = W_g · im2col(x) into the image's og output planes,
// then bias added per output channel.
func buildConv[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Args[0].Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	hasBias := len(n.Args) == 3
	cr := newConvRun[T](p, n.Par, p.og, p.nb*p.l, p.k, p.n)
	var y, x, w, bias []T
	direct := func(pt *convPart[T], gi, b0, b1, ld int) {
		wg := w[gi*p.og*p.k : (gi+1)*p.og*p.k]
		for b := b0; b < b1; b++ {
			yb := y[(b*p.cout+gi*p.og)*p.l : (b*p.cout+(gi+1)*p.og)*p.l]
			pt.gemm.run(false, false, p.og, p.l, p.k, wg, p.k, pt.col[(b-b0)*p.l:], ld, 0, yb, p.l)
			if hasBias {
				for co := range p.og {
					row := yb[co*p.l : (co+1)*p.l]
					vecScalar(ir.OpAdd, row, row, bias[gi*p.og+co])
				}
			}
		}
	}
	cr.body = func(q int, pt *convPart[T]) {
		lo, hi := cr.bounds[q], cr.bounds[q+1]
		nc := convChunks(p, lo, hi)
		for c := range nc {
			b0, b1 := lo+c*(hi-lo)/nc, lo+(c+1)*(hi-lo)/nc
			ld := (b1 - b0) * p.l
			for gi := range p.groups {
				if p.k > 0 {
					convIm2col(p, pt.col, ld, x[(b0*p.cin+gi*p.cg)*p.hw:], p.cin*p.hw, b1-b0)
				}
				if p.direct && p.k > 0 {
					direct(pt, gi, b0, b1, ld)
					continue
				}
				if p.k == 0 {
					clear(pt.buf[:p.og*ld]) // no input channels: an empty sum
				} else {
					pt.gemm.run(false, false, p.og, ld, p.k, w[gi*p.og*p.k:(gi+1)*p.og*p.k], p.k, pt.col, ld, 0, pt.buf, ld)
				}
				for b := b0; b < b1; b++ {
					for co := range p.og {
						src := pt.buf[co*ld+(b-b0)*p.l : co*ld+(b-b0+1)*p.l]
						dst := y[(b*p.cout+gi*p.og+co)*p.l : (b*p.cout+gi*p.og+co+1)*p.l]
						if hasBias {
							vecScalar(ir.OpAdd, dst, src, bias[gi*p.og+co])
						} else {
							copy(dst, src)
						}
					}
				}
			}
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x, w = kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		bias = nil
		if hasBias {
			bias = kernels.View[T](args[2])
		}
		if len(y) == 0 {
			return nil
		}
		cr.run()
		y, x, w, bias = nil, nil, nil, nil
		return nil
	}, nil
}

// buildConvInputGrad builds conv_input_grad(dy, w) {..., input_shape}: the
// gradient of the convolution with respect to its input, col2im(W_gᵀ · dy_g)
// per image and group (the transposed convolution).
func buildConvInputGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Out.Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	cr := newConvRun[T](p, n.Par, p.k, p.nb*p.l, p.og, p.n)
	var dx, dy, w []T
	cr.body = func(q int, pt *convPart[T]) {
		lo, hi := cr.bounds[q], cr.bounds[q+1]
		nc := convChunks(p, lo, hi)
		for c := range nc {
			b0, b1 := lo+c*(hi-lo)/nc, lo+(c+1)*(hi-lo)/nc
			ld := (b1 - b0) * p.l
			clear(dx[b0*p.cin*p.hw : b1*p.cin*p.hw])
			for gi := range p.groups {
				wg := w[gi*p.og*p.k : (gi+1)*p.og*p.k]
				if p.direct {
					for b := b0; b < b1; b++ {
						pt.gemm.run(true, false, p.k, p.l, p.og, wg, p.k, dy[(b*p.cout+gi*p.og)*p.l:], p.l, 0, pt.col[(b-b0)*p.l:], ld)
					}
				} else {
					convGatherDy(p, pt.buf, dy, gi, b0, b1, ld)
					pt.gemm.run(true, false, p.k, ld, p.og, wg, p.k, pt.buf, ld, 0, pt.col, ld)
				}
				convCol2im(p, dx[(b0*p.cin+gi*p.cg)*p.hw:], p.cin*p.hw, b1-b0, pt.col, ld)
			}
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dx, dy, w = kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		if p.og == 0 || p.k == 0 || p.l == 0 {
			clear(dx)
			return nil
		}
		cr.run()
		dx, dy, w = nil, nil, nil
		return nil
	}, nil
}

// convWeightSlabs is how many slabs a large weight gradient cuts its batch
// into (at most one per batch element): each slab's sum is computed alone,
// in one part, and the slabs' sums are added in slab order, so the slabs,
// and the result, depend on the shapes alone and not on the workers.
const convWeightSlabs = 8

// buildConvWeightGrad builds conv_weight_grad(x, dy) {..., weight_shape}:
// the gradient of the convolution with respect to its weight: per group,
// the sum over the images of dy_g · im2col(x)ᵀ, image after image. A large
// convolution cuts its batch into slabs (convWeightSlabs) that split
// across the workers, and adds their sums in slab order. Where k is
// narrower than a micro-tile and og wider (a first layer: one input
// channel, 3×3 taps), the gemms compute the sums transposed, im2col(x) ·
// dy_gᵀ, whose tiles waste less, and the slabs' sums are added into the
// result transposed back.
func buildConvWeightGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := ir.ConvGeometry(n.Args[0].Shape, n.Out.Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	p := newConvPlan(g)
	slabs := 1
	if p.n*p.cout*p.k*p.l >= convSplitMACs {
		slabs = max(1, min(p.n, convWeightSlabs))
	}
	trans := false
	if gemmAsm {
		trans = convWeightTransposed[T](p.og, p.k)
	}
	m, nn := p.og, p.k
	if trans {
		m, nn = p.k, p.og
	}
	cr := newConvRun[T](p, n.Par, m, nn, p.nb*p.l, slabs)
	size := p.cout * p.k
	// partial holds the sums of slabs 1, 2, ... (slab 0's goes into the
	// result), or transposed those of every slab.
	partial := make([]T, (slabs-1)*size)
	if trans {
		partial = make([]T, slabs*size)
	}
	var dw, x, dy []T
	cr.body = func(q int, pt *convPart[T]) {
		for s := cr.bounds[q]; s < cr.bounds[q+1]; s++ {
			var sum []T
			switch {
			case trans:
				sum = partial[s*size : (s+1)*size]
			case s == 0:
				sum = dw
			default:
				sum = partial[(s-1)*size : s*size]
			}
			lo, hi := s*p.n/slabs, (s+1)*p.n/slabs
			nc := convChunks(p, lo, hi)
			for gi := range p.groups {
				sg := sum[gi*p.og*p.k : (gi+1)*p.og*p.k]
				for c := range nc {
					b0, b1 := lo+c*(hi-lo)/nc, lo+(c+1)*(hi-lo)/nc
					ld := (b1 - b0) * p.l
					convIm2col(p, pt.col, ld, x[(b0*p.cin+gi*p.cg)*p.hw:], p.cin*p.hw, b1-b0)
					if p.direct {
						for b := b0; b < b1; b++ {
							convWeightGemm(pt, trans, p, b == lo, dy[(b*p.cout+gi*p.og)*p.l:], p.l, pt.col[(b-b0)*p.l:], ld, p.l, sg)
						}
						continue
					}
					convGatherDy(p, pt.buf, dy, gi, b0, b1, ld)
					convWeightGemm(pt, trans, p, c == 0, pt.buf, ld, pt.col, ld, ld, sg)
				}
			}
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dw, x, dy = kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		if p.og == 0 || p.k == 0 {
			return nil // dw is empty
		}
		if p.n == 0 || p.l == 0 {
			clear(dw)
			return nil
		}
		cr.run()
		if trans {
			convAddTransposed(p, dw, partial, slabs)
		} else {
			for s := 1; s < slabs; s++ {
				vecVec(ir.OpAdd, dw, dw, partial[(s-1)*size:s*size])
			}
		}
		dw, x, dy = nil, nil, nil
		return nil
	}, nil
}

// convWeightTransposed reports whether a weight gradient of og×k per
// group computes its sums transposed (k×og): when the micro-kernels'
// tiles cover that product with less waste (rows in MR-row panels, columns
// in NR-wide ones; ties keep og×k).
func convWeightTransposed[T float](og, k int) bool {
	_, mr, nr := gemmMicro[T]()
	covered := func(m, n int) int { return roundUp(m, mr) * roundUp(n, nr) }
	return covered(k, og) < covered(og, k)
}

// convWeightGemm adds dy·colsᵀ (og×k), or with trans cols·dyᵀ (k×og), to
// sum, or with first writes it there: dy is og×inner with row stride ldy,
// cols k×inner with row stride ldc.
func convWeightGemm[T float](pt *convPart[T], trans bool, p *convPlan, first bool, dy []T, ldy int, cols []T, ldc, inner int, sum []T) {
	beta := T(1)
	if first {
		beta = 0
	}
	if trans {
		pt.gemm.run(false, true, p.k, p.og, inner, cols, ldc, dy, ldy, beta, sum, p.og)
	} else {
		pt.gemm.run(false, true, p.og, p.k, inner, dy, ldy, cols, ldc, beta, sum, p.k)
	}
}

// convAddTransposed writes into dw the sum, in slab order, of the slabs'
// transposed weight gradients in sums: per group, k×og matrices, those of
// slab s from s·cout·k. The slabs are added into slab 0's (vector adds
// along the memory, which sums is scratch for), then transposed into dw.
func convAddTransposed[T float](p *convPlan, dw, sums []T, slabs int) {
	size := p.cout * p.k
	acc := sums[:size]
	for s := 1; s < slabs; s++ {
		vecVec(ir.OpAdd, acc, acc, sums[s*size:(s+1)*size])
	}
	for gi := range p.groups {
		g := gi * p.og * p.k
		for t := range p.k {
			row := acc[g+t*p.og : g+(t+1)*p.og]
			for co, v := range row {
				dw[g+co*p.k+t] = v
			}
		}
	}
}

// convGemm is a convolution's gemm, c = op(a)·op(b) + beta·c, split across
// the executor's workers: by NR-wide column ranges of c when it has enough
// of them, else by MR-tall row ranges, each part with its own gemmWork;
// never over the inner dimension, so every element of c has the same
// arithmetic for any split (gemm.go). Without the micro-kernels it is one
// call of gonum's BLAS.
type convGemm[T float] struct {
	par     kernels.Parallel
	works   []*gemmWork[T]
	gonum   convGemmFunc[T]
	bounds  []int
	cols    bool
	call    convGemmCall[T]
	partRun func(part int)
}

// convGemmCall is the product in progress.
type convGemmCall[T float] struct {
	tA, tB   bool
	m, n, k  int
	a, b, c  []T
	lda, ldb int
	ldc      int
	beta     T
}

// newConvGemm returns the gemm for products of at most m×k by k×n.
func newConvGemm[T float](par kernels.Parallel, m, n, k int) *convGemm[T] {
	cg := &convGemm[T]{par: par}
	if !gemmAsm {
		var z T
		if _, ok := any(z).(float32); ok {
			cg.gonum = any(convSgemm).(convGemmFunc[T])
		} else {
			cg.gonum = any(convDgemm).(convGemmFunc[T])
		}
		return cg
	}
	parts := 1
	if m*n*k >= matmulSplitMACs {
		parts = kernels.Workers(par)
	}
	for range parts {
		cg.works = append(cg.works, newGemmWork[T](m, n, k))
	}
	cg.bounds = make([]int, parts+1)
	cg.partRun = cg.part
	return cg
}

// run computes c = op(a)·op(b) + beta·c (see convGemmFunc).
func (cg *convGemm[T]) run(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if cg.gonum != nil {
		cg.gonum(tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
		return
	}
	_, mr, nr := gemmMicro[T]()
	parts := len(cg.works)
	cg.cols = (n+nr-1)/nr >= parts
	if !cg.cols {
		parts = min(parts, (m+mr-1)/mr)
	}
	q, size := nr, n
	if !cg.cols {
		q, size = mr, m
	}
	for p := range parts {
		cg.bounds[p] = min(size, roundUp(p*size/parts, q))
	}
	cg.bounds[parts] = size
	cg.call = convGemmCall[T]{tA, tB, m, n, k, a, b, c, lda, ldb, ldc, beta}
	kernels.Run(cg.par, parts, cg.partRun)
	cg.call = convGemmCall[T]{}
}

// part computes part p of the product in progress.
func (cg *convGemm[T]) part(p int) {
	c := &cg.call
	lo, hi := cg.bounds[p], cg.bounds[p+1]
	if lo >= hi {
		return
	}
	w := cg.works[p]
	if !cg.cols {
		w.gemmRange(lo, hi, c.tA, c.tB, c.m, c.n, c.k, c.a, c.lda, c.b, c.ldb, c.beta, c.c, c.ldc)
		return
	}
	b := c.b[lo:] // op(b)'s columns from lo
	if c.tB {
		b = c.b[lo*c.ldb:]
	}
	w.gemm(c.tA, c.tB, c.m, hi-lo, c.k, c.a, c.lda, b, c.ldb, c.beta, c.c[lo:], c.ldc)
}
