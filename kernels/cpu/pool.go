package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// 2-D pooling: max_pool2d, avg_pool2d and their gradients, following
// PyTorch's CPU kernels (aten/src/ATen/native/cpu/MaxPoolKernel.cpp and
// AvgPoolKernel.cpp) window by window: the planes (N·C or C) are pooled
// independently, windows in row-major order, taps within a window in
// row-major order. Gradients add each window's contribution in that same
// order, so every sum has a fixed order.

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

func nnPoolGeom(x ir.Shape, a ir.Attrs) (*ir.PoolGeom, error) {
	g, err := ir.PoolGeometry(x, a)
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// buildMaxPool builds max_pool2d {kernel, stride, padding, dilation}: the
// maximum of each window, -inf padding (a window with no input element,
// which the padding limit makes impossible in practice, gives -inf).
func buildMaxPool[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := nnPoolGeom(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		for pl := range g.Planes {
			xp, yp := x[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
			for oy := range g.OH {
				for ox := range g.OW {
					v := T(math.Inf(-1))
					if at, ok := maxPoolArgmax(g, xp, oy, ox); ok {
						v = xp[at]
					}
					yp[oy*g.OW+ox] = v
				}
			}
		}
		return nil
	}, nil
}

// buildMaxPoolGrad builds max_pool2d_grad(dy, x): each window's dy added at
// its arg max in x, windows in row-major order.
func buildMaxPoolGrad[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := nnPoolGeom(n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dx, dy, x := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		clear(dx)
		for pl := range g.Planes {
			xp, dxp, dyp := x[pl*hw:(pl+1)*hw], dx[pl*hw:(pl+1)*hw], dy[pl*ohw:(pl+1)*ohw]
			for oy := range g.OH {
				for ox := range g.OW {
					if at, ok := maxPoolArgmax(g, xp, oy, ox); ok {
						dxp[at] += dyp[oy*g.OW+ox]
					}
				}
			}
		}
		return nil
	}, nil
}

// buildMaxPoolSelect builds max_pool2d_select(g, x): g at each window's arg
// max in x (0 for a window with no input element).
func buildMaxPoolSelect[T float](n *kernels.Node) (kernels.Func, error) {
	g, err := nnPoolGeom(n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	hw, ohw := g.H*g.W, g.OH*g.OW
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, gv, x := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		for pl := range g.Planes {
			xp, gp, yp := x[pl*hw:(pl+1)*hw], gv[pl*hw:(pl+1)*hw], y[pl*ohw:(pl+1)*ohw]
			for oy := range g.OH {
				for ox := range g.OW {
					var v T
					if at, ok := maxPoolArgmax(g, xp, oy, ox); ok {
						v = gp[at]
					}
					yp[oy*g.OW+ox] = v
				}
			}
		}
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
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		for pl := range g.Planes {
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
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		dx, dy := kernels.View[T](out), kernels.View[T](args[0])
		clear(dx)
		for pl := range g.Planes {
			dxp, dyp := dx[pl*hw:(pl+1)*hw], dy[pl*ohw:(pl+1)*ohw]
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
		return nil
	}, nil
}
