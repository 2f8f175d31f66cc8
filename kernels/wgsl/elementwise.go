package wgsl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// ewRule is one elementwise op's WGSL: expr returns the expression of the
// result from the operands' expressions (already of ValueType) and the
// op's canonical attributes; helpers names the functions of ewHelpers it
// calls.
type ewRule struct {
	expr    func(a []string, attrs ir.Attrs) string
	helpers []string
}

// ewRules is the one table of elementwise ops on the GPU, f32 operands
// (bool for comparisons' results, where's condition and the logical ops).
// The op kernels, fused_elementwise, fused_matmul's epilogue and
// fused_reduce's prologue all generate their code from it.
var ewRules = map[ir.Op]ewRule{
	ir.OpAdd: {expr: bin("+")},
	ir.OpSub: {expr: bin("-")},
	ir.OpMul: {expr: bin("*")},
	ir.OpDiv: {expr: bin("/")},
	ir.OpNeg: {expr: fn1("-")},
	ir.OpExp: {expr: fn1("exp")},
	// log, sqrt and rsqrt of a negative number and log of 0 follow IEEE
	// (NaN, -Inf) on the devices kiln has seen; tests check them.
	ir.OpLog:     {expr: fn1("k_log"), helpers: []string{"k_log"}},
	ir.OpSqrt:    {expr: fn1("sqrt")},
	ir.OpTanh:    {expr: fn1("k_tanh"), helpers: []string{"k_tanh"}},
	ir.OpSigmoid: {expr: fn1("k_sigmoid"), helpers: []string{"k_sigmoid"}},
	// relu and relu_grad test x <= 0, which is false for NaN: NaN passes
	// (as PyTorch's relu and threshold_backward).
	ir.OpRelu:       {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("select(%s, 0.0, %s <= 0.0)", a[0], a[0]) }},
	ir.OpReluGrad:   {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("select(%s, 0.0, %s <= 0.0)", a[0], a[1]) }},
	ir.OpAbs:        {expr: fn1("abs")},
	ir.OpSign:       {expr: fn1("k_sign"), helpers: []string{"k_sign"}},
	ir.OpRsqrt:      {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(1.0 / sqrt(%s))", a[0]) }},
	ir.OpSquare:     {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(%s * %s)", a[0], a[0]) }},
	ir.OpReciprocal: {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(1.0 / %s)", a[0]) }},
	ir.OpLog2:       {expr: fn1("k_log2"), helpers: []string{"k_log2"}},
	ir.OpLog10: {expr: func(a []string, _ ir.Attrs) string {
		return fmt.Sprintf("(k_log(%s) * %s)", a[0], F32(0.4342944819032518))
	}, helpers: []string{"k_log"}},
	ir.OpLog1p: {expr: fn1("k_log1p"), helpers: []string{"k_log1p"}},
	ir.OpExpm1: {expr: fn1("k_expm1"), helpers: []string{"k_expm1"}},
	ir.OpSin:   {expr: fn1("sin")},
	ir.OpCos:   {expr: fn1("cos")},
	ir.OpErf:   {expr: fn1("k_erf"), helpers: []string{"k_erf"}},
	ir.OpFloor: {expr: fn1("floor")},
	ir.OpCeil:  {expr: fn1("ceil")},
	ir.OpRound: {expr: fn1("round")}, // WGSL rounds halves to even, as torch.round
	ir.OpClip: {expr: func(a []string, at ir.Attrs) string {
		v := a[0]
		if _, ok := at.Get("min"); ok {
			v = fmt.Sprintf("max(%s, %s)", v, F32(at.Float("min", 0)))
		}
		if _, ok := at.Get("max"); ok {
			v = fmt.Sprintf("min(%s, %s)", v, F32(at.Float("max", 0)))
		}
		return fmt.Sprintf("select(%s, %s, k_isnan(%s))", v, a[0], a[0]) // NaN stays NaN
	}, helpers: []string{"k_isnan"}},
	ir.OpPow: {expr: func(a []string, at ir.Attrs) string {
		if len(a) == 1 {
			// ±0.5 are sqrt and 1/sqrt, as on the CPU and in PyTorch
			// (so the square root of -Inf is NaN, not pow's +Inf).
			switch e := at.Float("exponent", 1); e {
			case 0.5:
				return fmt.Sprintf("k_sqrt(%s)", a[0])
			case -0.5:
				return fmt.Sprintf("(1.0 / k_sqrt(%s))", a[0])
			default:
				return fmt.Sprintf("k_pow(%s, %s)", a[0], F32(e))
			}
		}
		return fmt.Sprintf("k_pow(%s, %s)", a[0], a[1])
	}, helpers: []string{"k_pow", "k_sqrt"}},
	ir.OpMaximum:  {expr: fn2("k_maximum"), helpers: []string{"k_maximum"}},
	ir.OpMinimum:  {expr: fn2("k_minimum"), helpers: []string{"k_minimum"}},
	ir.OpFloorDiv: {expr: fn2("k_floor_div"), helpers: []string{"k_floor_div"}},
	ir.OpMod:      {expr: fn2("k_mod"), helpers: []string{"k_mod"}},
	ir.OpWhere: {expr: func(a []string, _ ir.Attrs) string {
		return fmt.Sprintf("select(%s, %s, %s)", a[2], a[1], a[0])
	}},
	ir.OpGreater:      {expr: bin(">")},
	ir.OpGreaterEqual: {expr: bin(">=")},
	ir.OpLess:         {expr: bin("<")},
	ir.OpLessEqual:    {expr: bin("<=")},
	ir.OpEqual:        {expr: bin("==")},
	// not_equal is !(a == b): true where either is NaN even on drivers
	// that compile != as an ordered comparison.
	ir.OpNotEqual:   {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("!(%s == %s)", a[0], a[1]) }},
	ir.OpLogicalAnd: {expr: bin("&&")},
	ir.OpLogicalOr:  {expr: bin("||")},
	ir.OpLogicalNot: {expr: fn1("!")},
	ir.OpLeakyRelu: {expr: func(a []string, at ir.Attrs) string {
		return fmt.Sprintf("select(%s * %s, %s, %s > 0.0)", a[0], F32(at.Float("alpha", 0.01)), a[0], a[0])
	}},
	ir.OpElu: {expr: func(a []string, at ir.Attrs) string {
		return fmt.Sprintf("select(%s * k_expm1(%s), %s, %s > 0.0)", F32(at.Float("alpha", 1)), a[0], a[0], a[0])
	}, helpers: []string{"k_expm1"}},
	ir.OpGelu: {expr: func(a []string, at ir.Attrs) string {
		if at.Str("approximate", "none") == "tanh" {
			return fmt.Sprintf("k_gelu_tanh(%s)", a[0])
		}
		return fmt.Sprintf("k_gelu(%s)", a[0])
	}, helpers: []string{"k_gelu", "k_gelu_tanh"}},
	ir.OpGeluGrad: {expr: func(a []string, at ir.Attrs) string {
		if at.Str("approximate", "none") == "tanh" {
			return fmt.Sprintf("(%s * k_gelu_tanh_grad(%s))", a[0], a[1])
		}
		return fmt.Sprintf("(%s * k_gelu_grad(%s))", a[0], a[1])
	}, helpers: []string{"k_gelu_grad", "k_gelu_tanh_grad"}},
	ir.OpSilu:     {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(%s * k_sigmoid(%s))", a[0], a[0]) }, helpers: []string{"k_sigmoid"}},
	ir.OpSoftsign: {expr: func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(%s / (1.0 + abs(%s)))", a[0], a[0]) }},
	ir.OpSoftplus: {expr: func(a []string, at ir.Attrs) string {
		return fmt.Sprintf("k_softplus(%s, %s, %s)", a[0], F32(at.Float("beta", 1)), F32(at.Float("threshold", 20)))
	}, helpers: []string{"k_softplus"}},
}

func bin(op string) func([]string, ir.Attrs) string {
	return func(a []string, _ ir.Attrs) string { return fmt.Sprintf("(%s %s %s)", a[0], op, a[1]) }
}

func fn1(f string) func([]string, ir.Attrs) string {
	return func(a []string, _ ir.Attrs) string { return fmt.Sprintf("%s(%s)", f, a[0]) }
}

func fn2(f string) func([]string, ir.Attrs) string {
	return func(a []string, _ ir.Attrs) string { return fmt.Sprintf("%s(%s, %s)", f, a[0], a[1]) }
}

// ewHelpers are the WGSL functions the rules call, with the helpers each
// one calls in turn listed in ewHelperDeps.
var ewHelpers = map[string]string{
	"k_isnan": `fn k_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }`,
	// log(0) is -Inf and log of a negative number NaN, as IEEE says; some
	// drivers' log does not, so the edges are explicit.
	"k_log": `fn k_log(x: f32) -> f32 {
  if (x == 0.0) { return bitcast<f32>(0xff800000u); }
  if (x < 0.0 || k_isnan(x)) { return bitcast<f32>(0x7fc00000u); }
  return log(x);
}`,
	"k_log2": `fn k_log2(x: f32) -> f32 {
  if (x == 0.0) { return bitcast<f32>(0xff800000u); }
  if (x < 0.0 || k_isnan(x)) { return bitcast<f32>(0x7fc00000u); }
  return log2(x);
}`,
	// tanh from e^-2|x| (at most 1, never overflows); near 0 its odd
	// polynomial, where 1 - e would cancel.
	"k_tanh": `fn k_tanh(x: f32) -> f32 {
  let a = abs(x);
  if (k_isnan(x)) { return x; }
  if (a < 0.625) {
    let z = x * x;
    return x + x * z * (-0.33333334 + z * (0.13333334 + z * (-0.053968254 + z * (0.021869488 + z * (-0.008863236 + z * 0.0035921280)))));
  }
  let e = exp(-2.0 * a);
  let t = (1.0 - e) / (1.0 + e);
  return select(-t, t, x >= 0.0);
}`,
	"k_sigmoid": `fn k_sigmoid(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}`,
	"k_sign": `fn k_sign(x: f32) -> f32 {
  if (k_isnan(x)) { return x; }
  return select(select(0.0, -1.0, x < 0.0), 1.0, x > 0.0);
}`,
	// log1p and expm1 by Kahan's corrections of log(1+x) and exp(x)-1.
	"k_log1p": `fn k_log1p(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (u == bitcast<f32>(0x7f800000u)) { return u; }
  return k_log(u) * (x / (u - 1.0));
}`,
	"k_expm1": `fn k_expm1(x: f32) -> f32 {
  if (abs(x) < 1e-5) { return x + 0.5 * x * x; }
  if (x > 88.0) { return exp(x); }
  let u = exp(x);
  if (u == 1.0) { return x; }
  let um = u - 1.0;
  if (um == -1.0) { return -1.0; }
  return um * x / log(u);
}`,
	// erfc by Numerical Recipes' Chebyshev fit (fractional error < 1.2e-7),
	// erf by its series near 0, where 1 - erfc would cancel.
	"k_erfc": `fn k_erfc(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, x >= 0.0);
}`,
	"k_erf": `fn k_erf(x: f32) -> f32 {
  if (abs(x) < 0.5) {
    let z = x * x;
    return 1.1283791671 * x * (1.0 + z * (-0.33333333333 + z * (0.1 + z * (-0.02380952381 + z * (0.00462962963 + z * -0.00075757576)))));
  }
  return 1.0 - k_erfc(x);
}`,
	"k_gelu": `fn k_gelu(x: f32) -> f32 { return 0.5 * x * k_erfc(-x * 0.70710678118654752); }`,
	"k_gelu_tanh": `fn k_gelu_tanh(x: f32) -> f32 {
  let u = 0.79788456080286536 * (x + 0.044715 * x * x * x);
  return x * k_sigmoid(2.0 * u);
}`,
	"k_gelu_grad": `fn k_gelu_grad(x: f32) -> f32 {
  return 0.5 * k_erfc(-x * 0.70710678118654752) + x * 0.39894228040143268 * exp(-0.5 * x * x);
}`,
	"k_gelu_tanh_grad": `fn k_gelu_tanh_grad(x: f32) -> f32 {
  let x2 = x * x;
  let u = 0.79788456080286536 * (x + 0.044715 * x2 * x);
  let s = k_sigmoid(2.0 * u);
  let ss = s * k_sigmoid(-2.0 * u);
  if (ss == 0.0) { return s; }
  return s + 2.0 * x * ss * 0.79788456080286536 * (1.0 + 3.0 * 0.044715 * x2);
}`,
	"k_softplus": `fn k_softplus(x: f32, beta: f32, threshold: f32) -> f32 {
  let z = x * beta;
  if (z > threshold) { return x; }
  return (max(z, 0.0) + k_log1p(exp(-abs(z)))) / beta;
}`,
	"k_maximum": `fn k_maximum(a: f32, b: f32) -> f32 {
  if (k_isnan(a) || k_isnan(b)) { return bitcast<f32>(0x7fc00000u); }
  return max(a, b);
}`,
	"k_minimum": `fn k_minimum(a: f32, b: f32) -> f32 {
  if (k_isnan(a) || k_isnan(b)) { return bitcast<f32>(0x7fc00000u); }
  return min(a, b);
}`,
	// A negative base with a whole exponent takes the sign of the
	// exponent's parity; with any other exponent it is NaN (pow's rule).
	"k_pow": `fn k_pow(a: f32, b: f32) -> f32 {
  if (b == 0.0 || a == 1.0) { return 1.0; }
  if (k_isnan(a) || k_isnan(b)) { return a + b; }
  if (a == bitcast<f32>(0xff800000u)) {
    let r = select(0.0, bitcast<f32>(0x7f800000u), b > 0.0);
    return select(r, -r, floor(b) == b && abs(b) < 16777216.0 && (i32(b) & 1) == 1);
  }
  if (a < 0.0) {
    if (floor(b) != b) { return bitcast<f32>(0x7fc00000u); }
    let r = pow(-a, b);
    return select(r, -r, abs(b) < 16777216.0 && (i32(b) & 1) == 1);
  }
  if (a == 0.0) { return select(bitcast<f32>(0x7f800000u), 0.0, b > 0.0); }
  return pow(a, b);
}`,
	// k_maxnan is the maximum where a NaN wins (a row's maximum).
	"k_maxnan": `fn k_maxnan(a: f32, b: f32) -> f32 {
  if (k_isnan(a)) { return a; }
  if (k_isnan(b)) { return b; }
  return max(a, b);
}`,
	// fmod(a, ±Inf) is a for a finite a (C's fmod, so mod and floor_div
	// give PyTorch's results there); trunc(a / ±Inf) times ±Inf is NaN.
	// k_sqrt is sqrt with NaN for a negative x or NaN, -Inf included,
	// whatever the driver's sqrt does there.
	"k_sqrt": `fn k_sqrt(x: f32) -> f32 {
  if (x < 0.0 || k_isnan(x)) { return bitcast<f32>(0x7fc00000u); }
  return sqrt(x);
}`,
	"k_fmod": `fn k_fmod(a: f32, b: f32) -> f32 {
  if ((bitcast<u32>(b) & 0x7fffffffu) == 0x7f800000u && (bitcast<u32>(a) & 0x7fffffffu) < 0x7f800000u) { return a; }
  return fma(-b, trunc(a / b), a);
}`,
	"k_mod": `fn k_mod(a: f32, b: f32) -> f32 {
  var m = k_fmod(a, b);
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { m = m + b; }
  return m;
}`,
	"k_floor_div": `fn k_floor_div(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return a / b; }
  let m = k_fmod(a, b);
  var d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
  if (d == 0.0) { return select(0.0, -0.0, (a < 0.0) != (b < 0.0)); }
  var f = floor(d);
  if (d - f > 0.5) { f = f + 1.0; }
  return f;
}`,
}

var ewHelperDeps = map[string][]string{
	"k_log": {"k_isnan"}, "k_log2": {"k_isnan"}, "k_tanh": {"k_isnan"}, "k_sign": {"k_isnan"},
	"k_log1p": {"k_log"}, "k_erf": {"k_erfc"}, "k_gelu": {"k_erfc"}, "k_gelu_tanh": {"k_sigmoid"},
	"k_gelu_grad": {"k_erfc"}, "k_gelu_tanh_grad": {"k_sigmoid"}, "k_softplus": {"k_log1p"},
	"k_maximum": {"k_isnan"}, "k_minimum": {"k_isnan"}, "k_mod": {"k_fmod"}, "k_maxnan": {"k_isnan"}, "k_floor_div": {"k_fmod"},
	"k_pow": {"k_isnan"}, "k_sqrt": {"k_isnan"},
}

// helperSource returns the helpers named (and those they call), each once,
// in a fixed order.
func helperSource(names map[string]bool) string {
	var add func(string)
	add = func(n string) {
		for _, d := range ewHelperDeps[n] {
			if !names[d] {
				names[d] = true
				add(d)
			}
		}
	}
	for n := range names {
		add(n)
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(ewHelpers[k])
		b.WriteString("\n")
	}
	return b.String()
}

// HasElementwise reports whether the GPU's elementwise table has op.
func HasElementwise(op ir.Op) bool {
	_, ok := ewRules[op]
	return ok
}

// ewInput is one input of an elementwise program as a kernel binds it: the
// name of its binding and its type.
type ewInput struct {
	name string
	t    ir.Type
}

// program is the WGSL of an elementwise program over shape: a function
// NAME(p: u32[, x0: f32]) -> T that computes the program at the flat index
// p of shape, each input read at its broadcast offset; with param, input 0
// is the parameter x0 instead of a binding (fused_matmul's product).
func program(name string, shape ir.Shape, ins []ewInput, prog ir.EwProgram, param bool) (src string, helpers map[string]bool, err error) {
	inTypes := make([]ir.Type, len(ins))
	for i, in := range ins {
		inTypes[i] = in.t
	}
	types, err := prog.Types(inTypes)
	if err != nil {
		return "", nil, err
	}
	helpers = map[string]bool{}
	var b strings.Builder
	res, err := ValueType(types[len(types)-1].DType)
	if err != nil {
		return "", nil, err
	}
	params := "p: u32"
	if param {
		params += ", x0: f32"
	}
	fmt.Fprintf(&b, "fn %s(%s) -> %s {\n", name, params, res)
	used := map[int]bool{}
	for _, in := range prog {
		for _, a := range in.Args {
			if a.Kind == ir.EwInput {
				used[a.Index] = true
			}
		}
	}
	for i, in := range ins {
		if !used[i] || (param && i == 0) {
			continue
		}
		if _, err := ValueType(in.t.DType); err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "  let x%d = ld_%s(%s);\n", i, in.name, offsetExpr("p", shape, broadcastStrides(in.t.Shape, shape)))
	}
	for k, in := range prog {
		r, ok := ewRules[in.Op]
		if !ok {
			return "", nil, fmt.Errorf("the GPU has no elementwise code for %s", in.Op)
		}
		for _, h := range r.helpers {
			helpers[h] = true
		}
		args := make([]string, len(in.Args))
		for j, a := range in.Args {
			switch a.Kind {
			case ir.EwInput:
				args[j] = fmt.Sprintf("x%d", a.Index)
			case ir.EwTemp:
				args[j] = fmt.Sprintf("t%d", a.Index)
			default:
				if types[k].DType != ir.F32 && types[k].DType != ir.Bool {
					return "", nil, fmt.Errorf("immediate %v in a %s program", a.Imm, types[k].DType)
				}
				args[j] = F32(a.Imm)
			}
		}
		fmt.Fprintf(&b, "  let t%d = %s;\n", k, r.expr(args, in.Attrs))
	}
	fmt.Fprintf(&b, "  return t%d;\n}\n", len(prog)-1)
	return b.String(), helpers, nil
}

// ewKernel returns the kernel that computes prog over the result's shape
// into the result, one thread per element (per four elements of a bool
// result, which is written a word at a time).
func ewKernel(n *kernels.Node, prog ir.EwProgram) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	if len(n.Args)+1 > 8 {
		return nil, fmt.Errorf("%d arguments: more storage buffers than a shader stage may bind by default (8)", len(n.Args))
	}
	ins := make([]ewInput, len(n.Args))
	bind := make([]Operand, 0, len(n.Args)+1)
	var b strings.Builder
	for i, t := range n.Args {
		ins[i] = ewInput{fmt.Sprintf("a%d", i), t}
		b.WriteString(Decl(i, ins[i].name, t.DType))
		bind = append(bind, Operand{Arg, i})
	}
	b.WriteString(Decl(len(n.Args), "out", n.Out.DType))
	bind = append(bind, Operand{Out, 0})
	f, helpers, err := program("ew", n.Out.Shape, ins, prog, false)
	if err != nil {
		return nil, err
	}
	b.WriteString(helperSource(helpers))
	b.WriteString(f)
	count := n.Out.Shape.NumElements()
	if n.Out.DType == ir.Bool {
		words := (count + 3) / 4
		groups, idx := Grid(words)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, "  let w = %s;\n  if (w >= %du) { return; }\n  var v = 0u;\n", idx, words)
		fmt.Fprintf(&b, "  for (var j = 0u; j < 4u; j++) {\n    let p = 4u * w + j;\n    if (p < %du && ew(p)) { v = v | (1u << (8u * j)); }\n  }\n  out[w] = v;\n}\n", count)
		return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}, nil
	}
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n  out[p] = ew(p);\n}\n", idx, count)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}, nil
}

// singleOp returns the program of one op applied to the node's arguments.
func singleOp(n *kernels.Node) ir.EwProgram {
	in := ir.EwInstr{Op: n.Op, Attrs: n.Attrs}
	for i := range n.Args {
		in.Args = append(in.Args, ir.EwOperand{Kind: ir.EwInput, Index: i})
	}
	return ir.EwProgram{in}
}

// buildElementwise builds any op of ewRules.
func buildElementwise(n *kernels.Node) (*Kernel, error) {
	if len(n.Args) == 2 && n.Out.DType == ir.Bool && n.Args[0].DType.IsInt() && n.Args[0].DType == n.Args[1].DType && n.Op != ir.OpLogicalAnd && n.Op != ir.OpLogicalOr {
		return buildIntElementwise(n) // a comparison of integers (cast.go)
	}
	for _, t := range n.Args {
		if t.DType != ir.F32 && t.DType != ir.Bool {
			return nil, fmt.Errorf("the GPU's elementwise kernels take f32 and bool operands, found %s", t)
		}
	}
	return ewKernel(n, singleOp(n))
}

// buildFusedElementwise builds fused_elementwise: its program, in one pass.
func buildFusedElementwise(n *kernels.Node) (*Kernel, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	return ewKernel(n, prog)
}

func init() {
	for op := range ewRules {
		dt := ir.F32
		switch op {
		case ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual,
			ir.OpLogicalAnd, ir.OpLogicalOr, ir.OpLogicalNot:
			dt = ir.Bool
		}
		register(op, dt, buildElementwise)
	}
	register(ir.OpFusedElementwise, ir.F32, buildFusedElementwise) // the fuse pass roots a group at a float value
}
