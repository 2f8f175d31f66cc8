package wgsl

import (
	"fmt"
	"math"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Normalizations (layer_norm, batch_norm with the batch's statistics) and
// dropout. A normalization is one workgroup per normalized group (a row of
// layer_norm, a channel of batch_norm): its threads add strided partial
// sums that a tree in workgroup memory adds (treeSum), first of the
// elements for the mean, then of the squared deviations for the biased
// variance, then write the normalized elements. layer_norm_grad is one
// workgroup per row too; batch_norm's gradient is composite.

// normSource returns the shader of a normalization with count groups of m
// elements, element j of group s at flat index idx(s, j) (WGSL over u32 s
// and j), writing out[i] = scale(z, s, j) with z = (x - mean)·rstd. decls
// declares x, out and whatever scale reads.
func normSource(decls, index, scale string, count, m int, eps float64) (string, [3]uint32) {
	var b strings.Builder
	b.WriteString(decls)
	rowDecls(&b, index)
	groups := rowStart(&b, count)
	fmt.Fprintf(&b, "  var acc = 0.0;\n  for (var j = t; j < %[1]du; j += %[2]du) { acc = acc + x[idx(s, j)]; }\n", m, WorkgroupSize)
	b.WriteString(treeSum("acc", "red"))
	fmt.Fprintf(&b, "  let mean = red[0] / %s;\n  workgroupBarrier();\n", F32(float64(m)))
	fmt.Fprintf(&b, "  var q = 0.0;\n  for (var j = t; j < %[1]du; j += %[2]du) { let d = x[idx(s, j)] - mean; q = q + d * d; }\n", m, WorkgroupSize)
	b.WriteString(treeSum("q", "red"))
	fmt.Fprintf(&b, "  let rstd = 1.0 / sqrt(red[0] / %s + %s);\n", F32(float64(m)), F32(eps))
	fmt.Fprintf(&b, "  for (var j = t; j < %[1]du; j += %[2]du) { let i = idx(s, j); let z = (x[i] - mean) * rstd; out[i] = %[3]s; }\n}\n", m, WorkgroupSize, scale)
	return b.String(), groups
}

// normRows checks n's dtypes and returns the rows of layer_norm (or its
// gradient) over x and the elements m of each.
func normRows(n *kernels.Node, x ir.Shape) (rows, m int, err error) {
	if err := checkDTypes(n); err != nil {
		return 0, 0, err
	}
	return ir.LayerNormRows(n.Attrs, x)
}

// buildLayerNorm builds layer_norm(x[, weight[, bias]]) {axes, eps}: one
// workgroup per row of the trailing normalized axes.
func buildLayerNorm(n *kernels.Node) (*Kernel, error) {
	rows, m, err := normRows(n, n.Args[0].Shape)
	if err != nil {
		return nil, err
	}
	if m == 0 || rows == 0 {
		return &Kernel{}, nil
	}
	var d strings.Builder
	d.WriteString(Decl(0, "x", ir.F32))
	bind := []Operand{{Arg, 0}}
	scale := "z"
	if len(n.Args) > 1 {
		d.WriteString(Decl(1, "w", ir.F32))
		bind = append(bind, Operand{Arg, 1})
		scale = "z * w[j]"
	}
	if len(n.Args) > 2 {
		d.WriteString(Decl(2, "bias", ir.F32))
		bind = append(bind, Operand{Arg, 2})
		scale += " + bias[j]"
	}
	d.WriteString(Decl(len(bind), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	src, groups := normSource(d.String(), fmt.Sprintf("s * %du + j", m), scale, rows, m, n.Attrs.Float("eps", 1e-5))
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: bind}}}, nil
}

// normGradSource returns the shader of a normalization's gradient with
// respect to its input over count groups of m elements, element j of group
// s at flat index idx(s, j) (WGSL over u32 s and j): one workgroup per
// group, whose tree sums give the mean of x, then the variance, then the
// means of g (the WGSL expression g, dy times the weight) and of g·xhat;
// then dx = rstd·((g - mean(g)) - xhat·mean(g·xhat)). decls declares dy, x,
// out and whatever g reads.
func normGradSource(decls, index, g string, count, m int, eps float64) (string, [3]uint32) {
	var b strings.Builder
	b.WriteString(decls)
	rowDecls(&b, index)
	groups := rowStart(&b, count)
	mf := F32(float64(m))
	row := func(body string) {
		fmt.Fprintf(&b, "  for (var j = t; j < %du; j += %du) { let i = idx(s, j); %s }\n", m, WorkgroupSize, body)
	}
	b.WriteString("  var acc = 0.0;\n")
	row("acc = acc + x[i];")
	b.WriteString(treeSum("acc", "red"))
	fmt.Fprintf(&b, "  let mean = red[0] / %s;\n  workgroupBarrier();\n  var q = 0.0;\n", mf)
	row("let d = x[i] - mean; q = q + d * d;")
	b.WriteString(treeSum("q", "red"))
	fmt.Fprintf(&b, "  let rstd = 1.0 / sqrt(red[0] / %s + %s);\n  workgroupBarrier();\n  var sg = 0.0;\n  var sgx = 0.0;\n", mf, F32(eps))
	row(fmt.Sprintf("let g = %s; sg = sg + g; sgx = sgx + g * ((x[i] - mean) * rstd);", g))
	b.WriteString(treeSum("sg", "red"))
	fmt.Fprintf(&b, "  let mg = red[0] / %s;\n  workgroupBarrier();\n", mf)
	b.WriteString(treeSum("sgx", "red"))
	fmt.Fprintf(&b, "  let mgx = red[0] / %s;\n", mf)
	row(fmt.Sprintf("let xhat = (x[i] - mean) * rstd; out[i] = rstd * ((%s - mg) - xhat * mgx);", g))
	b.WriteString("}\n")
	return b.String(), groups
}

// buildLayerNormGrad builds layer_norm_grad(dy, x[, weight]) {axes, eps}:
// one workgroup per row (normGradSource).
func buildLayerNormGrad(n *kernels.Node) (*Kernel, error) {
	rows, m, err := normRows(n, n.Args[1].Shape)
	if err != nil {
		return nil, err
	}
	if m == 0 || rows == 0 {
		return &Kernel{}, nil
	}
	d := Decl(0, "dy", ir.F32) + Decl(1, "x", ir.F32)
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	g := "dy[i]"
	if len(n.Args) > 2 {
		d += Decl(2, "w", ir.F32)
		bind = append(bind, Operand{Arg, 2})
		g = "dy[i] * w[j]"
	}
	d += Decl(len(bind), "out", ir.F32)
	bind = append(bind, Operand{Out, 0})
	src, groups := normGradSource(d, fmt.Sprintf("s * %du + j", m), g, rows, m, n.Attrs.Float("eps", 1e-5))
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: bind}}}, nil
}

// batchNormIndex is the WGSL flat index of element j of channel s of an
// input [N, c, sp...]: the batch j / sp, the position j % sp.
func batchNormIndex(sp, c int) string {
	return fmt.Sprintf("((j / %[1]du) * %[2]du + s) * %[1]du + j %% %[1]du", sp, c)
}

// buildBatchNorm builds batch_norm(x, weight, bias) {eps} with the batch's
// statistics: one workgroup per channel, over the batch and the spatial
// positions.
func buildBatchNorm(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xs := n.Args[0].Shape
	nb, c, sp := xs[0], xs[1], xs[2:].NumElements()
	if nb*sp == 0 || c == 0 {
		return &Kernel{}, nil
	}
	d := Decl(0, "x", ir.F32) + Decl(1, "w", ir.F32) + Decl(2, "bias", ir.F32) + Decl(3, "out", ir.F32)
	src, groups := normSource(d, batchNormIndex(sp, c), "z * w[s] + bias[s]", c, nb*sp, n.Attrs.Float("eps", 1e-5))
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Arg, 2}, {Out, 0}}}}}, nil
}

// pcgSource is the WGSL of the PCG hash dropout's mask is made of (see
// kernels/cpu/dropout.go: the same 32-bit operations, so the masks are
// bit-identical).
const pcgSource = `fn pcg(v: u32) -> u32 {
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}
`

// buildDropout builds dropout {p, seed}: one thread per element, with the
// CPU kernel's mask: key = pcg(hi(step) ^ pcg(lo(step) ^ pcg(hi(seed) ^
// pcg(lo(seed))))), element i kept when pcg(hi(i) ^ pcg(lo(i) ^ key)) >> 8
// is at least ceil(p·2^24) (hi(i) is 0: a binding holds fewer than 2^32
// elements), the step read from the executor's step count. Kept elements
// are scaled by 1/(1-p) rounded to f32, dropped ones multiplied by 0.
func buildDropout(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	count := n.Out.Shape.NumElements()
	p := n.Attrs.Float("p", 0.5)
	if p == 0 {
		return copyWords(Operand{Arg, 0}, count), nil
	}
	seed := uint64(n.Attrs.Int("seed", 0))
	thr := uint32(math.Ceil(p * (1 << 24))) // as the CPU's dropoutThreshold
	scale := float32(1) / float32(1-p)
	d := Decl(0, "x", ir.F32) + Decl(1, "out", ir.F32) + StepDecl(2) + pcgSource
	body := fmt.Sprintf(`  let key = pcg(step_count[1] ^ pcg(step_count[0] ^ pcg(%du ^ pcg(%du))));
  let bits = pcg(pcg(u32(p) ^ key)) >> 8u;
  out[p] = x[p] * select(0.0, %s, bits >= %du);
`, uint32(seed>>32), uint32(seed), F32(float64(scale)), thr)
	return perElement(d, body, count, []Operand{{Arg, 0}, {Out, 0}, {StepNo, 0}}), nil
}

func init() {
	register(ir.OpLayerNorm, ir.F32, buildLayerNorm)
	register(ir.OpLayerNormGrad, ir.F32, buildLayerNormGrad)
	register(ir.OpBatchNorm, ir.F32, buildBatchNorm)
	register(ir.OpDropout, ir.F32, buildDropout)
}
