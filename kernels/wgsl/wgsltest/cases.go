// Package wgsltest holds the GPU kernel cases that both the pure-Go tests
// of kernels/wgsl (every builder generates its shaders) and the device
// tests of exec/gpu (every kernel against the CPU's) run: small graphs on
// odd shapes, not multiples of the workgroup or tile sizes.
package wgsltest

import (
	"fmt"
	"strings"
)

// Case is one graph body (inputs declared by the case, no graph line)
// whose outputs are compared between the CPU and the GPU.
type Case struct {
	Name string
	Src  string
	// Labels is the range [0, Labels) of integer inputs.
	Labels int
	// Atol is the absolute floor of the comparison (0: the elementwise
	// floor, 1e-6); sums of many terms added in another order than the
	// CPU's need more.
	Atol float64
	// Scaled multiplies Atol by the largest magnitude of the expected
	// tensor (at least 1), for results that reach large values.
	Scaled bool
}

// Cases returns the cases of every family but the convolution, pooling,
// normalization, dropout, KAN and logic-gate one (exec/gpu's nnCases):
// every elementwise op (with broadcasting), fused_elementwise, matmul and
// fused_matmul, sum, mean and fused_reduce, softmax, the cross-entropy,
// the movement family in every element type, the other reductions, the
// losses and attention.
func Cases() []Case {
	var cases []Case
	cases = append(cases, core()...)
	cases = append(cases, moves...)
	cases = append(cases, moveTypes()...)
	cases = append(cases, reductions...)
	cases = append(cases, losses()...)
	cases = append(cases, attention()...)
	return append(cases, Array()...)
}

// core: every elementwise op, on odd shapes with broadcasting, and the
// kernels of the MLPs.
func core() []Case {
	var cases []Case
	// Every elementwise op, on odd shapes with broadcasting.
	unary := []string{"neg", "exp", "tanh", "sigmoid", "relu", "abs", "sign", "square", "sin", "cos", "erf", "floor", "ceil", "round", "expm1",
		"leaky_relu", "elu", "gelu", "silu", "softsign", "softplus", "clip %a {min=-1.0, max=0.5}", "gelu %a {approximate=\"tanh\"}", "pow %a {exponent=3.0}"}
	for _, op := range unary {
		if !strings.Contains(op, "%a") {
			op += " %a"
		}
		cases = append(cases, Case{Name: op, Src: fmt.Sprintf("input %%a: f32[7,37]\n%%y = %s\noutput %%y", op)})
	}
	positive := []string{"log", "sqrt", "rsqrt", "reciprocal", "log2", "log10", "log1p"}
	for _, op := range positive {
		cases = append(cases, Case{Name: op, Src: fmt.Sprintf("input %%a: f32[7,37]\n%%e = exp %%a\n%%y = %s %%e\noutput %%y", op)})
	}
	binary := []string{"add", "sub", "mul", "div", "maximum", "minimum", "mod", "floor_div"}
	for _, op := range binary {
		cases = append(cases, Case{Name: op + " broadcast", Src: fmt.Sprintf("input %%a: f32[5,1,33]\ninput %%b: f32[3,33]\n%%y = %s %%a, %%b\noutput %%y", op)})
	}
	for _, op := range []string{"relu_grad %a, %b", "gelu_grad %a, %b", "gelu_grad %a, %b {approximate=\"tanh\"}"} {
		cases = append(cases, Case{Name: op, Src: fmt.Sprintf("input %%a: f32[5,33]\ninput %%b: f32[5,33]\n%%y = %s\noutput %%y", op)})
	}
	cases = append(cases,
		Case{Name: "prelu per channel", Src: "input %a: f32[3,5,7,3]\ninput %w: f32[5]\n%y = prelu %a, %w\noutput %y"},
		Case{Name: "prelu shared", Src: "input %a: f32[301]\ninput %w: f32[1]\n%y = prelu %a, %w\noutput %y"},
		Case{Name: "add scalar", Src: "input %a: f32[1000]\ninput %b: f32[]\n%y = add %a, %b\noutput %y"},
		Case{Name: "pow", Src: "input %a: f32[9,13]\ninput %b: f32[13]\n%e = exp %a\n%y = pow %e, %b\noutput %y"},
		Case{Name: "comparisons and where", Src: "input %a: f32[3,301]\ninput %b: f32[301]\n%g = greater %a, %b\n%l = less_equal %a, %b\n%e = equal %a, %a\n%ge = greater_equal %a, %b\n%lt = less %a, %b\n%ne = not_equal %a, %b\n%n = logical_not %g\n%o = logical_or %n, %l\n%d = logical_and %o, %e\n%y = where %d, %a, %b\noutput %y, %g, %ge, %lt, %ne"},
		Case{Name: "fused_elementwise", Src: "input %a: f32[65,3]\ninput %b: f32[3]\n%y: f32[65,3] = fused_elementwise %a, %b {program=[\"t0 = mul i0, i1\", \"t1 = tanh t0\", \"t2 = add t1, 0.5\", \"t3 = greater t2, i1\", \"t4 = where t3, t2, i0\"]}\noutput %y"},
		Case{Name: "matmul", Src: "input %a: f32[33,70]\ninput %b: f32[70,65]\n%y = matmul %a, %b\noutput %y", Atol: 1e-5},
		Case{Name: "matmul batched broadcast", Src: "input %a: f32[2,3,17,9]\ninput %b: f32[3,9,5]\n%y = matmul %a, %b\noutput %y", Atol: 1e-5},
		// From 512×512 on, 128×128 tiles of 8×8 per thread: odd sizes that
		// leave partial tiles and k slices, a broadcast batch, an epilogue;
		// k is small because long dispatches on llvmpipe end in its queue
		// thread's crash (docs/PERFORMANCE.md).
		Case{Name: "matmul large tiles", Src: "input %a: f32[2,513,5]\ninput %b: f32[5,515]\n%y = matmul %a, %b\noutput %y", Atol: 1e-5},
		Case{Name: "fused_matmul large tiles", Src: "input %a: f32[519,11]\ninput %b: f32[11,641]\ninput %c: f32[641]\n%y: f32[519,641] = fused_matmul %a, %b, %c {program=[\"t0 = add i0, i1\", \"t1 = tanh t0\"]}\noutput %y", Atol: 1e-5},
		Case{Name: "matmul transpose_a", Src: "input %a: f32[70,33]\ninput %b: f32[70,65]\n%y = matmul %a, %b {transpose_a=true}\noutput %y", Atol: 1e-5},
		Case{Name: "matmul transpose_b batched", Src: "input %a: f32[2,3,17,9]\ninput %b: f32[3,5,9]\n%y = matmul %a, %b {transpose_b=true}\noutput %y", Atol: 1e-5},
		Case{Name: "matmul both transposed", Src: "input %a: f32[21,33]\ninput %b: f32[67,21]\n%y = matmul %a, %b {transpose_a=true, transpose_b=true}\noutput %y", Atol: 1e-5},
		Case{Name: "fused_matmul transpose_b large tiles", Src: "input %a: f32[519,11]\ninput %b: f32[641,11]\ninput %c: f32[641]\n%y: f32[519,641] = fused_matmul %a, %b, %c {program=[\"t0 = add i0, i1\", \"t1 = relu t0\"], transpose_b=true}\noutput %y", Atol: 1e-5},
		Case{Name: "matmul vector", Src: "input %a: f32[19]\ninput %b: f32[4,19,3]\n%y = matmul %a, %b\noutput %y", Atol: 1e-5},
		Case{Name: "fused_matmul", Src: "input %a: f32[31,20]\ninput %b: f32[20,67]\ninput %c: f32[67]\n%y: f32[31,67] = fused_matmul %a, %b, %c {program=[\"t0 = add i0, i1\", \"t1 = relu t0\"]}\noutput %y", Atol: 1e-5},
		Case{Name: "sum axis 0", Src: "input %a: f32[300,7]\n%y = sum %a {axes=[0]}\noutput %y", Atol: 1e-4},
		Case{Name: "sum axis 1 keepdims", Src: "input %a: f32[7,33]\n%y = sum %a {axes=[1], keepdims=true}\noutput %y", Atol: 1e-5},
		Case{Name: "mean all", Src: "input %a: f32[3,5,71]\n%y = mean %a\noutput %y", Atol: 1e-5},
		Case{Name: "mean middle", Src: "input %a: f32[3,5,7]\n%y = mean %a {axes=[1]}\noutput %y", Atol: 1e-5},
		Case{Name: "fused_reduce", Src: "input %a: f32[9,130]\ninput %b: f32[130]\n%y: f32[130] = fused_reduce %a, %b {axes=[0], op=\"mean\", program=[\"t0 = mul i0, i1\"]}\noutput %y", Atol: 1e-5},
		Case{Name: "softmax", Src: "input %a: f32[6,300]\n%y = softmax %a\noutput %y", Atol: 1e-6},
		Case{Name: "softmax axis 0", Src: "input %a: f32[5,3,7]\n%y = softmax %a {axis=1}\n%z = log_softmax %a {axis=0}\noutput %y, %z", Atol: 1e-6},
		Case{Name: "softmax_cross_entropy i64", Src: "input %a: f32[33,10]\ninput %l: i64[33]\n%y = softmax_cross_entropy %a, %l\n%s = softmax_cross_entropy %a, %l {reduction=\"none\"}\noutput %y, %s", Labels: 10, Atol: 1e-5},
		Case{Name: "softmax_cross_entropy probs", Src: "input %a: f32[5,11]\ninput %p: f32[5,11]\n%y = softmax_cross_entropy %a, %p {reduction=\"sum\"}\noutput %y", Atol: 1e-5},
		Case{Name: "softmax_ce_grad", Src: "input %a: f32[17,10]\ninput %l: i32[17]\ninput %d: f32[]\n%y: f32[17,10] = softmax_ce_grad %a, %l, %d {reduction=\"mean\"}\n%z: f32[17,10] = softmax_ce_grad %a, %l {reduction=\"sum\"}\noutput %y, %z", Labels: 10, Atol: 1e-6},
		Case{Name: "transpose", Src: "input %a: f32[3,5,7]\n%y = transpose %a {perm=[2,0,1]}\n%z = transpose %a\noutput %y, %z"},
		Case{Name: "reshape broadcast_to", Src: "input %a: f32[3,1,7]\n%y = broadcast_to %a {shape=[2,3,5,7]}\n%z = reshape %a {shape=[21]}\noutput %y, %z"},
		Case{Name: "const one_hot", Src: "input %l: i64[9]\n%c = const {dtype=\"f32\", shape=[2,3], value=[1.0, 2.5, -3.0, 4.0, 5.0, 6.0]}\n%s = const {dtype=\"f32\", value=0.25}\n%o = one_hot %l {classes=5}\noutput %c, %s, %o", Labels: 5},
	)
	return cases
}

// moves: the movement family on odd shapes, for f32 and for the integer
// and bool element types moved as raw words and bytes. Moves and the
// indexed sums are exact (the sums add in the CPU's order), so the bound
// is the default one.
var moves = []Case{
	Case{Name: "squeeze unsqueeze", Src: "input %a: f32[3,1,7]\ninput %b: bool[5,1]\n%y = squeeze %a\n%z = unsqueeze %a {axes=[0,3]}\n%w = squeeze %b {axes=[1]}\noutput %y, %z, %w"},
	Case{Name: "flip", Src: "input %a: f32[3,5,7]\ninput %b: i64[9,3]\ninput %c: bool[3,7]\n%y = flip %a {axes=[0,2]}\n%z = flip %b {axes=[0]}\n%w = flip %c {axes=[1]}\noutput %y, %z, %w", Labels: 100},
	Case{Name: "slice", Src: "input %a: f32[4,37]\ninput %b: bool[3,11]\ninput %c: i32[17]\n%y = slice %a {axis=1, start=3, end=-2, step=4}\n%z = slice %b {axis=1, start=1, step=3}\n%w = slice %c {start=-5}\noutput %y, %z, %w", Labels: 50},
	Case{Name: "pad", Src: "input %a: f32[3,5,7]\ninput %b: bool[5,3]\ninput %c: i64[6]\n%y = pad %a {pads=[2,-1,1,3], value=1.5}\n%z = pad %b {pads=[1,2,0,1], value=1.0}\n%w = pad %c {pads=[3,-2], value=-7.0}\noutput %y, %z, %w", Labels: 9},
	Case{Name: "concat", Src: "input %a: f32[3,5]\ninput %b: f32[3,2]\ninput %c: f32[3,9]\n%y = concat %a, %b, %c, %a, %b, %c, %a, %b, %c {axis=1}\n%z = concat %a, %a {axis=0}\noutput %y, %z"},
	Case{Name: "concat bool i64", Src: "input %a: bool[3,5]\ninput %b: bool[3,2]\ninput %c: i64[2,3]\n%y = concat %a, %b, %a, %b, %a, %b, %a, %b, %a {axis=1}\n%z = concat %c, %c, %c {axis=0}\noutput %y, %z", Labels: 1000},
	Case{Name: "stack", Src: "input %a: f32[3,5]\ninput %b: f32[3,5]\ninput %c: bool[7]\n%y = stack %a, %b, %a {axis=1}\n%z = stack %a, %b\n%w = stack %c, %c, %c {axis=1}\noutput %y, %z, %w"},
	Case{Name: "gather", Src: "input %a: f32[5,7,3]\ninput %i: i64[4,6,3]\ninput %j: i32[5,7,2]\n%y = gather %a, %i {axis=0}\n%z = gather %a, %j {axis=2}\noutput %y, %z", Labels: 3},
	Case{Name: "index_select embedding", Src: "input %a: f32[5,9,3]\ninput %i: i64[13]\ninput %t: f32[9,33]\ninput %e: i32[4,7]\n%y = index_select %a, %i {axis=1}\n%z = embedding %t, %e\noutput %y, %z", Labels: 9},
	Case{Name: "index_select bool", Src: "input %a: bool[9,7]\ninput %i: i32[11]\n%y = index_select %a, %i {axis=0}\noutput %y", Labels: 9},
	Case{Name: "scatter_add", Src: "input %a: f32[5,7,3]\ninput %i: i64[4,6,3]\ninput %s: f32[4,6,5]\ninput %j: i32[4,3,2]\n%y = scatter_add %a, %i, %s {axis=0}\n%z = scatter_add %a, %j, %s {axis=1}\noutput %y, %z", Labels: 3},
	Case{Name: "index_add", Src: "input %a: f32[5,9,3]\ninput %i: i64[300]\ninput %s: f32[5,300,3]\ninput %t: f32[9,33]\ninput %j: i32[7]\ninput %u: f32[7,33]\n%y = index_add %a, %i, %s {axis=1}\n%z = index_add %t, %j, %u {axis=0}\noutput %y, %z", Labels: 9},
	Case{Name: "index_add i32", Src: "input %a: i32[9,3]\ninput %i: i32[40]\ninput %s: i32[40,3]\ninput %j: i64[40,3]\n%y = index_add %a, %i, %s {axis=0}\n%z = scatter_add %a, %j, %s {axis=0}\noutput %y, %z", Labels: 9},
}

// moveTypes: every move of every element type the GPU moves as raw words
// (i32, i64) and bytes (bool), on the same odd shapes.
func moveTypes() []Case {
	var cases []Case
	for _, dt := range []string{"i32", "i64", "bool"} {
		src := fmt.Sprintf(`input %%a: T[3,1,5]
input %%t: T[3,5]
input %%i: i64[2,1,5]
input %%k: i32[4]
%%sq = squeeze %%a
%%un = unsqueeze %%t {axes=[0]}
%%cc = concat %%a, %%a, %%a {axis=1}
%%sl = slice %%t {axis=1, start=1, step=2}
%%pd = pad %%t {pads=[1,0,0,2], value=1.0}
%%ga = gather %%a, %%i {axis=0}
%%is = index_select %%t, %%k {axis=0}
%%em = embedding %%t, %%k
%%st = stack %%t, %%t {axis=1}
%%fl = flip %%a {axes=[0,2]}
%%rs = reshape %%a {shape=[5,3]}
%%cn = const {dtype="T", shape=[2], value=[1.0, 0.0]}
`)
		out := "output %sq, %un, %cc, %sl, %pd, %ga, %is, %em, %st, %fl, %rs, %cn"
		if dt != "bool" { // the GPU transposes and broadcasts numbers
			src += "%tr = transpose %t\n%bt = broadcast_to %a {shape=[2,3,4,5]}\n"
			out += ", %tr, %bt"
		}
		src += out
		src = strings.NewReplacer("T[", dt+"[", `"T"`, `"`+dt+`"`).Replace(src)
		cases = append(cases, Case{Name: "moves " + dt, Src: src, Labels: 3})
	}
	return cases
}

// reductions beyond sum and mean, on short slices (a thread per output,
// folding in the CPU's order) and long ones (a workgroup per output,
// folding in another order: the atol of a sum of ~300 terms of size 3).
var reductions = []Case{
	Case{Name: "max min short", Src: "input %a: f32[7,5,9]\n%y = max %a {axes=[1]}\n%z = min %a {axes=[0,2], keepdims=true}\noutput %y, %z"},
	Case{Name: "max min long", Src: "input %a: f32[3,301]\ninput %b: f32[300,5]\n%y = max %a {axes=[1]}\n%z = min %b {axes=[0]}\n%w = max %b\noutput %y, %z, %w"},
	Case{Name: "max min i32", Src: "input %a: i32[3,301]\ninput %b: i32[5,7]\n%y = max %a {axes=[1]}\n%z = min %b {axes=[0]}\noutput %y, %z", Labels: 1000},
	Case{Name: "prod", Src: "input %a: f32[7,13]\ninput %b: f32[100,3]\n%y = prod %a {axes=[1]}\n%z = prod %b {axes=[0]}\noutput %y, %z", Atol: 1e-30},
	Case{Name: "prod i32", Src: "input %a: i32[7,13]\n%y = prod %a {axes=[1]}\noutput %y", Labels: 3},
	Case{Name: "logsumexp", Src: "input %a: f32[7,13]\ninput %b: f32[300,5]\n%y = logsumexp %a {axes=[1]}\n%z = logsumexp %b {axes=[0], keepdims=true}\noutput %y, %z", Atol: 1e-5},
	Case{Name: "var std", Src: "input %a: f32[7,13]\ninput %b: f32[300,5]\n%y = var %a {axes=[1]}\n%z = std %b {axes=[0], correction=0.0}\n%w = var %a {axes=[0], correction=7.0}\n%v = std %a\noutput %y, %z, %w, %v", Atol: 1e-5},
	Case{Name: "argmax argmin", Src: "input %a: f32[7,13]\ninput %b: f32[300,5]\ninput %c: i32[3,100]\n%y = argmax %a {axes=[1]}\n%z = argmin %b {axes=[0]}\n%w = argmax %c {axes=[1]}\n%v = argmin %c {axes=[1], keepdims=true}\n%u = argmax %b\noutput %y, %z, %w, %v, %u", Labels: 7},
	Case{Name: "prod_exclusive", Src: "input %a: f32[7,13]\ninput %d: f32[7,13]\n%y = prod_exclusive %a {axes=[1]}\n%z = prod_exclusive %a {axes=[0]}\n%w = prod_exclusive_grad %d, %a {axes=[1]}\n%v = prod_exclusive_grad %d, %a {axes=[0]}\noutput %y, %z, %w, %v", Atol: 1e-30},
	Case{Name: "max_grad", Src: "input %a: f32[7,13]\ninput %b: f32[100,3]\ninput %d: f32[7]\ninput %e: f32[]\n%r = round %a\n%y = max %r {axes=[1]}\n%g = max_grad %d, %r, %y {axes=[1]}\n%m = min %b {axes=[0], keepdims=true}\n%h = max_grad %e, %b, %m {axes=[0], keepdims=true, min=true}\noutput %g, %h"},
}

// losses: each reduction; broadcast operands for the elementwise ones;
// more than 64 losses, summed by a workgroup; softmax_grad and
// log_softmax_grad along the last and a middle axis.
func losses() []Case {
	var cases []Case
	for _, red := range []string{"mean", "sum", "none"} {
		for _, op := range []string{"mse_loss", "l1_loss", "huber_loss", "huber_loss {delta=0.7, reduction=\"R\"}"} {
			call := op
			if !strings.Contains(op, "{") {
				call += " {reduction=\"R\"}"
			}
			call = strings.Replace(strings.Replace(call, " {", " %a, %b {", 1), "R", red, 1)
			cases = append(cases, Case{Name: op + " " + red, Src: "input %a: f32[5,1,33]\ninput %b: f32[3,33]\n%y = " + call + "\noutput %y", Atol: 1e-4})
		}
		cases = append(cases,
			Case{Name: "bce " + red, Src: "input %a: f32[9,13]\ninput %b: f32[9,13]\n%p = sigmoid %a\n%q = sigmoid %b\n%y = bce_loss %p, %q {reduction=\"" + red + "\"}\n%z = bce_with_logits %a, %q {reduction=\"" + red + "\"}\noutput %y, %z", Atol: 1e-4},
			Case{Name: "nll " + red, Src: "input %a: f32[70,9]\ninput %l: i64[70]\ninput %m: i32[70]\n%y = nll_loss %a, %l {reduction=\"" + red + "\"}\n%z = nll_loss %a, %m {reduction=\"" + red + "\"}\noutput %y, %z", Labels: 9, Atol: 1e-4},
		)
	}
	cases = append(cases,
		Case{Name: "softmax_grad", Src: "input %d: f32[6,300]\ninput %a: f32[6,300]\n%y = softmax %a\n%g: f32[6,300] = softmax_grad %d, %y\n%l = log_softmax %a\n%h: f32[6,300] = log_softmax_grad %d, %l\noutput %g, %h", Atol: 1e-5},
		Case{Name: "fused_softmax", Src: "input %a: f32[6,300]\ninput %b: f32[300]\ninput %c: f32[3,2,5]\n%y: f32[6,300] = fused_softmax %a, %b {program=[\"t0 = mul i0, i1\", \"t1 = tanh t0\"]}\n%z: f32[3,2,5] = fused_softmax %c {log=true, program=[\"t0 = mul i0, 3.0\"]}\noutput %y, %z", Atol: 1e-6},
		Case{Name: "fused_softmax_grad", Src: "input %d: f32[6,300]\ninput %a: f32[6,300]\ninput %x: f32[6,300]\ninput %c: f32[6,1]\n%y = softmax %a\n%g: f32[6,300] = fused_softmax_grad %d, %y, %x {program=[\"t0 = mul i0, i1\"]}\n%l = log_softmax %a\n%h: f32[6,300] = fused_softmax_grad %d, %l, %x, %c {log=true, program=[\"t0 = mul i0, i1\", \"t1 = sub i2, t0\", \"t2 = exp t1\"]}\noutput %g, %h", Atol: 1e-5},
		Case{Name: "softmax_grad axis 1", Src: "input %d: f32[5,3,7]\ninput %a: f32[5,3,7]\n%y = softmax %a {axis=1}\n%g: f32[5,3,7] = softmax_grad %d, %y {axis=1}\n%l = log_softmax %a {axis=1}\n%h: f32[5,3,7] = log_softmax_grad %d, %l {axis=1}\noutput %g, %h", Atol: 1e-5},
	)
	return cases
}
