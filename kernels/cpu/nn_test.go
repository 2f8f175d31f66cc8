package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Tests of the neural-network layer kernels (conv.go, pool.go, norm.go,
// dropout.go).

// nnConvCase is one convolution geometry.
type nnConvCase struct {
	x, w     []int // shapes
	stride   []int
	padding  []int
	dilation []int
	groups   int
	bias     bool
}

func (c nnConvCase) attrs() ir.Attrs {
	a := ir.MakeAttrs("groups", ir.Int(max(c.groups, 1)))
	if c.stride != nil {
		a = a.With("stride", ir.Ints(c.stride...))
	}
	if c.padding != nil {
		a = a.With("padding", ir.Ints(c.padding...))
	}
	if c.dilation != nil {
		a = a.With("dilation", ir.Ints(c.dilation...))
	}
	return a
}

func (c nnConvCase) op() ir.Op {
	if len(c.x) == 3 {
		return ir.OpConv1d
	}
	return ir.OpConv2d
}

// nnConvTaps calls f for every (batch, output channel, output position,
// input channel, weight offset, input offset) of a direct convolution of
// geometry g, in a plain nested loop written independently of the kernels:
// 1-D geometries have no height.
func nnConvTaps(g ir.ConvGeom, f func(yi, wi, xi int)) {
	in, k, out := append([]int{1}, g.In...), append([]int{1}, g.Kernel...), append([]int{1}, g.Out...)
	st, pd, dl := append([]int{1}, g.Stride...), append([]int{0}, g.Padding...), append([]int{1}, g.Dilation...)
	if len(g.In) == 2 {
		in, k, out, st, pd, dl = g.In, g.Kernel, g.Out, g.Stride, g.Padding, g.Dilation
	}
	cg, og := g.CIn/g.Groups, g.COut/g.Groups
	for n := 0; n < g.N; n++ {
		for co := 0; co < g.COut; co++ {
			grp := co / og
			for oy := 0; oy < out[0]; oy++ {
				for ox := 0; ox < out[1]; ox++ {
					yi := ((n*g.COut+co)*out[0]+oy)*out[1] + ox
					for c := 0; c < cg; c++ {
						ci := grp*cg + c
						for ky := 0; ky < k[0]; ky++ {
							iy := oy*st[0] - pd[0] + ky*dl[0]
							if iy < 0 || iy >= in[0] {
								continue
							}
							for kx := 0; kx < k[1]; kx++ {
								ix := ox*st[1] - pd[1] + kx*dl[1]
								if ix < 0 || ix >= in[1] {
									continue
								}
								wi := ((co*cg+c)*k[0]+ky)*k[1] + kx
								xi := ((n*g.CIn+ci)*in[0]+iy)*in[1] + ix
								f(yi, wi, xi)
							}
						}
					}
				}
			}
		}
	}
}

// nnConvCases are random-ish geometries covering stride, padding,
// dilation, groups (depthwise included) and bias, in 1-D and 2-D.
var nnConvCases = []nnConvCase{
	{x: []int{2, 3, 7}, w: []int{4, 3, 3}, bias: true},
	{x: []int{2, 4, 9}, w: []int{6, 2, 3}, stride: []int{2}, padding: []int{1}, dilation: []int{2}, groups: 2},
	{x: []int{1, 3, 5}, w: []int{3, 1, 2}, padding: []int{2}, groups: 3, bias: true},
	{x: []int{3, 2, 6}, w: []int{2, 2, 1}, stride: []int{3}},
	{x: []int{2, 3, 6, 5}, w: []int{4, 3, 3, 2}, bias: true},
	{x: []int{2, 4, 8, 7}, w: []int{4, 2, 3, 3}, stride: []int{2}, padding: []int{1}, dilation: []int{2}, groups: 2, bias: true},
	{x: []int{1, 4, 6, 6}, w: []int{8, 1, 3, 3}, stride: []int{1, 2}, padding: []int{1, 0}, groups: 4},
	{x: []int{2, 3, 5, 7}, w: []int{3, 1, 2, 3}, stride: []int{2, 1}, padding: []int{0, 2}, dilation: []int{2, 1}, groups: 3, bias: true},
	{x: []int{2, 2, 4, 4}, w: []int{5, 2, 1, 1}, bias: true},
	{x: []int{1, 1, 3, 3}, w: []int{1, 1, 5, 5}, padding: []int{2}, stride: []int{3}},
	// "Same" convolutions (unit strides, output as wide as the input): the
	// shifted-copy im2col, with and without dilation, padded on one axis
	// only, and wider than tall.
	{x: []int{2, 3, 5, 6}, w: []int{4, 3, 3, 3}, padding: []int{1}, bias: true},
	{x: []int{2, 2, 7, 5}, w: []int{3, 2, 3, 3}, padding: []int{2}, dilation: []int{2}},
	{x: []int{1, 2, 4, 9}, w: []int{2, 2, 1, 5}, padding: []int{0, 2}, bias: true},
	{x: []int{2, 3, 8}, w: []int{2, 3, 3}, padding: []int{1}},
	{x: []int{1, 1, 2, 2}, w: []int{1, 1, 3, 3}, padding: []int{1}},
	// A first layer (one input channel, more filters than taps): the
	// weight gradient's gemms run transposed.
	{x: []int{3, 1, 6, 5}, w: []int{20, 1, 3, 3}, padding: []int{1}, bias: true},
	// The same in two groups, and a layer whose og×k product the tiles
	// cover with more waste than k×og (og 64, k 48): transposed too.
	{x: []int{2, 2, 6, 5}, w: []int{40, 1, 3, 3}, padding: []int{1}, groups: 2},
	{x: []int{2, 12, 5, 5}, w: []int{64, 12, 2, 2}, padding: []int{1}},
}

// TestConvAgainstDirectLoop checks conv1d/conv2d, conv_input_grad and
// conv_weight_grad against direct loops in float64 on many geometries,
// with the batch in one chunk and in chunks of one image, each chunk's
// images in one gemm and each image in gemms of its own (convDirectL).
func TestConvAgainstDirectLoop(t *testing.T) {
	defer func(c, d int) { convChunkElems, convDirectL = c, d }(convChunkElems, convDirectL)
	for _, directL := range []int{1 << 30, 1} {
		convDirectL = directL
		for _, chunk := range []int{1 << 18, 1} {
			convChunkElems = chunk
			for i, c := range nnConvCases {
				t.Run(fmt.Sprintf("direct%d/chunk%d/%d_%s%v", directL, chunk, i, c.op(), c.x), func(t *testing.T) {
					nnConvCheck[float32](t, c, uint64(i))
					nnConvCheck[float64](t, c, uint64(i))
				})
			}
		}
	}
}

func nnConvCheck[T float](t *testing.T, c nnConvCase, seed uint64) {
	r := newRand(seed)
	g, err := ir.ConvGeometry(c.x, c.w, c.attrs())
	if err != nil {
		t.Fatal(err)
	}
	xs, ws, ys := ir.Shape(c.x), ir.Shape(c.w), g.OutShape()
	x := randVals[T](r, xs.NumElements(), false)
	w := randVals[T](r, ws.NumElements(), false)
	b := randVals[T](r, g.COut, false)
	dy := randVals[T](r, ys.NumElements(), false)
	tol := rel[T]() * 8

	// Forward.
	want, mag := make([]float64, ys.NumElements()), make([]float64, ys.NumElements())
	nnConvTaps(g, func(yi, wi, xi int) {
		want[yi] += float64(w[wi]) * float64(x[xi])
		mag[yi] += math.Abs(float64(w[wi]) * float64(x[xi]))
	})
	args := []kernels.Tensor{tensorOf(c.x, x), tensorOf(c.w, w)}
	if c.bias {
		args = append(args, tensorOf([]int{g.COut}, b))
		for i := range want {
			co := (i / g.OutShape()[2:].NumElements()) % g.COut
			want[i] += float64(b[co])
			mag[i] += math.Abs(float64(b[co]))
		}
	}
	out := mustRun(t, c.op(), c.attrs(), args...)
	nnCheckScaled(t, "conv "+out.Type.String(), kernels.View[T](out), want, mag, tol)

	// Input gradient: dx[xi] += w[wi] dy[yi].
	want, mag = make([]float64, xs.NumElements()), make([]float64, xs.NumElements())
	nnConvTaps(g, func(yi, wi, xi int) {
		want[xi] += float64(w[wi]) * float64(dy[yi])
		mag[xi] += math.Abs(float64(w[wi]) * float64(dy[yi]))
	})
	out = mustRun(t, ir.OpConvInputGrad, c.attrs().With("input_shape", ir.Ints(c.x...)), tensorOf(ys, dy), tensorOf(c.w, w))
	nnCheckScaled(t, "conv_input_grad "+out.Type.String(), kernels.View[T](out), want, mag, tol)

	// Weight gradient: dw[wi] += x[xi] dy[yi].
	want, mag = make([]float64, ws.NumElements()), make([]float64, ws.NumElements())
	nnConvTaps(g, func(yi, wi, xi int) {
		want[wi] += float64(x[xi]) * float64(dy[yi])
		mag[wi] += math.Abs(float64(x[xi]) * float64(dy[yi]))
	})
	out = mustRun(t, ir.OpConvWeightGrad, c.attrs().With("weight_shape", ir.Ints(c.w...)), tensorOf(c.x, x), tensorOf(ys, dy))
	nnCheckScaled(t, "conv_weight_grad "+out.Type.String(), kernels.View[T](out), want, mag, tol)
}

// nnCheckScaled fails unless |got - want| <= tol·mag elementwise, where mag
// is the sum of the magnitudes of the terms of want (the scale of the
// rounding error of any summation order).
func nnCheckScaled[T float](t *testing.T, what string, got []T, want, mag []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i, g := range got {
		if d := math.Abs(float64(g) - want[i]); !(d <= tol*mag[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, g, want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements wrong", what, bad)
	}
}

// nnIota returns 1, 2, ..., n times sign.
func nnIota(n int, sign float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = sign * float64(i+1)
	}
	return out
}

// TestConvValues checks hand-computed convolutions (cross-correlation, as
// PyTorch: the kernel is not flipped).
func TestConvValues(t *testing.T) {
	tests := []struct {
		name   string
		op     ir.Op
		attrs  ir.Attrs
		x, w   []int
		xv, wv []float64
		bias   []float64
		want   []float64
	}{
		// out[i] = x[i-1] - x[i+1] with zero padding.
		{"conv1d padding", ir.OpConv1d, ir.MakeAttrs("padding", ir.Ints(1)), []int{1, 1, 4}, []int{1, 1, 3},
			[]float64{1, 2, 3, 4}, []float64{1, 0, -1}, nil, []float64{-2, -2, -2, 3}},
		{"conv1d bias stride", ir.OpConv1d, ir.MakeAttrs("padding", ir.Ints(1), "stride", ir.Ints(2)), []int{1, 1, 4}, []int{1, 1, 3},
			[]float64{1, 2, 3, 4}, []float64{1, 0, -1}, []float64{0.5}, []float64{-1.5, -1.5}},
		{"conv2d", ir.OpConv2d, nil, []int{1, 1, 3, 3}, []int{1, 1, 2, 2},
			nnIota(9, 1), []float64{1, 2, 3, 4}, nil, []float64{37, 47, 67, 77}},
		// Dilation 2 picks the corners of the 3x3 input.
		{"conv2d dilation", ir.OpConv2d, ir.MakeAttrs("dilation", ir.Ints(2, 2)), []int{1, 1, 3, 3}, []int{1, 1, 2, 2},
			nnIota(9, 1), []float64{1, 2, 3, 4}, []float64{-1}, []float64{1 + 6 + 21 + 36 - 1}},
		// Depthwise: each channel with its own filter.
		{"conv1d depthwise", ir.OpConv1d, ir.MakeAttrs("groups", ir.Int(2)), []int{1, 2, 2}, []int{2, 1, 2},
			[]float64{1, 2, 3, 4}, []float64{1, 1, 10, -1}, nil, []float64{3, 26}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nnConvValues[float32](t, tc.op, tc.attrs, tc.x, tc.w, tc.xv, tc.wv, tc.bias, tc.want)
			nnConvValues[float64](t, tc.op, tc.attrs, tc.x, tc.w, tc.xv, tc.wv, tc.bias, tc.want)
		})
	}
}

func nnConvValues[T float](t *testing.T, op ir.Op, attrs ir.Attrs, x, w []int, xv, wv, bias, want []float64) {
	t.Helper()
	args := []kernels.Tensor{tensorOf(x, conv[T](xv)), tensorOf(w, conv[T](wv))}
	if bias != nil {
		args = append(args, tensorOf([]int{len(bias)}, conv[T](bias)))
	}
	out := mustRun(t, op, attrs, args...)
	checkEqual(t, out.Type.String(), kernels.View[T](out), conv[T](want))
}

// TestConvEdgeShapes runs the convolution ops on empty batches, channels
// and inputs that padding alone makes convolvable; none may panic, and
// empty sums are 0 (plus the bias).
func TestConvEdgeShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		x, w  []int
		attrs ir.Attrs
	}{
		{"empty batch", []int{0, 2, 5}, []int{3, 2, 2}, nil},
		{"no input channels", []int{2, 0, 4}, []int{3, 0, 2}, nil},
		{"no output channels", []int{2, 2, 3, 3}, []int{0, 2, 2, 2}, nil},
		{"empty input padded", []int{1, 2, 0}, []int{2, 2, 1}, ir.MakeAttrs("padding", ir.Ints(1))},
		{"empty rows padded", []int{1, 1, 0, 2}, []int{1, 1, 1, 1}, ir.MakeAttrs("padding", ir.Ints(1))},
		{"kernel as large as padded input", []int{1, 1, 2, 1}, []int{1, 1, 4, 3}, ir.MakeAttrs("padding", ir.Ints(1))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nnConvEdge[float32](t, tc.x, tc.w, tc.attrs)
			nnConvEdge[float64](t, tc.x, tc.w, tc.attrs)
		})
	}
}

func nnConvEdge[T float](t *testing.T, xs, ws []int, attrs ir.Attrs) {
	op := ir.OpConv1d
	if len(xs) == 4 {
		op = ir.OpConv2d
	}
	r := newRand(3)
	x := tensorOf(xs, randVals[T](r, ir.Shape(xs).NumElements(), false))
	w := tensorOf(ws, randVals[T](r, ir.Shape(ws).NumElements(), false))
	bias := tensorOf([]int{ws[0]}, randVals[T](r, ws[0], false))
	y := mustRun(t, op, attrs, x, w)
	yb := mustRun(t, op, attrs, x, w, bias)
	g, err := ir.ConvGeometry(ir.Shape(xs), ir.Shape(ws), attrs)
	if err != nil {
		t.Fatal(err)
	}
	if g.CIn == 0 || ir.Shape(xs)[2:].NumElements() == 0 {
		// Nothing to sum: the result is 0, or the bias.
		per := g.OutShape()[2:].NumElements()
		for i, v := range kernels.View[T](y) {
			if v != 0 || kernels.View[T](yb)[i] != kernels.View[T](bias)[(i/per)%g.COut] {
				t.Fatalf("element %d: %v and %v with bias, want 0 and the bias", i, v, kernels.View[T](yb)[i])
			}
		}
	}
	dy := tensorOf(g.OutShape(), randVals[T](r, g.OutShape().NumElements(), false))
	dx := mustRun(t, ir.OpConvInputGrad, attrs.With("input_shape", ir.Ints(xs...)), dy, w)
	dw := mustRun(t, ir.OpConvWeightGrad, attrs.With("weight_shape", ir.Ints(ws...)), x, dy)
	for _, o := range []kernels.Tensor{dx, dw} {
		if g.N == 0 || g.COut == 0 || ir.Shape(xs)[2:].NumElements() == 0 {
			for i, v := range kernels.View[T](o) {
				if v != 0 {
					t.Fatalf("%s element %d = %v, want 0", o.Type, i, v)
				}
			}
		}
	}
}

// TestNNBuildRejectsBadNodes checks that the layer kernels refuse nodes
// that ir's inference rejects, with the reason.
func TestNNBuildRejectsBadNodes(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"conv groups", kernels.Node{Op: ir.OpConv1d, Attrs: ir.MakeAttrs("groups", ir.Int(2)), Args: []ir.Type{f32(1, 3, 5), f32(2, 1, 3)}, Out: f32(1, 2, 3)}, "must divide"},
		{"conv weight channels", kernels.Node{Op: ir.OpConv2d, Args: []ir.Type{f32(1, 3, 5, 5), f32(2, 2, 3, 3)}, Out: f32(1, 2, 3, 3)}, "expected weight [2,3,...]"},
		{"conv too few args", kernels.Node{Op: ir.OpConv1d, Args: []ir.Type{f32(1, 3, 5)}, Out: f32(1, 2, 3)}, "takes 2 to 3 arguments"},
		{"conv output too small", kernels.Node{Op: ir.OpConv1d, Args: []ir.Type{f32(1, 1, 2), f32(1, 1, 3)}, Out: f32(1, 1, 1)}, "output size is too small"},
		{"conv bias", kernels.Node{Op: ir.OpConv1d, Args: []ir.Type{f32(1, 1, 4), f32(2, 1, 3), f32(1)}, Out: f32(1, 2, 2)}, "expected bias [2]"},
		{"conv stride list", kernels.Node{Op: ir.OpConv2d, Attrs: ir.MakeAttrs("stride", ir.Ints(1, 1, 1)), Args: []ir.Type{f32(1, 1, 4, 4), f32(1, 1, 3, 3)}, Out: f32(1, 1, 2, 2)}, "expected 1 or 2"},
		{"conv zero stride", kernels.Node{Op: ir.OpConv1d, Attrs: ir.MakeAttrs("stride", ir.Ints(0)), Args: []ir.Type{f32(1, 1, 4), f32(1, 1, 3)}, Out: f32(1, 1, 2)}, "at least 1"},
		{"conv_input_grad dy", kernels.Node{Op: ir.OpConvInputGrad, Attrs: ir.MakeAttrs("input_shape", ir.Ints(1, 1, 4)), Args: []ir.Type{f32(1, 1, 3), f32(1, 1, 3)}, Out: f32(1, 1, 4)}, "expected dy [1,1,2]"},
		{"pool padding", kernels.Node{Op: ir.OpMaxPool2d, Attrs: ir.MakeAttrs("kernel", ir.Ints(2), "padding", ir.Ints(2)), Args: []ir.Type{f32(1, 1, 4, 4)}, Out: f32(1, 1, 4, 4)}, "at most half the kernel"},
		{"pool rank", kernels.Node{Op: ir.OpAvgPool2d, Attrs: ir.MakeAttrs("kernel", ir.Ints(2)), Args: []ir.Type{f32(4, 4)}, Out: f32(2, 2)}, "expected an input [N,C,H,W] or [C,H,W]"},
		{"pool empty channel", kernels.Node{Op: ir.OpMaxPool2d, Attrs: ir.MakeAttrs("kernel", ir.Ints(1)), Args: []ir.Type{f32(1, 0, 4, 4)}, Out: f32(1, 0, 4, 4)}, "non-zero"},
		{"layer_norm axes", kernels.Node{Op: ir.OpLayerNorm, Attrs: ir.MakeAttrs("axes", ir.Ints(0)), Args: []ir.Type{f32(2, 3)}, Out: f32(2, 3)}, "must be the last 1 axes"},
		{"layer_norm weight", kernels.Node{Op: ir.OpLayerNorm, Attrs: ir.MakeAttrs("axes", ir.Ints(-2, -1)), Args: []ir.Type{f32(2, 3, 4), f32(4)}, Out: f32(2, 3, 4)}, "expected weight [3,4]"},
		{"batch_norm one value", kernels.Node{Op: ir.OpBatchNorm, Args: []ir.Type{f32(1, 3), f32(3), f32(3)}, Out: f32(1, 3)}, "more than 1 value per channel"},
		{"dropout p", kernels.Node{Op: ir.OpDropout, Attrs: ir.MakeAttrs("p", ir.Float(1.5), "seed", ir.Int(0)), Args: []ir.Type{f32(3)}, Out: f32(3)}, "between 0 and 1"},
		{"dropout int", kernels.Node{Op: ir.OpDropout, Attrs: ir.MakeAttrs("p", ir.Float(0.5), "seed", ir.Int(0)), Args: []ir.Type{ir.TensorOf(ir.I32, 3)}, Out: ir.TensorOf(ir.I32, 3)}, "no dropout kernel"},
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

// TestPoolValues checks hand-computed poolings of one 4x4 plane.
func TestPoolValues(t *testing.T) {
	ka := func(kv ...any) ir.Attrs { return ir.MakeAttrs(kv...) }
	tests := []struct {
		name  string
		op    ir.Op
		attrs ir.Attrs
		x     []float64
		want  []float64
	}{
		{"max", ir.OpMaxPool2d, ka("kernel", ir.Ints(2)), nnIota(16, 1), []float64{6, 8, 14, 16}},
		// -inf padding: with zero padding these maxima would be 0.
		{"max padding", ir.OpMaxPool2d, ka("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1)), nnIota(16, -1), []float64{-1, -2, -5, -6}},
		// Taps at rows and columns 0 and 2: 1, 3, 9, 11.
		{"max dilation", ir.OpMaxPool2d, ka("kernel", ir.Ints(2, 2), "dilation", ir.Ints(2)), nnIota(16, 1), []float64{11}},
		{"max stride 1", ir.OpMaxPool2d, ka("kernel", ir.Ints(3, 2), "stride", ir.Ints(1)), nnIota(16, 1), []float64{10, 11, 12, 14, 15, 16}},
		{"max stride []", ir.OpMaxPool2d, ka("kernel", ir.Ints(2), "stride", ir.Ints()), nnIota(16, 1), []float64{6, 8, 14, 16}},
		{"avg", ir.OpAvgPool2d, ka("kernel", ir.Ints(2)), nnIota(16, 1), []float64{3.5, 5.5, 11.5, 13.5}},
		// Windows rows/cols [-1,1] and [1,3]: sums 14, 30, 57, 99 over 9
		// (padding counted) or over the 4, 6, 6, 9 input elements.
		{"avg padding", ir.OpAvgPool2d, ka("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1)), nnIota(16, 1), []float64{14.0 / 9, 30.0 / 9, 57.0 / 9, 11}},
		{"avg padding excluded", ir.OpAvgPool2d, ka("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1), "count_include_pad", ir.BoolAttr(false)), nnIota(16, 1), []float64{3.5, 5, 9.5, 11}},
		{"avg rectangular", ir.OpAvgPool2d, ka("kernel", ir.Ints(1, 4), "stride", ir.Ints(2, 1)), nnIota(16, 1), []float64{2.5, 10.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nnPoolValues[float32](t, tc.op, tc.attrs, tc.x, tc.want)
			nnPoolValues[float64](t, tc.op, tc.attrs, tc.x, tc.want)
		})
	}
}

func nnPoolValues[T float](t *testing.T, op ir.Op, attrs ir.Attrs, x, want []float64) {
	t.Helper()
	// As [1,1,4,4] and as the unbatched [1,4,4].
	for _, shape := range [][]int{{1, 1, 4, 4}, {1, 4, 4}} {
		out := mustRun(t, op, attrs, tensorOf(shape, conv[T](x)))
		checkNear(t, out.Type.String(), kernels.View[T](out), want, rel[T](), 0)
	}
}

// TestMaxPoolArgmax checks where max_pool2d_grad sends each window's
// gradient and what max_pool2d_select takes: the first maximum on ties, the
// last NaN, and the first tap of an all -inf window, as PyTorch's CPU
// kernel (val > maxval || isnan(val), starting from -inf at the first tap).
func TestMaxPoolArgmax(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	type tcase struct {
		name     string
		x        []float64
		wantY    []float64
		wantGrad []float64
	}
	cases := []tcase{
		{"distinct", []float64{1, 2, 5, 3, 4, 0, 7, 6}, []float64{4, 7}, []float64{0, 0, 0, 0, 10, 0, 20, 0}},
		{"ties", []float64{3, 1, 2, 2, 3, 3, 2, 2}, []float64{3, 2}, []float64{10, 0, 20, 0, 0, 0, 0, 0}},
		// Window 1 (taps 0, 1, 4, 5) holds NaN at 0 and 5, window 2 (taps
		// 2, 3, 6, 7) at 3 and 6: the last NaN wins.
		{"nan", []float64{nan, 1, 2, nan, 5, nan, nan, 9}, []float64{nan, nan}, []float64{0, 0, 0, 0, 0, 10, 20, 0}},
		{"all -inf", []float64{-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf}, []float64{-inf, -inf}, []float64{10, 0, 20, 0, 0, 0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nnMaxPoolArgmax[float32](t, tc.x, tc.wantY, tc.wantGrad)
			nnMaxPoolArgmax[float64](t, tc.x, tc.wantY, tc.wantGrad)
		})
	}
}

func nnMaxPoolArgmax[T float](t *testing.T, x, wantY, wantGrad []float64) {
	t.Helper()
	attrs := ir.MakeAttrs("kernel", ir.Ints(2))
	xt := tensorOf([]int{1, 1, 2, 4}, conv[T](x))
	y := mustRun(t, ir.OpMaxPool2d, attrs, xt)
	checkEqual(t, "max_pool2d", kernels.View[T](y), conv[T](wantY))
	dy := tensorOf([]int{1, 1, 1, 2}, conv[T]([]float64{10, 20}))
	dx := mustRun(t, ir.OpMaxPool2dGrad, attrs, dy, xt)
	checkEqual(t, "max_pool2d_grad", kernels.View[T](dx), conv[T](wantGrad))
	// select is the transpose: g = 1..8 taken at the same positions.
	g := tensorOf([]int{1, 1, 2, 4}, conv[T](nnIota(8, 1)))
	s := mustRun(t, ir.OpMaxPool2dSelect, attrs, g, xt)
	var want []float64
	for i, v := range wantGrad {
		if v != 0 {
			want = append(want, float64(i+1))
		}
	}
	checkEqual(t, "max_pool2d_select", kernels.View[T](s), conv[T](want))
}

// TestPoolGradValues checks pooling gradients by hand: overlapping windows
// add, and the avg divisor follows count_include_pad.
func TestPoolGradValues(t *testing.T) {
	ones := []float64{1, 1, 1, 1}
	// 2x2 windows at stride 1 over 3x3: an element gets 1/4 per window it is in.
	nnAvgGrad[float32](t, ir.MakeAttrs("kernel", ir.Ints(2), "stride", ir.Ints(1)), []int{1, 1, 3, 3}, ones,
		[]float64{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25})
	nnAvgGrad[float64](t, ir.MakeAttrs("kernel", ir.Ints(2), "stride", ir.Ints(1)), []int{1, 1, 3, 3}, ones,
		[]float64{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25})
	// 3x3 windows, padding 1, stride 2, over 3x3: window (0,0) covers rows
	// and cols 0..1, (0,1) rows 0..1 and col 1..2, and so on; with the
	// padding counted every window divides by 9, without it by 4.
	pad := ir.MakeAttrs("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1))
	nnAvgGrad[float64](t, pad, []int{1, 3, 3}, ones,
		[]float64{1.0 / 9, 2.0 / 9, 1.0 / 9, 2.0 / 9, 4.0 / 9, 2.0 / 9, 1.0 / 9, 2.0 / 9, 1.0 / 9})
	nnAvgGrad[float32](t, pad.With("count_include_pad", ir.BoolAttr(false)), []int{1, 3, 3}, ones,
		[]float64{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25})
	// max_pool2d_grad with overlapping windows adds at a shared arg max.
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		x := []float64{1, 2, 3, 4, 9, 5, 6, 7, 8}
		attrs := ir.MakeAttrs("kernel", ir.Ints(2), "stride", ir.Ints(1))
		want := []float64{0, 0, 0, 0, 1 + 2 + 3 + 4, 0, 0, 0, 0}
		if dt == ir.F32 {
			dx := mustRun(t, ir.OpMaxPool2dGrad, attrs, tensorOf([]int{1, 1, 2, 2}, conv[float32]([]float64{1, 2, 3, 4})), tensorOf([]int{1, 1, 3, 3}, conv[float32](x)))
			checkEqual(t, "max_pool2d_grad", kernels.View[float32](dx), conv[float32](want))
		} else {
			dx := mustRun(t, ir.OpMaxPool2dGrad, attrs, tensorOf([]int{1, 1, 2, 2}, []float64{1, 2, 3, 4}), tensorOf([]int{1, 1, 3, 3}, x))
			checkEqual(t, "max_pool2d_grad", kernels.View[float64](dx), want)
		}
	}
}

func nnAvgGrad[T float](t *testing.T, attrs ir.Attrs, in []int, dy, want []float64) {
	t.Helper()
	g, err := ir.PoolGeometry(in, attrs)
	if err != nil {
		t.Fatal(err)
	}
	dx := mustRun(t, ir.OpAvgPool2dGrad, attrs.With("input_shape", ir.Ints(in...)), tensorOf(g.OutShape(), conv[T](dy)))
	checkNear(t, dx.Type.String(), kernels.View[T](dx), want, rel[T](), 0)
}

// TestPoolEdgeShapes runs the pooling ops on an empty batch and a window
// as large as the padded input.
func TestPoolEdgeShapes(t *testing.T) {
	for _, tc := range []struct {
		x     []int
		attrs ir.Attrs
	}{
		{[]int{0, 2, 4, 4}, ir.MakeAttrs("kernel", ir.Ints(2))},
		{[]int{2, 1, 1}, ir.MakeAttrs("kernel", ir.Ints(3), "padding", ir.Ints(1))},
		{[]int{1, 1, 2, 3}, ir.MakeAttrs("kernel", ir.Ints(2, 3), "stride", ir.Ints(5))},
	} {
		for _, op := range []ir.Op{ir.OpMaxPool2d, ir.OpAvgPool2d} {
			x := tensorOf(tc.x, randVals[float64](newRand(1), ir.Shape(tc.x).NumElements(), false))
			y := mustRun(t, op, tc.attrs, x)
			dy := tensorOf(y.Type.Shape, randVals[float64](newRand(2), y.Type.Shape.NumElements(), false))
			if op == ir.OpMaxPool2d {
				mustRun(t, ir.OpMaxPool2dGrad, tc.attrs, dy, x)
				mustRun(t, ir.OpMaxPool2dSelect, tc.attrs, x, x)
			} else {
				mustRun(t, ir.OpAvgPool2dGrad, tc.attrs.With("input_shape", ir.Ints(tc.x...)), dy)
			}
		}
	}
}

// nnGroupStats returns the mean and biased variance of the groups of x
// given by group(i) (an element's group index, ng groups), and their
// sizes, in float64.
func nnGroupStats(x []float64, ng int, group func(i int) int) (mean, variance, cnt []float64) {
	mean, variance, cnt = make([]float64, ng), make([]float64, ng), make([]float64, ng)
	for i, v := range x {
		mean[group(i)] += v
		cnt[group(i)]++
	}
	for k := range mean {
		mean[k] /= cnt[k]
	}
	for i, v := range x {
		d := v - mean[group(i)]
		variance[group(i)] += d * d
	}
	for k := range variance {
		variance[k] /= cnt[k]
	}
	return mean, variance, cnt
}

// nnNormRef normalizes groups of x given by group(i) (an element's group
// index, ng groups) in float64: (x - mean) / sqrt(var + eps), biased
// variance.
func nnNormRef(x []float64, ng int, group func(i int) int, eps float64) []float64 {
	mean, variance, _ := nnGroupStats(x, ng, group)
	out := make([]float64, len(x))
	for i, v := range x {
		g := group(i)
		out[i] = (v - mean[g]) / math.Sqrt(variance[g]+eps)
	}
	return out
}

// TestLayerNormValues checks layer_norm against the formula, with and
// without weight and bias, over one and two axes.
func TestLayerNormValues(t *testing.T) {
	// By hand: [1,2,3,4] has mean 2.5 and biased variance 1.25.
	s := 1 / math.Sqrt(1.25+1e-5)
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		want := []float64{-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s}
		if dt == ir.F32 {
			out := mustRun(t, ir.OpLayerNorm, nil, tensorOf([]int{4}, []float32{1, 2, 3, 4}))
			checkNear(t, "f32", kernels.View[float32](out), want, 4*relF32, 0)
		} else {
			out := mustRun(t, ir.OpLayerNorm, nil, tensorOf([]int{4}, []float64{1, 2, 3, 4}))
			checkNear(t, "f64", kernels.View[float64](out), want, 4*relF64, 0)
		}
	}
	for _, tc := range []struct {
		x     []int
		axes  []int
		eps   float64
		nargs int
	}{
		{[]int{3, 5}, []int{-1}, 1e-5, 1},
		{[]int{3, 5}, []int{1}, 1e-5, 2},
		{[]int{2, 3, 4}, []int{-1}, 0.1, 3},
		{[]int{2, 3, 4}, []int{1, 2}, 1e-5, 3},
		{[]int{2, 3, 4}, []int{-2, -1}, 1e-3, 2},
		{[]int{2, 3, 4}, []int{0, 1, 2}, 1e-5, 1},
		{[]int{2, 1}, []int{-1}, 1e-5, 3}, // one element per row: (x - x) = 0, then the bias
		{[]int{0, 3}, []int{-1}, 1e-5, 3},
		{[]int{3, 0}, []int{-1}, 1e-5, 3},
	} {
		t.Run(fmt.Sprint(tc.x, tc.axes, tc.nargs), func(t *testing.T) {
			nnLayerNorm[float32](t, tc.x, tc.axes, tc.eps, tc.nargs)
			nnLayerNorm[float64](t, tc.x, tc.axes, tc.eps, tc.nargs)
		})
	}
}

func nnLayerNorm[T float](t *testing.T, xs, axes []int, eps float64, nargs int) {
	r := newRand(5)
	shape := ir.Shape(xs)
	start := len(xs) - len(axes)
	m := shape[start:].NumElements()
	x := randVals[T](r, shape.NumElements(), false)
	w := randVals[T](r, m, false)
	b := randVals[T](r, m, false)
	args := []kernels.Tensor{tensorOf(xs, x), tensorOf(xs[start:], w), tensorOf(xs[start:], b)}[:nargs]
	out := mustRun(t, ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(axes...), "eps", ir.Float(eps)), args...)
	want := nnNormRef(f64s(x), max(shape[:start].NumElements(), 1), func(i int) int { return i / max(m, 1) }, eps)
	for i := range want {
		if nargs > 1 {
			want[i] *= float64(w[i%m])
		}
		if nargs > 2 {
			want[i] += float64(b[i%m])
		}
	}
	checkNear(t, out.Type.String(), kernels.View[T](out), want, 50*rel[T](), 50*rel[T]())
}

// TestLayerNormGradValues checks layer_norm_grad against the formula in
// float64, dx = rstd·(g - mean(g) - xhat·mean(g·xhat)) with g = dy·weight,
// with and without weight, over one and two axes, one element a row and
// empty tensors.
func TestLayerNormGradValues(t *testing.T) {
	for _, tc := range []struct {
		x      []int
		axes   []int
		eps    float64
		weight bool
	}{
		{[]int{3, 5}, []int{-1}, 1e-5, false},
		{[]int{3, 5}, []int{1}, 1e-5, true},
		{[]int{2, 3, 40}, []int{-1}, 0.1, true},
		{[]int{2, 3, 4}, []int{1, 2}, 1e-3, true},
		{[]int{2, 3, 4}, []int{0, 1, 2}, 1e-5, false},
		{[]int{2, 1}, []int{-1}, 1e-5, true}, // one element a row: dx = 0
		{[]int{0, 3}, []int{-1}, 1e-5, true},
		{[]int{3, 0}, []int{-1}, 1e-5, true},
	} {
		t.Run(fmt.Sprint(tc.x, tc.axes, tc.weight), func(t *testing.T) {
			nnLayerNormGrad[float32](t, tc.x, tc.axes, tc.eps, tc.weight)
			nnLayerNormGrad[float64](t, tc.x, tc.axes, tc.eps, tc.weight)
		})
	}
}

func nnLayerNormGrad[T float](t *testing.T, xs, axes []int, eps float64, weight bool) {
	r := newRand(7)
	shape := ir.Shape(xs)
	start := len(xs) - len(axes)
	m, rows := shape[start:].NumElements(), shape[:start].NumElements()
	x := randVals[T](r, shape.NumElements(), false)
	dy := randVals[T](r, shape.NumElements(), false)
	w := randVals[T](r, m, false)
	args := []kernels.Tensor{tensorOf(xs, dy), tensorOf(xs, x)}
	wOf := func(int) float64 { return 1 }
	if weight {
		args = append(args, tensorOf(xs[start:], w))
		wOf = func(i int) float64 { return float64(w[i%m]) }
	}
	out := mustRun(t, ir.OpLayerNormGrad, ir.MakeAttrs("axes", ir.Ints(axes...), "eps", ir.Float(eps)), args...)
	want := nnNormGradRef(f64s(x), f64s(dy), wOf, max(rows, 1), func(i int) int { return i / max(m, 1) }, eps)
	checkNear(t, out.Type.String(), kernels.View[T](out), want, 200*rel[T](), 200*rel[T]())
}

// nnNormGradRef returns the gradient of normalizing x in ng groups (element
// i in group(i)) and scaling by w(i), given dy, in float64: per group
// rstd·(g - mean(g) - xhat·mean(g·xhat)) with g = dy·w.
func nnNormGradRef(x, dy []float64, w func(i int) float64, ng int, group func(i int) int, eps float64) []float64 {
	xhat := nnNormRef(x, ng, group, eps)
	_, variance, cnt := nnGroupStats(x, ng, group)
	sg, sgx := make([]float64, ng), make([]float64, ng)
	for i := range x {
		g := dy[i] * w(i)
		sg[group(i)] += g
		sgx[group(i)] += g * xhat[i]
	}
	out := make([]float64, len(x))
	for i := range x {
		k := group(i)
		rstd := 1 / math.Sqrt(variance[k]+eps)
		out[i] = rstd * (dy[i]*w(i) - sg[k]/cnt[k] - xhat[i]*sgx[k]/cnt[k])
	}
	return out
}

// TestBatchNormValues checks batch_norm (training statistics over every
// axis but 1) against the formula.
func TestBatchNormValues(t *testing.T) {
	// By hand: channel 0 holds 1, 3 (mean 2, variance 1), channel 1 holds
	// 2, 2 (variance 0, so the result is the bias).
	s := 1 / math.Sqrt(1+1e-5)
	out := mustRun(t, ir.OpBatchNorm, nil, tensorOf([]int{2, 2}, []float64{1, 2, 3, 2}), tensorOf([]int{2}, []float64{2, 3}), tensorOf([]int{2}, []float64{0.5, -1}))
	checkNear(t, "f64", kernels.View[float64](out), []float64{-2*s + 0.5, -1, 2*s + 0.5, -1}, 4*relF64, 0)
	for _, xs := range [][]int{{4, 3}, {2, 3, 5}, {3, 2, 2, 3}, {1, 2, 1, 2}, {0, 3, 2}, {2, 3, 0}, {2, 0, 4}} {
		t.Run(fmt.Sprint(xs), func(t *testing.T) {
			nnBatchNorm[float32](t, xs)
			nnBatchNorm[float64](t, xs)
		})
	}
}

func nnBatchNorm[T float](t *testing.T, xs []int) {
	r := newRand(6)
	shape := ir.Shape(xs)
	c, sp := xs[1], shape[2:].NumElements()
	x := randVals[T](r, shape.NumElements(), false)
	w := randVals[T](r, c, false)
	b := randVals[T](r, c, false)
	out := mustRun(t, ir.OpBatchNorm, ir.MakeAttrs("eps", ir.Float(1e-3)), tensorOf(xs, x), tensorOf([]int{c}, w), tensorOf([]int{c}, b))
	ch := func(i int) int { return (i / max(sp, 1)) % max(c, 1) }
	want := nnNormRef(f64s(x), max(c, 1), ch, 1e-3)
	for i := range want {
		want[i] = want[i]*float64(w[ch(i)]) + float64(b[ch(i)])
	}
	checkNear(t, out.Type.String(), kernels.View[T](out), want, 50*rel[T](), 50*rel[T]())
}

// nnDropoutRef is the mask of dropout written from its specification (the
// comment in dropout.go), independently of the kernel's helpers.
func nnDropoutRef(seed, step, i uint64, p float64) bool {
	h := func(v uint32) uint32 {
		s := v*747796405 + 2891336453
		w := ((s >> ((s >> 28) + 4)) ^ s) * 277803737
		return (w >> 22) ^ w
	}
	key := h(uint32(step>>32) ^ h(uint32(step)^h(uint32(seed>>32)^h(uint32(seed)))))
	bits := h(uint32(i>>32)^h(uint32(i)^key)) >> 8
	return float64(bits) >= p*(1<<24)
}

// TestDropoutValues checks dropout's mask against its specification,
// PyTorch's scaling (x * mask / (1-p), computed as x * (1/(1-p)) in the
// element type), p = 0 and p = 1, and the keep rate.
func TestDropoutValues(t *testing.T) {
	const n = 1000
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i%7) - 2.5
	}
	for _, p := range []float64{0, 0.1, 0.5, 0.9, 1} {
		for _, seed := range []int{0, 7, -3} {
			nnDropoutCheck[float32](t, x, p, seed, 0)
			nnDropoutCheck[float64](t, x, p, seed, 5)
		}
	}
	// p = 1 multiplies by 0, so NaN and Inf give NaN, as PyTorch's
	// input * zeros.
	inf := math.Inf(1)
	attrs := ir.MakeAttrs("p", ir.Float(1))
	out := mustRun(t, ir.OpDropout, attrs, tensorOf([]int{3}, []float64{math.NaN(), inf, -2}))
	checkEqual(t, "p=1", kernels.View[float64](out), []float64{math.NaN(), math.NaN(), 0})
	// The keep rate over many elements is 1 - p.
	big := tensorOf([]int{200000}, make([]float32, 200000))
	for i := range kernels.View[float32](big) {
		kernels.View[float32](big)[i] = 1
	}
	out = mustRun(t, ir.OpDropout, ir.MakeAttrs("p", ir.Float(0.3), "seed", ir.Int(11)), big)
	kept := 0
	for _, v := range kernels.View[float32](out) {
		if v != 0 {
			kept++
		}
	}
	if rate := float64(kept) / 200000; math.Abs(rate-0.7) > 0.005 {
		t.Errorf("keep rate %v, want 0.7", rate)
	}
	// Pinned values: the mask is a stable contract (a GPU kernel must
	// reproduce it), so a change to the hash shows up here.
	var got strings.Builder
	for i := range 32 {
		if dropoutBits(dropoutKey(0, 0), uint64(i)) >= dropoutThreshold(0.5) {
			got.WriteByte('1')
		} else {
			got.WriteByte('0')
		}
	}
	if want := nnDropoutPinned; got.String() != want {
		t.Errorf("mask of seed 0, step 0, p 0.5 = %s, want %s", got.String(), want)
	}
}

// nnDropoutPinned is the keep mask of elements 0..31 for seed 0, step 0,
// p = 0.5.
const nnDropoutPinned = "00001000100101010011110110101011"

func nnDropoutCheck[T float](t *testing.T, x []float64, p float64, seed int, step int64) {
	t.Helper()
	n := node(t, ir.OpDropout, ir.MakeAttrs("p", ir.Float(p), "seed", ir.Int(seed)), ir.TensorOf(kernels.DTypeOf[T](), len(x)))
	n.Step = &step
	f, err := Kernels.Build(n)
	if err != nil {
		t.Fatal(err)
	}
	exercised.Lock()
	exercised.m[kernels.Key{Op: ir.OpDropout, DType: n.Out.DType}] = true
	exercised.Unlock()
	out := emptyOf(n.Out)
	if err := f(out, []kernels.Tensor{tensorOf([]int{len(x)}, conv[T](x))}); err != nil {
		t.Fatal(err)
	}
	scale := T(1) / T(1-p)
	want := make([]T, len(x))
	for i, v := range x {
		if nnDropoutRef(uint64(seed), uint64(step), uint64(i), p) {
			want[i] = T(v) * scale
		}
	}
	checkEqual(t, fmt.Sprintf("dropout p=%v seed=%d step=%d %s", p, seed, step, n.Out), kernels.View[T](out), want)
}

// TestDropoutStep checks that the mask follows the step the executor
// publishes through Node.Step: another step gives another mask, the same
// step the same one.
func TestDropoutStep(t *testing.T) {
	var step int64
	n := node(t, ir.OpDropout, ir.MakeAttrs("p", ir.Float(0.5), "seed", ir.Int(1)), ir.TensorOf(ir.F64, 64))
	n.Step = &step
	f, err := Kernels.Build(n)
	if err != nil {
		t.Fatal(err)
	}
	x := tensorOf([]int{64}, make([]float64, 64))
	for i := range kernels.View[float64](x) {
		kernels.View[float64](x)[i] = 1
	}
	mask := func() string {
		out := emptyOf(n.Out)
		if err := f(out, []kernels.Tensor{x}); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(kernels.View[float64](out))
	}
	m0 := mask()
	step = 1
	m1 := mask()
	step = 0
	if m0 == m1 {
		t.Errorf("steps 0 and 1 give the same mask %s", m0)
	}
	if again := mask(); again != m0 {
		t.Errorf("step 0 gives %s, then %s", m0, again)
	}
}

// TestNNFuncsDoNotAllocate checks that no layer Func allocates per call,
// run alone and split into parts (every convolution split).
func TestNNFuncsDoNotAllocate(t *testing.T) {
	defer func(v int) { convSplitMACs = v }(convSplitMACs)
	convSplitMACs = 1
	r := newRand(9)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	pool := ir.MakeAttrs("kernel", ir.Ints(3), "stride", ir.Ints(2), "padding", ir.Ints(1))
	cv := ir.MakeAttrs("stride", ir.Ints(2), "padding", ir.Ints(1), "dilation", ir.Ints(2), "groups", ir.Int(2))
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{ir.OpConv1d, cv, []kernels.Tensor{f32(2, 4, 9), f32(6, 2, 3), f32(6)}},
		{ir.OpConv2d, cv, []kernels.Tensor{f32(2, 4, 8, 7), f32(4, 2, 3, 3)}},
		{ir.OpConvInputGrad, cv.With("input_shape", ir.Ints(2, 4, 8, 7)), []kernels.Tensor{f32(2, 4, 3, 3), f32(4, 2, 3, 3)}},
		{ir.OpConvWeightGrad, cv.With("weight_shape", ir.Ints(4, 2, 3, 3)), []kernels.Tensor{f32(2, 4, 8, 7), f32(2, 4, 3, 3)}},
		{ir.OpMaxPool2d, pool, []kernels.Tensor{f32(2, 3, 6, 5)}},
		{ir.OpMaxPool2dGrad, pool, []kernels.Tensor{f32(2, 3, 3, 3), f32(2, 3, 6, 5)}},
		{ir.OpMaxPool2dSelect, pool, []kernels.Tensor{f32(2, 3, 6, 5), f32(2, 3, 6, 5)}},
		{ir.OpAvgPool2d, pool, []kernels.Tensor{f32(2, 3, 6, 5)}},
		{ir.OpAvgPool2dGrad, pool.With("input_shape", ir.Ints(2, 3, 6, 5)), []kernels.Tensor{f32(2, 3, 3, 3)}},
		{ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(-2, -1)), []kernels.Tensor{f32(2, 3, 4), f32(3, 4), f32(3, 4)}},
		{ir.OpLayerNormGrad, ir.MakeAttrs("axes", ir.Ints(-2, -1)), []kernels.Tensor{f32(2, 3, 4), f32(2, 3, 4), f32(3, 4)}},
		{ir.OpBatchNorm, nil, []kernels.Tensor{f32(2, 3, 4), f32(3), f32(3)}},
		{ir.OpDropout, nil, []kernels.Tensor{f32(4, 5)}},
	}
	for _, tc := range tests {
		for _, par := range []kernels.Parallel{nil, seqPool(3)} {
			t.Run(fmt.Sprintf("%s/workers=%d", tc.op, kernels.Workers(par)), func(t *testing.T) {
				n := node(t, tc.op, tc.attrs, typesOf(tc.args)...)
				n.Par = par
				var step int64 = 3
				n.Step = &step
				f, err := Kernels.Build(n)
				if err != nil {
					t.Fatal(err)
				}
				out := emptyOf(n.Out)
				allocs := testing.AllocsPerRun(20, func() {
					if err := f(out, tc.args); err != nil {
						t.Fatal(err)
					}
				})
				if allocs != 0 {
					t.Errorf("%s allocates %v times per call", n.Op, allocs)
				}
			})
		}
	}
}

// BenchmarkConv2dStep times a small CNN layer's forward and both gradients
// on a 28x28 batch (the scale of the digits example).
func BenchmarkConv2dStep(b *testing.B) {
	r := newRand(1)
	x := tensorOf([]int{32, 8, 28, 28}, randVals[float32](r, 32*8*28*28, false))
	w := tensorOf([]int{16, 8, 3, 3}, randVals[float32](r, 16*8*9, false))
	attrs := ir.MakeAttrs("padding", ir.Ints(1))
	fwd, err := Kernels.Build(node(b, ir.OpConv2d, attrs, x.Type, w.Type))
	if err != nil {
		b.Fatal(err)
	}
	dy := tensorOf([]int{32, 16, 28, 28}, randVals[float32](r, 32*16*28*28, false))
	bx, err := Kernels.Build(node(b, ir.OpConvInputGrad, attrs.With("input_shape", ir.Ints(32, 8, 28, 28)), dy.Type, w.Type))
	if err != nil {
		b.Fatal(err)
	}
	bw, err := Kernels.Build(node(b, ir.OpConvWeightGrad, attrs.With("weight_shape", ir.Ints(16, 8, 3, 3)), x.Type, dy.Type))
	if err != nil {
		b.Fatal(err)
	}
	y, dx, dw := emptyOf(dy.Type), emptyOf(x.Type), emptyOf(w.Type)
	for b.Loop() {
		_ = fwd(y, []kernels.Tensor{x, w})
		_ = bx(dx, []kernels.Tensor{dy, w})
		_ = bw(dw, []kernels.Tensor{x, dy})
	}
}

// TestNNRandomShapes sweeps random small geometries, zero sizes included:
// whatever ir's inference accepts, the layer kernels run without panicking,
// and the convolutions match the direct loop.
func TestNNRandomShapes(t *testing.T) {
	r := newRand(21)
	d := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	ran := 0
	for range 400 {
		sp := d(1, 2)
		groups := d(1, 3)
		x := []int{d(0, 2), groups * d(0, 2)}
		w := []int{groups * d(0, 2), x[1] / groups}
		var stride, pad, dil []int
		for range sp {
			x = append(x, d(0, 6))
			w = append(w, d(1, 4))
			stride, pad, dil = append(stride, d(1, 3)), append(pad, d(0, 2)), append(dil, d(1, 2))
		}
		c := nnConvCase{x: x, w: w, stride: stride, padding: pad, dilation: dil, groups: groups, bias: r.IntN(2) == 0}
		if _, err := ir.ConvGeometry(c.x, c.w, c.attrs()); err != nil {
			continue
		}
		ran++
		nnConvCheck[float64](t, c, uint64(ran))
	}
	pooled := 0
	for range 400 {
		x := []int{d(0, 2), d(0, 2), d(0, 5), d(0, 5)}[r.IntN(2):]
		k := []int{d(1, 4), d(1, 4)}
		attrs := ir.MakeAttrs("kernel", ir.Ints(k...), "stride", ir.Ints(d(1, 3), d(1, 3)), "padding", ir.Ints(d(0, 2), d(0, 2)))
		if _, err := ir.PoolGeometry(x, attrs); err != nil {
			continue
		}
		pooled++
		xt := tensorOf(x, randVals[float32](r, ir.Shape(x).NumElements(), false))
		for _, op := range []ir.Op{ir.OpMaxPool2d, ir.OpAvgPool2d} {
			a := attrs
			if op == ir.OpMaxPool2d {
				a = a.With("dilation", ir.Ints(d(1, 2), d(1, 2)))
				if _, err := ir.PoolGeometry(x, a); err != nil {
					continue
				}
			}
			y := mustRun(t, op, a, xt)
			dy := tensorOf(y.Type.Shape, randVals[float32](r, y.Type.Shape.NumElements(), false))
			if op == ir.OpMaxPool2d {
				mustRun(t, ir.OpMaxPool2dGrad, a, dy, xt)
				mustRun(t, ir.OpMaxPool2dSelect, a, xt, xt)
			} else {
				mustRun(t, ir.OpAvgPool2dGrad, a.With("input_shape", ir.Ints(x...)), dy)
			}
		}
	}
	if ran < 50 || pooled < 50 {
		t.Errorf("only %d convolutions and %d poolings were valid; widen the sweep", ran, pooled)
	}
}

// TestConvShiftedRowsBitwise checks the whole-row im2col and col2im of
// "same" convolutions (unit strides, ow = w) against the row-by-row ones:
// the same column matrix, and the same bits in the folded gradient (the
// whole-row fold adds +0 where the other skips the padding).
func TestConvShiftedRowsBitwise(t *testing.T) {
	r := newRand(29)
	shifted := 0
	for _, c := range nnConvCases {
		g, err := ir.ConvGeometry(c.x, c.w, c.attrs())
		if err != nil {
			t.Fatal(err)
		}
		p := newConvPlan(g)
		if !p.shifted {
			continue
		}
		shifted++
		const n = 3 // images, side by side in the column matrix
		x := randVals[float32](r, n*p.cg*p.hw, false)
		cols := [2][]float32{make([]float32, p.k*n*p.l), make([]float32, p.k*n*p.l)}
		dxs := [2][]float32{make([]float32, n*p.cg*p.hw), make([]float32, n*p.cg*p.hw)}
		gcol := randVals[float32](r, p.k*n*p.l, false)
		for i, shifted := range []bool{true, false} {
			p.shifted = shifted
			convIm2col(p, cols[i], n*p.l, x, p.cg*p.hw, n)
			convCol2im(p, dxs[i], p.cg*p.hw, n, append([]float32(nil), gcol...), n*p.l)
		}
		for i := range cols[0] {
			if math.Float32bits(cols[0][i]) != math.Float32bits(cols[1][i]) {
				t.Fatalf("x%v w%v: im2col element %d = %v by whole rows, %v row by row", c.x, c.w, i, cols[0][i], cols[1][i])
			}
		}
		for i := range dxs[0] {
			if math.Float32bits(dxs[0][i]) != math.Float32bits(dxs[1][i]) {
				t.Fatalf("x%v w%v: col2im element %d = %v by whole rows, %v row by row", c.x, c.w, i, dxs[0][i], dxs[1][i])
			}
		}
	}
	if shifted < 4 {
		t.Fatalf("%d of nnConvCases are same-size convolutions; the test needs several", shifted)
	}
}
