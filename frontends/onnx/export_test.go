package onnx_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// run runs g's forward graph with every input and param set to
// deterministic values and returns its outputs by name.
func run(t *testing.T, g *ir.Graph, params []safetensors.Tensor) map[string][]float64 {
	t.Helper()
	p, err := kiln.Compile(g, kiln.Options{Inference: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, ts := range params {
		if err := x.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range g.Inputs() {
		v := g.Value(id)
		if err := x.Set(v.Name, values(v.Type, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, o := range g.Outputs {
		v, err := x.Get(g.Value(o).Name)
		if err != nil {
			t.Fatal(err)
		}
		out[g.Value(o).Name] = kernels.Float64s(v)
	}
	return out
}

// values returns a tensor of type typ with values in [-2, 2] (integers:
// in [0, 3)) that depend on seed.
func values(typ ir.Type, seed int) kernels.Tensor {
	t := kernels.New(typ)
	v := make([]float64, typ.Shape.NumElements())
	for i := range v {
		if typ.DType.IsFloat() {
			v[i] = 2 * math.Sin(float64(7*i+3*seed)+0.5)
		} else {
			v[i] = float64((i + seed) % 3)
		}
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

// TestExportOps exports small graphs of the ops of the export table,
// re-imports them and checks that the forward graph gives the same
// outputs: within 1e-6 + 1e-6*|x| (ops written as several ONNX ops round
// in another order), bitwise where the case says so.
func TestExportOps(t *testing.T) {
	for _, tc := range []struct {
		name, kir string
		bitwise   bool
	}{
		{"elementwise", `input %x: f32[2,3]
input %y: f32[3]
%a = add %x, %y
%b = sub %a, %x
%c = mul %b, %x
%d = div %c, %y
%e = maximum %d, %x
%f = minimum %e, %y
%g = neg %f
%h = exp %g
%i = log %h
%j = abs %i
%k = sqrt %j
%l = tanh %k
%m = sigmoid %l
%n = relu %x
%o = sign %x
%p = sin %x
%q = cos %x
%r = erf %x
%s = floor %x
%u = ceil %x
%v = round %x
output %m, %n, %o, %p, %q, %r, %s, %u, %v`, true},
		{"composed", `input %x: f32[2,3]
%a = rsqrt %x
%b = square %x
%c = pow %x {exponent=2}
%d = pow %b, %x
%e = clip %x {min=-0.5, max=1}
%f = clip %x {max=1}
%g = leaky_relu %x {alpha=0.2}
%h = elu %x
%i = silu %x
%j = gelu %x
%k = gelu %x {approximate="tanh"}
%l = reciprocal %x
%c0 = const {shape=[2,3], value=0.5}
%m = add %l, %c0
output %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %m`, false},
		{"compare", `input %x: f32[2,3]
input %y: f32[2,3]
%a = greater %x, %y
%b = less_equal %x, %y
%c = where %a, %x, %y
%d = where %b, %y, %x
%e = add %c, %d
output %e`, true},
		{"matmul", `input %x: f32[4,3]
param %w: f32[5,3]
param %v: f32[5,2]
%a = matmul %x, %w {transpose_b=true}
%b = matmul %a, %v
%c = matmul %v, %a {transpose_a=true, transpose_b=true}
output %b, %c`, true},
		{"movement", `input %x: f32[2,3,4]
%a = transpose %x {perm=[2,0,1]}
%b = reshape %a {shape=[4,-1]}
%c = unsqueeze %b {axes=[0]}
%d = squeeze %c {axes=[0]}
%e = broadcast_to %d {shape=[2,4,6]}
%f = concat %x, %x {axis=1}
%g = slice %f {axis=1, start=1, end=5, step=2}
%h = slice %x {axis=-1, start=1}
%i = pad %x {pads=[1,2,0,1], value=0.5}
%k = const {dtype="i64", shape=[2], value=[2,0]}
%j = index_select %x, %k {axis=2}
%t = transpose %x
output %e, %g, %h, %i, %j, %t`, true},
		{"reductions", `input %x: f32[2,3,4]
%a = sum %x {axes=[1]}
%b = mean %x {axes=[0,2], keepdims=true}
%c = max %x {axes=[-1]}
%d = min %x
%e = sum %x
%f = softmax %x {axis=1}
%g = log_softmax %x
output %a, %b, %c, %d, %e, %f, %g`, false},
		{"nn", `input %x: f32[2,3,6,6]
param %w: f32[4,3,3,3]
param %b: f32[4]
param %g: f32[4]
param %s: f32[4]
param %w1: f32[2,3,3]
input %z: f32[2,3,8]
%c = conv2d %x, %w, %b {stride=[2], padding=[1]}
%n = batch_norm %c, %g, %s {eps=1e-3}
%m = max_pool2d %x {kernel=[2,2], stride=[1,2], padding=[1,1]}
%a = avg_pool2d %x {kernel=[3], padding=[1]}
%a0 = avg_pool2d %x {kernel=[3], padding=[1], count_include_pad=false}
%d = dropout %x {p=0.5}
%e = add %d, %x
%f = conv1d %z, %w1 {dilation=[2]}
param %lw: f32[6,6]
param %lb: f32[6,6]
%l0 = layer_norm %x
%l1 = layer_norm %x, %lw, %lb {axes=[2,3], eps=1e-3}
output %n, %m, %a, %a0, %e, %f, %l0, %l1`, false},
		{"losses", `input %x: f32[4,3]
input %y: i64[4]
input %r: f32[4,3]
%ce = softmax_cross_entropy %x, %y
%ls = log_softmax %x {axis=1}
%nll = nll_loss %ls, %y {reduction="sum"}
%mse = mse_loss %x, %r
%none = mse_loss %x, %r {reduction="none"}
%l = add %ce, %nll
%l2 = add %l, %mse
output %l2, %none`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ir.Parse(tc.name+".kir", []byte("graph "+tc.name+"\n"+tc.kir+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			var params []safetensors.Tensor
			for k, id := range g.Params() {
				v := g.Value(id)
				params = append(params, safetensors.Tensor{Name: v.Name, Type: v.Type, Data: values(v.Type, 10+k).Data})
			}
			var b bytes.Buffer
			if err := onnx.Export(g, params, &b); err != nil {
				t.Fatal(err)
			}
			m, err := onnx.Decode(b.Bytes(), "")
			if err != nil {
				t.Fatalf("re-import: %v", err)
			}
			want, got := run(t, g, params), run(t, m.Graph, m.Params)
			if len(got) != len(want) {
				t.Fatalf("%d outputs after export, %d before", len(got), len(want))
			}
			for name, w := range want {
				gv := got[name]
				for i := range w {
					d := math.Abs(gv[i] - w[i])
					if (tc.bitwise && gv[i] != w[i] && !(math.IsNaN(gv[i]) && math.IsNaN(w[i]))) || d > 1e-6*(1+math.Abs(w[i])) {
						t.Errorf("%s[%d] = %.9g after export, %.9g before", name, i, gv[i], w[i])
						break
					}
				}
			}
		})
	}
}

// TestExportErrors checks Export's one-line errors.
func TestExportErrors(t *testing.T) {
	f32 := func(s ...int) ir.Type { return ir.Type{DType: ir.F32, Shape: s} }
	for _, tc := range []struct {
		kir    string
		params []safetensors.Tensor
		want   string
	}{
		{"input %x: f32[3]\n%a = log1p %x\noutput %a", nil, "%a: op log1p has no ONNX form in kiln's export"},
		{"input %x: f32[3]\nparam %w: f32[3]\n%a = mul %x, %w\noutput %a", nil, `param "w" has no value in the params given`},
		{"input %x: f32[3]\nparam %w: f32[3]\n%a = mul %x, %w\noutput %a", []safetensors.Tensor{{Name: "w", Type: f32(4), Data: make([]byte, 16)}}, `param "w": expected f32[3], found f32[4] (16 bytes)`},
		{"input %x: f32[3]\n%a = relu %x\noutput %a", []safetensors.Tensor{{Name: "x", Type: f32(3), Data: make([]byte, 12)}}, `tensor "x" of the params is not a param of graph e`},
		{"input %x: f32[3,4,4]\n%a = max_pool2d %x {kernel=[2]}\noutput %a", nil, "%a (max_pool2d): ONNX pools [N,C,H,W]; the input has rank 3"},
		{"input %x: f32[2,3]\ninput %p: f32[2,3]\n%a = softmax_cross_entropy %x, %p\noutput %a", nil, "%a (softmax_cross_entropy): class-probability targets have no ONNX form; labels only"},
	} {
		g, err := ir.Parse("e.kir", []byte("graph e\n"+tc.kir+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = onnx.Export(g, tc.params, new(bytes.Buffer))
		if err == nil || err.Error() != tc.want || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want %s", tc.kir, err, tc.want)
		}
	}
}
