package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Convolutions and pooling: conv1d, conv2d, conv_input_grad,
// conv_weight_grad, max_pool2d (and its _grad and _select), avg_pool2d and
// avg_pool2d_grad. A 1-D convolution runs as a 2-D one of height 1. Every
// kernel is a gather: one thread computes one element of the result,
// adding its terms in a fixed order (the backward ops find the windows an
// input element belongs to from the geometry, which is static), so no two
// threads write one location and results are deterministic.

// iconsts returns WGSL const declarations of i32 values, from name, value
// pairs.
func iconsts(kv ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "const %s: i32 = %d;\n", kv[i], kv[i+1])
	}
	return b.String()
}

// convConsts returns the geometry of g (2-D form) as WGSL constants: N,
// CIN, COUT, CG and OG (channels per group in and out), H, W, KH, KW, OH,
// OW, SH, SW, PH, PW, DH, DW.
func convConsts(g ir.ConvGeom) string {
	h, kh, oh, sh, ph, dh := 1, 1, 1, 1, 0, 1
	i := 0
	if len(g.In) == 2 {
		h, kh, oh, sh, ph, dh = g.In[0], g.Kernel[0], g.Out[0], g.Stride[0], g.Padding[0], g.Dilation[0]
		i = 1
	}
	return iconsts("N", g.N, "CIN", g.CIn, "COUT", g.COut, "CG", g.CIn/g.Groups, "OG", g.COut/g.Groups,
		"H", h, "W", g.In[i], "KH", kh, "KW", g.Kernel[i], "OH", oh, "OW", g.Out[i],
		"SH", sh, "SW", g.Stride[i], "PH", ph, "PW", g.Padding[i], "DH", dh, "DW", g.Dilation[i])
}

// perElement returns a one-dispatch kernel of count threads, each
// running body with p its flat index (as i32), after decls; binds are the
// bindings decls declare.
func perElement(decls, body string, count int, bind []Operand) *Kernel {
	if count == 0 {
		return &Kernel{}
	}
	var b strings.Builder
	b.WriteString(decls)
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  if (%s >= %du) { return; }\n  let p = i32(%s);\n%s}\n", idx, count, idx, body)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}
}

// buildConv builds conv1d and conv2d(x, w[, bias]) {stride, padding,
// dilation, groups}: one thread per output element sums its window over
// the group's input channels (for each tap in the input, row then column,
// the channels in order: the bounds are checked once per tap), then adds
// the bias, as the CPU's gemm and bias do.
func buildConv(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	g, err := ir.ConvGeometry(n.Args[0].Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	var d strings.Builder
	d.WriteString(Decl(0, "x", ir.F32))
	d.WriteString(Decl(1, "w", ir.F32))
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	bias := "s"
	if len(n.Args) == 3 {
		d.WriteString(Decl(2, "bias", ir.F32))
		bind = append(bind, Operand{Arg, 2})
		bias = "s + bias[co]"
	}
	d.WriteString(Decl(len(bind), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	d.WriteString(convConsts(g))
	body := fmt.Sprintf(`  let ox = p %% OW;
  let oy = (p / OW) %% OH;
  let co = (p / (OW * OH)) %% COUT;
  let b = p / (OW * OH * COUT);
  let ci0 = (co / OG) * CG;
  var s = 0.0;
  for (var i = 0; i < KH; i++) {
    let iy = oy * SH - PH + i * DH;
    if (iy < 0 || iy >= H) { continue; }
    for (var j = 0; j < KW; j++) {
      let ix = ox * SW - PW + j * DW;
      if (ix < 0 || ix >= W) { continue; }
      var wi = (co * CG * KH + i) * KW + j;
      var xi = ((b * CIN + ci0) * H + iy) * W + ix;
      for (var c = 0; c < CG; c++) {
        s = s + w[wi] * x[xi];
        wi += KH * KW;
        xi += H * W;
      }
    }
  }
  out[p] = %s;
`, bias)
	return perElement(d.String(), body, n.Out.Shape.NumElements(), bind), nil
}

// buildConvInputGrad builds conv_input_grad(dy, w) {..., input_shape}, the
// transposed convolution, as a gather: one thread per input element adds,
// for every tap (row, then column) whose window covers it and every output
// channel of its group in order, the weight times that window's dy.
func buildConvInputGrad(n *kernels.Node) (*Kernel, error) {
	d, _, err := convGradDecls(n, n.Out.Shape, n.Args[1].Shape, "dy", "w")
	if err != nil {
		return nil, err
	}
	body := `  let ix = p % W;
  let iy = (p / W) % H;
  let ci = (p / (W * H)) % CIN;
  let b = p / (W * H * CIN);
  let gr = ci / CG;
  let c = ci % CG;
  var s = 0.0;
  for (var i = 0; i < KH; i++) {
    let ty = iy + PH - i * DH;
    if (ty < 0 || ty % SH != 0 || ty / SH >= OH) { continue; }
    let oy = ty / SH;
    for (var j = 0; j < KW; j++) {
      let tx = ix + PW - j * DW;
      if (tx < 0 || tx % SW != 0 || tx / SW >= OW) { continue; }
      var wi = ((gr * OG * CG + c) * KH + i) * KW + j;
      var di = ((b * COUT + gr * OG) * OH + oy) * OW + tx / SW;
      for (var co = 0; co < OG; co++) {
        s = s + w[wi] * dy[di];
        wi += CG * KH * KW;
        di += OH * OW;
      }
    }
  }
  out[p] = s;
`
	return perElement(d, body, n.Out.Shape.NumElements(), []Operand{{Arg, 0}, {Arg, 1}, {Out, 0}}), nil
}

// convGradDecls checks n's dtypes and returns the declarations of a
// convolution gradient kernel: f32 arguments a and b, the f32 result out,
// and the constants of the convolution g of an input of shape x by weights
// of shape w, which it returns too.
func convGradDecls(n *kernels.Node, x, w ir.Shape, a, b string) (string, ir.ConvGeom, error) {
	if err := checkDTypes(n); err != nil {
		return "", ir.ConvGeom{}, err
	}
	g, err := ir.ConvGeometry(x, w, n.Attrs)
	if err != nil {
		return "", ir.ConvGeom{}, err
	}
	return Decl(0, a, ir.F32) + Decl(1, b, ir.F32) + Decl(2, "out", ir.F32) + convConsts(g), g, nil
}

// sumTermsSerialOut is the number of results from which sumTerms gives
// each to one thread whatever the number of terms: there are threads
// enough, and workgroups of tree reductions cost more than they save (on
// llvmpipe, the digits CNN's weight gradient took 300 ms that way,
// against a few ms serially).
const sumTermsSerialOut = 2048

// sumTerms returns a one-dispatch kernel whose result element o is the sum
// over r in [0, count) of term, WGSL of the i32 o and r (after decls). As
// the reductions: at most reduceSerialMax terms (or any number, for at
// least sumTermsSerialOut results) are one thread's, in order; more are a
// workgroup's strided partial sums added by a tree.
func sumTerms(decls, term string, out, count int, bind []Operand) *Kernel {
	if out == 0 {
		return &Kernel{}
	}
	var b strings.Builder
	b.WriteString(decls)
	fmt.Fprintf(&b, "fn term(o: i32, r: i32) -> f32 { return %s; }\n", term)
	if count <= reduceSerialMax || out >= sumTermsSerialOut {
		groups, idx := Grid(out)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  if (%[1]s >= %[2]du) { return; }\n  let o = i32(%[1]s);\n  var s = 0.0;\n", idx, out)
		fmt.Fprintf(&b, "  for (var r = 0; r < %d; r++) { s = s + term(o, r); }\n  out[o] = s;\n}\n", count)
		return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}
	}
	groups, idx := Groups2(out)
	fmt.Fprintf(&b, "var<workgroup> part: array<f32, %d>;\n", WorkgroupSize)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let o = i32(%s);\n  let t = lid.x;\n  var s = 0.0;\n", idx)
	fmt.Fprintf(&b, "  if (o < %d) {\n    for (var r = i32(t); r < %d; r += %d) { s = s + term(o, r); }\n  }\n", out, count, WorkgroupSize)
	b.WriteString(treeSum("s", "part"))
	fmt.Fprintf(&b, "  if (t == 0u && o < %d) { out[o] = part[0]; }\n}\n", out)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}
}

// buildConvWeightGrad builds conv_weight_grad(x, dy) {..., weight_shape}:
// each weight element is the sum over the batch and the output positions
// (in that order) of dy times the input under the tap.
func buildConvWeightGrad(n *kernels.Node) (*Kernel, error) {
	d, g, err := convGradDecls(n, n.Args[0].Shape, n.Out.Shape, "x", "dy")
	if err != nil {
		return nil, err
	}
	d += `fn tap(o: i32, r: i32) -> f32 {
  let j = o % KW;
  let i = (o / KW) % KH;
  let c = (o / (KW * KH)) % CG;
  let co = o / (KW * KH * CG);
  let ox = r % OW;
  let oy = (r / OW) % OH;
  let b = r / (OW * OH);
  let iy = oy * SH - PH + i * DH;
  let ix = ox * SW - PW + j * DW;
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) { return 0.0; }
  return dy[((b * COUT + co) * OH + oy) * OW + ox] * x[((b * CIN + (co / OG) * CG + c) * H + iy) * W + ix];
}
`
	count := g.N
	for _, o := range g.Out {
		count *= o
	}
	return sumTerms(d, "tap(o, r)", n.Out.Shape.NumElements(), count, []Operand{{Arg, 0}, {Arg, 1}, {Out, 0}}), nil
}

// poolConsts returns g as WGSL constants: PLANES, H, W, OH, OW, K0, K1,
// S0, S1, P0, P1, D0, D1.
func poolConsts(g ir.PoolGeom) string {
	return iconsts("PLANES", g.Planes, "H", g.H, "W", g.W, "OH", g.OH, "OW", g.OW,
		"K0", g.Kernel[0], "K1", g.Kernel[1], "S0", g.Stride[0], "S1", g.Stride[1],
		"P0", g.Padding[0], "P1", g.Padding[1], "D0", g.Dilation[0], "D1", g.Dilation[1])
}

// argmaxSource is the WGSL of argmax(base, oy, ox): the offset within the
// plane at x[base] of the arg max of window (oy, ox), or -1 for a window
// with no input element, exactly as the CPU's maxPoolArgmax: taps in
// row-major order from -inf, a tap replacing the maximum when greater or
// NaN.
const argmaxSource = `fn argmax(base: i32, oy: i32, ox: i32) -> i32 {
  var y0 = oy * S0 - P0;
  let y1 = min(y0 + (K0 - 1) * D0 + 1, H);
  while (y0 < 0) { y0 += D0; }
  var x0 = ox * S1 - P1;
  let x1 = min(x0 + (K1 - 1) * D1 + 1, W);
  while (x0 < 0) { x0 += D1; }
  if (y0 >= y1 || x0 >= x1) { return -1; }
  var best = bitcast<f32>(0xff800000u);
  var at = y0 * W + x0;
  for (var iy = y0; iy < y1; iy += D0) {
    for (var ix = x0; ix < x1; ix += D1) {
      let v = x[base + iy * W + ix];
      if (v > best || k_isnan(v)) { best = v; at = iy * W + ix; }
    }
  }
  return at;
}
`

// buildMaxPool builds max_pool2d, max_pool2d_select and max_pool2d_grad
// {kernel, stride, padding, dilation}. The forward ops are one thread per
// window; the gradient is a gather, one thread per input element adding
// the dy of every window (in row-major order, as the CPU) whose arg max it
// is.
func buildMaxPool(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xi := 0
	if n.Op != ir.OpMaxPool2d {
		xi = 1
	}
	g, err := ir.PoolGeometry(n.Args[xi].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	var d strings.Builder
	var bind []Operand
	if n.Op != ir.OpMaxPool2d {
		d.WriteString(Decl(0, "a", ir.F32)) // g of select, dy of grad
		bind = append(bind, Operand{Arg, 0})
	}
	d.WriteString(Decl(len(bind), "x", ir.F32))
	bind = append(bind, Operand{Arg, xi})
	d.WriteString(Decl(len(bind), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	d.WriteString(poolConsts(g))
	d.WriteString(helperSource(map[string]bool{"k_isnan": true}))
	d.WriteString(argmaxSource)
	var body string
	switch n.Op {
	case ir.OpMaxPool2d, ir.OpMaxPool2dSelect:
		v := "x[base + at]"
		if n.Op == ir.OpMaxPool2dSelect {
			v = "a[base + at]"
		}
		body = fmt.Sprintf(`  let ow = p %% OW;
  let oh = (p / OW) %% OH;
  let base = (p / (OW * OH)) * H * W;
  let at = argmax(base, oh, ow);
  if (at < 0) { out[p] = %s; } else { out[p] = %s; }
`, map[bool]string{true: "bitcast<f32>(0xff800000u)", false: "0.0"}[n.Op == ir.OpMaxPool2d], v)
	default:
		body = `  let ix = p % W;
  let iy = (p / W) % H;
  let pl = p / (W * H);
  let base = pl * H * W;
  let me = iy * W + ix;
  var s = 0.0;
  // The windows whose taps can reach (iy, ix): oy*S0 - P0 <= iy <= oy*S0 - P0 + (K0-1)*D0.
  let oy0 = max((iy + P0 - (K0 - 1) * D0 + S0 - 1), 0) / S0;
  let oy1 = min((iy + P0) / S0, OH - 1);
  let ox0 = max((ix + P1 - (K1 - 1) * D1 + S1 - 1), 0) / S1;
  let ox1 = min((ix + P1) / S1, OW - 1);
  for (var oy = oy0; oy <= oy1; oy++) {
    for (var ox = ox0; ox <= ox1; ox++) {
      if (argmax(base, oy, ox) == me) { s = s + a[(pl * OH + oy) * OW + ox]; }
    }
  }
  out[p] = s;
`
	}
	return perElement(d.String(), body, n.Out.Shape.NumElements(), bind), nil
}

// avgWindowSource is the WGSL of window(oy, ox) -> (y0, y1, x0, x1, div):
// the in-range extent of the window and its divisor, as the CPU's
// nnAvgWindow.
func avgWindowSource(countPad bool) string {
	div := "(y1 - y0) * (x1 - x0)"
	if !countPad {
		div = "(yb - ya) * (xb - xa)"
	}
	return fmt.Sprintf(`fn window(oy: i32, ox: i32) -> array<i32, 5> {
  let y0 = oy * S0 - P0;
  let x0 = ox * S1 - P1;
  let y1 = min(y0 + K0, H + P0);
  let x1 = min(x0 + K1, W + P1);
  let ya = max(y0, 0);
  let xa = max(x0, 0);
  let yb = min(y1, H);
  let xb = min(x1, W);
  return array<i32, 5>(ya, yb, xa, xb, %s);
}
`, div)
}

// buildAvgPool builds avg_pool2d {kernel, stride, padding,
// count_include_pad}: one thread per window adds it in row-major order and
// divides by its divisor.
func buildAvgPool(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	g, err := ir.PoolGeometry(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	d := Decl(0, "x", ir.F32) + Decl(1, "out", ir.F32) + poolConsts(g) + avgWindowSource(g.CountIncludePad)
	body := `  let ox = p % OW;
  let oy = (p / OW) % OH;
  let base = (p / (OW * OH)) * H * W;
  let wd = window(oy, ox);
  if (wd[0] >= wd[1] || wd[2] >= wd[3]) { out[p] = 0.0; return; }
  var s = 0.0;
  for (var iy = wd[0]; iy < wd[1]; iy++) {
    for (var ix = wd[2]; ix < wd[3]; ix++) { s = s + x[base + iy * W + ix]; }
  }
  out[p] = s / f32(wd[4]);
`
	return perElement(d, body, n.Out.Shape.NumElements(), []Operand{{Arg, 0}, {Out, 0}}), nil
}

// buildAvgPoolGrad builds avg_pool2d_grad(dy) {..., input_shape} as a
// gather: one thread per input element adds dy/divisor of every window
// covering it, windows in row-major order.
func buildAvgPoolGrad(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	g, err := ir.PoolGeometry(n.Out.Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	d := Decl(0, "dy", ir.F32) + Decl(1, "out", ir.F32) + poolConsts(g) + avgWindowSource(g.CountIncludePad)
	body := `  let ix = p % W;
  let iy = (p / W) % H;
  let pl = p / (W * H);
  var s = 0.0;
  let oy0 = max(iy + P0 - K0 + 1 + S0 - 1, 0) / S0;
  let oy1 = min((iy + P0) / S0, OH - 1);
  let ox0 = max(ix + P1 - K1 + 1 + S1 - 1, 0) / S1;
  let ox1 = min((ix + P1) / S1, OW - 1);
  for (var oy = oy0; oy <= oy1; oy++) {
    for (var ox = ox0; ox <= ox1; ox++) {
      let wd = window(oy, ox);
      if (iy >= wd[0] && iy < wd[1] && ix >= wd[2] && ix < wd[3]) {
        s = s + dy[(pl * OH + oy) * OW + ox] / f32(wd[4]);
      }
    }
  }
  out[p] = s;
`
	return perElement(d, body, n.Out.Shape.NumElements(), []Operand{{Arg, 0}, {Out, 0}}), nil
}

func init() {
	register(ir.OpConv1d, ir.F32, buildConv)
	register(ir.OpConv2d, ir.F32, buildConv)
	register(ir.OpConvInputGrad, ir.F32, buildConvInputGrad)
	register(ir.OpConvWeightGrad, ir.F32, buildConvWeightGrad)
	register(ir.OpMaxPool2d, ir.F32, buildMaxPool)
	register(ir.OpMaxPool2dGrad, ir.F32, buildMaxPool)
	register(ir.OpMaxPool2dSelect, ir.F32, buildMaxPool)
	register(ir.OpAvgPool2d, ir.F32, buildAvgPool)
	register(ir.OpAvgPool2dGrad, ir.F32, buildAvgPoolGrad)
}
