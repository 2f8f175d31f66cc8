package cpu

import (
	"math"
	"unsafe"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// 2-D pooling: max_pool2d, avg_pool2d and their gradients, following
// PyTorch's CPU kernels (aten/src/ATen/native/cpu/MaxPoolKernel.cpp and
// AvgPoolKernel.cpp) window by window: the planes (N·C or C) are pooled
// independently, windows in row-major order, taps within a window in
// row-major order. Gradients add each window's contribution in that same
// order, so every sum has a fixed order. Large poolings split their planes
// across the executor's workers (poolParts); each plane is computed alone,
// so the split changes no bit.

func init() {
	register(ir.OpMaxPool2d, ir.F32, buildMaxPool[float32])
	register(ir.OpMaxPool2d, ir.F64, buildMaxPool[float64])
	register(ir.OpMaxPool2dGrad, ir.F32, buildMaxPoolGrad[float32])
	register(ir.OpMaxPool2dGrad, ir.F64, buildMaxPoolGrad[float64])
	register(ir.OpMaxPool2dSelect, ir.F32, buildMaxPoolSelect[float32])
	register(ir.OpMaxPool2dSelect, ir.F64, buildMaxPoolSelect[float64])
	register(ir.OpAvgPool2d, ir.F32, buildAvgPool[float32])
	register(ir.OpAvgPool2d, ir.F64, buildAvgPool[float64])
	register(ir.OpAvgPool2dGrad, ir.F32, buildAvgPoolGrad[float32])
	register(ir.OpAvgPool2dGrad, ir.F64, buildAvgPoolGrad[float64])
}

// nnPoolRange returns the taps of window o along one axis that fall inside
// the input [0, n): the first in-range position and the end (exclusive) of
// positions start, start+dil, ..., start+(k-1)·dil, as PyTorch computes
// them (the first in-range tap found by stepping the dilation).
func nnPoolRange(o, n, k, stride, pad, dil int) (first, end int) {
	first = o*stride - pad
	end = min(first+(k-1)*dil+1, n)
	for first < 0 {
		first += dil
	}
	return first, end
}

// maxPoolArgmax returns the offset within plane x (h×w) of the arg max of
// window (oy, ox), and whether the window holds any input element. As
// PyTorch's CPU kernel: the maximum starts at -inf with the window's first
// in-range tap, and a tap replaces it when it is greater or NaN, so the
// first maximum wins ties, -inf windows select their first tap and the
// last NaN wins.
func maxPoolArgmax[T float](g *ir.PoolGeom, x []T, oy, ox int) (int, bool) {
	y0, y1 := nnPoolRange(oy, g.H, g.Kernel[0], g.Stride[0], g.Padding[0], g.Dilation[0])
	x0, x1 := nnPoolRange(ox, g.W, g.Kernel[1], g.Stride[1], g.Padding[1], g.Dilation[1])
	if y0 >= y1 || x0 >= x1 {
		return 0, false
	}
	best, at := T(math.Inf(-1)), y0*g.W+x0
	for iy := y0; iy < y1; iy += g.Dilation[0] {
		for ix := x0; ix < x1; ix += g.Dilation[1] {
			i := iy*g.W + ix
			if v := x[i]; v > best || v != v {
				best, at = v, i
			}
		}
	}
	return at, true
}

// maxPoolArgmaxes writes into at (OH·OW long) the offset within plane x of
// every window's arg max, as maxPoolArgmax, windows in row-major order; -1
// for a window with no input element.
//
// Without padding or dilation every window lies inside the plane, and a
// loop without range checks finds the same tap: it starts from the first
// tap rather than from -inf (a first tap greater than -inf or NaN would
// replace -inf; -inf keeps the first tap), and it takes each later tap
// without a branch (maxPoolTake), since on real data whether a tap is the
// new maximum is a coin toss the branch predictor loses: 2×2 windows, the
// common case, are written out, and f32 ones at stride 2 in rows of four
// windows or more go eight or four at a time through AVX2 (maxPool22F32)
// where the CPU has it.
func maxPoolArgmaxes[T float](g *ir.PoolGeom, x []T, at []int32) {
	kh, kw, sh, sw, w := g.Kernel[0], g.Kernel[1], g.Stride[0], g.Stride[1], g.W
	if g.Padding != [2]int{} || g.Dilation != [2]int{1, 1} {
		for oy := range g.OH {
			for ox := range g.OW {
				a, ok := maxPoolArgmax(g, x, oy, ox)
				if !ok {
					a = -1
				}
				at[oy*g.OW+ox] = int32(a)
			}
		}
		return
	}
	if kh == 2 && kw == 2 {
		xs, f32 := any(x).([]float32)
		asm := f32 && maxPoolAsm && sw == 2
		for oy := range g.OH {
			row := at[oy*g.OW : (oy+1)*g.OW]
			r0, r1 := x[oy*sh*w:oy*sh*w+w], x[oy*sh*w+w:oy*sh*w+2*w]
			start := 0
			if asm && g.OW >= 4 {
				// Eight and four windows at a time in AVX2, the same
				// comparisons; a row whose length is not a multiple of 4
				// ends with its last four windows, some computed twice.
				base := oy * sh * w
				n4 := g.OW &^ 3
				maxPool22F32(unsafe.Pointer(&row[0]), unsafe.Pointer(&xs[base]), base, w, n4)
				if last := g.OW - 4; last > n4-4 {
					maxPool22F32(unsafe.Pointer(&row[last]), unsafe.Pointer(&xs[base+2*last]), base+2*last, w, 4)
				}
				start = g.OW
			}
			for ox := start; ox < len(row); ox++ {
				j := ox * sw
				first := uint64(oy*sh*w + j)
				best, a := float64(r0[j]), first
				best, a = maxPoolTake(best, a, float64(r0[j+1]), first+1)
				best, a = maxPoolTake(best, a, float64(r1[j]), first+uint64(w))
				_, a = maxPoolTake(best, a, float64(r1[j+1]), first+uint64(w)+1)
				row[ox] = int32(a)
			}
		}
		return
	}
	for oy := range g.OH {
		row := at[oy*g.OW : (oy+1)*g.OW]
		for ox := range row {
			first := oy*sh*w + ox*sw
			best, a := float64(x[first]), uint64(first)
			for iy := range kh {
				base := first + iy*w
				for ix, v := range x[base : base+kw] {
					best, a = maxPoolTake(best, a, float64(v), uint64(base+ix))
				}
			}
			row[ox] = int32(a)
		}
	}
}

// maxPoolTake returns (v, i) when v replaces the maximum best (v is greater
// or NaN), else (best, a), choosing by bit masks instead of a branch. The
// values are T widened to float64, exactly, so the comparisons are T's.
func maxPoolTake(best float64, a uint64, v float64, i uint64) (float64, uint64) {
	m := maskIf(v > best) | maskIf(v != v)
	return math.Float64frombits(math.Float64bits(v)&m | math.Float64bits(best)&^m), i&m | a&^m
}

// maskIf returns all ones when c holds, else 0 (the compiler sets it
// without a branch).
func maskIf(c bool) uint64 {
	var m uint64
	if c {
		m = ^uint64(0)
	}
	return m
}

func nnPoolGeom(x ir.Shape, a ir.Attrs) (*ir.PoolGeom, error) {
	g, err := ir.PoolGeometry(x, a)
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// poolParts returns the bounds of the planes cut into parPartsPerWorker
// parts per worker of par when the pooling reads at least poolSplitTaps
// window taps, else into one part. With more parts than workers, a worker
// that finishes first takes the other's last parts: the CNN step's
// max_pool2d over [64,64,14,14] on 2 workers went from 0.62–0.66 to
// 0.26–0.47 ms with four parts a worker against one, the step from
// 10.6–10.8 to 10.3–10.4 ms (kiln bench -workers 2 bench/cnn28.kir, three
// alternated rounds).
func poolParts(par kernels.Parallel, g *ir.PoolGeom) []int {
	parts := 1
	if g.Planes*g.OH*g.OW*g.Kernel[0]*g.Kernel[1] >= poolSplitTaps {
		parts = min(parPartsPerWorker*kernels.Workers(par), g.Planes)
	}
	return parBounds(g.Planes, parts, 1)
}

// poolSplitTaps is the number of window taps from which a pooling kernel
// splits its planes across the executor's workers.
var poolSplitTaps = 1 << 15 // a variable for the tests

// maxPoolKind is which of the three kernels built on the arg maxes of the
// windows buildMaxPoolKind builds.
type maxPoolKind int

const (
	maxPoolForward maxPoolKind = iota // max_pool2d(x)
	maxPoolGrad                       // max_pool2d_grad(dy, x)
	maxPoolSelect                     // max_pool2d_select(g, x)
)

// buildMaxPool builds max_pool2d {kernel, stride, padding, dilation}: the
// maximum of each window, -inf padding (a window with no input element,
// which the padding limit makes impossible in practice, gives -inf).
func buildMaxPool[T float](n *kernels.Node) (kernels.Func, error) {
	return buildMaxPoolKind[T](n, maxPoolForward)
}

// buildMaxPoolGrad builds max_pool2d_grad(dy, x): each window's dy added at
// its arg max in x, windows in row-major order.
func buildMaxPoolGrad[T float](n *kernels.Node) (kernels.Func, error) {
	return buildMaxPoolKind[T](n, maxPoolGrad)
}

// buildMaxPoolSelect builds max_pool2d_select(g, x): g at each window's arg
// max in x (0 for a window with no input element).
func buildMaxPoolSelect[T float](n *kernels.Node) (kernels.Func, error) {
	return buildMaxPoolKind[T](n, maxPoolSelect)
}

// buildMaxPoolKind builds one of the max-pool kernels: per plane, the arg
// maxes of its windows (maxPoolArgmaxes), then the kernel's use of them.
// The planes are independent, so a split of them across the workers (each
// part with its own arg max row) gives the same result.
func buildMaxPoolKind[T float](n *kernels.Node, kind maxPoolKind) (kernels.Func, error) {
	xs := n.Args[len(n.Args)-1].Shape // x is the last argument of each
	g, err := nnPoolGeom(xs, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	bounds := poolParts(n.Par, g)
	parts := len(bounds) - 1
	at := make([][]int32, parts)
	for p := range at {
		at[p] = make([]int32, ohw)
	}
	var o, a0, x []T // the output, the first argument (dy or g) and x
	body := func(p int) {
		ap := at[p]
		for pl := bounds[p]; pl < bounds[p+1]; pl++ {
			xp := x[pl*hw : (pl+1)*hw]
			maxPoolArgmaxes(g, xp, ap)
			switch kind {
			case maxPoolForward:
				yp := o[pl*ohw : (pl+1)*ohw]
				for i, a := range ap {
					yp[i] = T(math.Inf(-1))
					if a >= 0 {
						yp[i] = xp[a]
					}
				}
			case maxPoolGrad:
				dxp, dyp := o[pl*hw:(pl+1)*hw], a0[pl*ohw:(pl+1)*ohw]
				clear(dxp)
				for i, a := range ap {
					if a >= 0 {
						dxp[a] += dyp[i]
					}
				}
			case maxPoolSelect:
				yp, gp := o[pl*ohw:(pl+1)*ohw], a0[pl*hw:(pl+1)*hw]
				for i, a := range ap {
					yp[i] = 0
					if a >= 0 {
						yp[i] = gp[a]
					}
				}
			}
		}
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x = kernels.View[T](out), kernels.View[T](args[len(args)-1])
		if kind != maxPoolForward {
			a0 = kernels.View[T](args[0])
		}
		kernels.Run(par, parts, body)
		o, a0, x = nil, nil, nil
		return nil
	}, nil
}

// nnAvgWindow returns the in-range extent of window (oy, ox) and its divisor,
// as PyTorch's cpu_avg_pool: the window clipped to the padded input gives
// the divisor with count_include_pad, the window clipped to the input
// without it.
func nnAvgWindow(g *ir.PoolGeom, oy, ox int) (y0, y1, x0, x1, div int) {
	y0, x0 = oy*g.Stride[0]-g.Padding[0], ox*g.Stride[1]-g.Padding[1]
	y1, x1 = min(y0+g.Kernel[0], g.H+g.Padding[0]), min(x0+g.Kernel[1], g.W+g.Padding[1])
	div = (y1 - y0) * (x1 - x0)
	y0, x0 = max(y0, 0), max(x0, 0)
	y1, x1 = min(y1, g.H), min(x1, g.W)
	if !g.CountIncludePad {
		div = (y1 - y0) * (x1 - x0)
	}
	return y0, y1, x0, x1, div
}

// buildAvgPool builds avg_pool2d {kernel, stride, padding,
// count_include_pad}: each window's sum, in row-major order, divided by
// its divisor.
func buildAvgPool[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := nnPoolGeom(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	bounds := poolParts(n.Par, g)
	var y, x []T
	body := func(p int) {
		for pl := bounds[p]; pl < bounds[p+1]; pl++ {
			xp, yp := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
			for oy := range g.OH {
				for ox := range g.OW {
					y0, y1, x0, x1, div := nnAvgWindow(g, oy, ox)
					if y0 >= y1 || x0 >= x1 {
						yp[oy*g.OW+ox] = 0 // no input element (not reachable under the padding limit)
						continue
					}
					var s T
					for iy := y0; iy < y1; iy++ {
						for _, v := range xp[iy*g.W+x0 : iy*g.W+x1] {
							s += v
						}
					}
					yp[oy*g.OW+ox] = s / T(div)
				}
			}
		}
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x = kernels.View[T](out), kernels.View[T](args[0])
		kernels.Run(par, len(bounds)-1, body)
		y, x = nil, nil
		return nil
	}, nil
}

// buildAvgPoolGrad builds avg_pool2d_grad(dy) {..., input_shape}: each
// window's dy divided by its divisor and added over the window, windows in
// row-major order.
func buildAvgPoolGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := nnPoolGeom(n.Out.Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	bounds := poolParts(n.Par, g)
	var dx, dy []T
	body := func(p int) {
		for pl := bounds[p]; pl < bounds[p+1]; pl++ {
			dxp, dyp := dx[pl*hw:(pl+1)*hw], dy[pl*ohw:(pl+1)*ohw]
			clear(dxp)
			for oy := range g.OH {
				for ox := range g.OW {
					y0, y1, x0, x1, div := nnAvgWindow(g, oy, ox)
					if y0 >= y1 || x0 >= x1 {
						continue
					}
					d := dyp[oy*g.OW+ox] / T(div)
					for iy := y0; iy < y1; iy++ {
						row := dxp[iy*g.W+x0 : iy*g.W+x1]
						for i := range row {
							row[i] += d
						}
					}
				}
			}
		}
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dx, dy = kernels.View[T](out), kernels.View[T](args[0])
		kernels.Run(par, len(bounds)-1, body)
		dx, dy = nil, nil
		return nil
	}, nil
}
