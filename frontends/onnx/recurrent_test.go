package onnx

import (
	"context"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/kernels"
	"google.golang.org/protobuf/proto"
)

// rnnCase is one recurrent node of TestRecurrentUnroll.
type rnnCase struct {
	name              string
	kind              cellKind
	dir               string
	layout            int
	bias, h0, c0, p   bool
	clip              float32
	acts              []string
	alpha, beta       []float32
	linearBeforeReset bool
	inputForget       bool
	seqLens           bool
}

func f64s(name string, dims []int, v []float64) *onnxpb.TensorProto {
	d := make([]int64, len(dims))
	for k, x := range dims {
		d[k] = int64(x)
	}
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_DOUBLE)), Dims: d, DoubleData: v}
}

// refAct is an activation of the ONNX recurrent ops, computed directly.
func refAct(a rnnActivation, x, clip float64) float64 {
	if clip > 0 {
		x = math.Max(-clip, math.Min(clip, x))
	}
	switch a.name {
	case "sigmoid":
		return 1 / (1 + math.Exp(-x))
	case "tanh":
		return math.Tanh(x)
	case "relu":
		return math.Max(x, 0)
	case "leakyrelu":
		if x >= 0 {
			return x
		}
		return a.alpha * x
	case "elu":
		if x >= 0 {
			return x
		}
		return a.alpha * (math.Exp(x) - 1)
	case "softplus":
		return math.Log1p(math.Exp(x))
	case "softsign":
		return x / (1 + math.Abs(x))
	case "hardsigmoid":
		return math.Max(0, math.Min(1, a.alpha*x+a.beta))
	case "affine":
		return a.alpha*x + a.beta
	case "scaledtanh":
		return a.alpha * math.Tanh(a.beta*x)
	}
	panic(a.name)
}

// refRecurrent computes ONNX's RNN, GRU or LSTM equations in layout 0 with
// plain loops: x [T][B][I] flat, w [D][G][I], r [D][G][H], b [D][2G],
// h0 and c0 [D][B][H], p [D][3H] (nil when absent). It returns Y [T][D][B][H],
// Y_h and Y_c [D][B][H].
func refRecurrent(c rnnCase, acts [][]rnnActivation, T, B, I, H int, x, w, r, b, h0, c0, p []float64) (y, yh, yc []float64) {
	D := 1
	if c.dir == "bidirectional" {
		D = 2
	}
	G := c.kind.gates() * H
	clip := float64(c.clip)
	y = make([]float64, T*D*B*H)
	yh = make([]float64, D*B*H)
	yc = make([]float64, D*B*H)
	for d := range D {
		a := acts[d]
		for bi := range B {
			h := make([]float64, H)
			cs := make([]float64, H)
			if h0 != nil {
				copy(h, h0[(d*B+bi)*H:])
			}
			if c0 != nil {
				copy(cs, c0[(d*B+bi)*H:])
			}
			for s := range T {
				t := s
				if c.dir == "reverse" || d == 1 {
					t = T - 1 - s
				}
				// pre[g] = x_t W_g^T + Wb_g, rec[g] = h R_g^T + Rb_g
				pre := make([]float64, G)
				rec := make([]float64, G)
				for g := range G {
					for i := range I {
						pre[g] += x[(t*B+bi)*I+i] * w[(d*G+g)*I+i]
					}
					for j := range H {
						rec[g] += h[j] * r[(d*G+g)*H+j]
					}
					if b != nil {
						pre[g] += b[d*2*G+g]
						rec[g] += b[d*2*G+G+g]
					}
				}
				nh := make([]float64, H)
				switch c.kind {
				case cellRNN:
					for j := range H {
						nh[j] = refAct(a[0], pre[j]+rec[j], clip)
					}
				case cellGRU:
					z, rg := make([]float64, H), make([]float64, H)
					for j := range H {
						z[j] = refAct(a[0], pre[j]+rec[j], clip)
						rg[j] = refAct(a[0], pre[H+j]+rec[H+j], clip)
					}
					for j := range H {
						var hh float64
						if c.linearBeforeReset {
							hh = refAct(a[1], pre[2*H+j]+rg[j]*rec[2*H+j], clip)
						} else {
							// (r * h) R_h^T + Rb_h
							v := 0.0
							for k := range H {
								v += rg[k] * h[k] * r[(d*G+2*H+j)*H+k]
							}
							if b != nil {
								v += b[d*2*G+G+2*H+j]
							}
							hh = refAct(a[1], pre[2*H+j]+v, clip)
						}
						nh[j] = (1-z[j])*hh + z[j]*h[j]
					}
				case cellLSTM:
					nc := make([]float64, H)
					for j := range H {
						ip, op, fp, cp := pre[j]+rec[j], pre[H+j]+rec[H+j], pre[2*H+j]+rec[2*H+j], pre[3*H+j]+rec[3*H+j]
						if p != nil {
							ip += p[d*3*H+j] * cs[j]
							fp += p[d*3*H+2*H+j] * cs[j]
						}
						i := refAct(a[0], ip, clip)
						f := refAct(a[0], fp, clip)
						if c.inputForget {
							f = 1 - i
						}
						nc[j] = f*cs[j] + i*refAct(a[1], cp, clip)
						if p != nil {
							op += p[d*3*H+H+j] * nc[j]
						}
						nh[j] = refAct(a[0], op, clip) * refAct(a[2], nc[j], clip)
					}
					cs = nc
				}
				h = nh
				copy(y[((t*D+d)*B+bi)*H:], h)
			}
			copy(yh[(d*B+bi)*H:], h)
			copy(yc[(d*B+bi)*H:], cs)
		}
	}
	return y, yh, yc
}

// permute returns x of shape dims with its axes permuted by perm.
func permute(x []float64, dims, perm []int) []float64 {
	out := make([]float64, len(x))
	nd := make([]int, len(perm))
	for k, p := range perm {
		nd[k] = dims[p]
	}
	idx := make([]int, len(dims))
	for src := range x {
		rem := src
		for k := len(dims) - 1; k >= 0; k-- {
			idx[k] = rem % dims[k]
			rem /= dims[k]
		}
		dst := 0
		for k, p := range perm {
			dst = dst*nd[k] + idx[p]
		}
		out[dst] = x[src]
	}
	return out
}

func randn(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for k := range v {
		v[k] = rng.NormFloat64() * scale
	}
	return v
}

// TestRecurrentUnroll imports RNN, GRU and LSTM nodes in float64 in every
// direction, both layouts, with and without bias, initial states and
// peepholes, with clip and other activations, and checks Y, Y_h and Y_c
// against refRecurrent, a direct loop over ONNX's equations
// (|kiln - ref| <= 1e-12 + 1e-10*|ref|).
func TestRecurrentUnroll(t *testing.T) {
	for _, c := range []rnnCase{
		{name: "rnn", kind: cellRNN, dir: "forward"},
		{name: "rnn_reverse_bias_h0", kind: cellRNN, dir: "reverse", bias: true, h0: true},
		{name: "rnn_bidirectional_layout1_relu", kind: cellRNN, dir: "bidirectional", layout: 1, bias: true, h0: true, acts: []string{"Relu", "Tanh"}},
		{name: "rnn_leakyrelu_alpha", kind: cellRNN, dir: "forward", bias: true, acts: []string{"LeakyRelu"}, alpha: []float32{0.3}},
		{name: "gru_lbr1", kind: cellGRU, dir: "forward", bias: true, linearBeforeReset: true},
		{name: "gru_lbr0", kind: cellGRU, dir: "forward", bias: true, h0: true},
		{name: "gru_bidirectional_layout1", kind: cellGRU, dir: "bidirectional", layout: 1, bias: true, h0: true, linearBeforeReset: true},
		{name: "gru_reverse_clip", kind: cellGRU, dir: "reverse", bias: true, clip: 0.5},
		{name: "gru_hardsigmoid_softsign", kind: cellGRU, dir: "forward", bias: true, acts: []string{"HardSigmoid", "Softsign"}, alpha: []float32{0.3}, beta: []float32{0.4}},
		{name: "lstm", kind: cellLSTM, dir: "forward"},
		{name: "lstm_states_bias_seqlens", kind: cellLSTM, dir: "forward", bias: true, h0: true, c0: true, seqLens: true},
		{name: "lstm_bidirectional_layout1", kind: cellLSTM, dir: "bidirectional", layout: 1, bias: true, h0: true, c0: true},
		{name: "lstm_reverse_peepholes_clip", kind: cellLSTM, dir: "reverse", bias: true, c0: true, p: true, clip: 0.8},
		{name: "lstm_input_forget", kind: cellLSTM, dir: "forward", bias: true, inputForget: true},
		{name: "lstm_activations", kind: cellLSTM, dir: "bidirectional", bias: true, acts: []string{"Sigmoid", "Elu", "Softplus", "HardSigmoid", "ScaledTanh", "Affine"}, alpha: []float32{0.9, 0.25, 1.5, 0.5}, beta: []float32{0.45, 0.7, 0.1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const T, B, I, H = 4, 3, 5, 2
			rng := rand.New(rand.NewSource(int64(len(c.name))))
			D := 1
			if c.dir == "bidirectional" {
				D = 2
			}
			G := c.kind.gates() * H
			x := randn(rng, T*B*I, 1)
			w := randn(rng, D*G*I, 0.6)
			r := randn(rng, D*G*H, 0.6)
			var b, h0, c0, p []float64
			inputs := []string{"x", "W", "R", "", "", "", "", ""}
			inits := []*onnxpb.TensorProto{f64s("W", []int{D, G, I}, w), f64s("R", []int{D, G, H}, r)}
			state := func(name string, v []float64) *onnxpb.TensorProto {
				if c.layout == 1 {
					return f64s(name, []int{B, D, H}, permute(v, []int{D, B, H}, []int{1, 0, 2}))
				}
				return f64s(name, []int{D, B, H}, v)
			}
			if c.bias {
				b = randn(rng, D*2*G, 0.5)
				inits = append(inits, f64s("B", []int{D, 2 * G}, b))
				inputs[3] = "B"
			}
			if c.seqLens {
				inits = append(inits, &onnxpb.TensorProto{Name: proto.String("lens"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT32)), Dims: []int64{B}, Int32Data: []int32{T, T, T}})
				inputs[4] = "lens"
			}
			if c.h0 {
				h0 = randn(rng, D*B*H, 0.5)
				inits = append(inits, state("h0", h0))
				inputs[5] = "h0"
			}
			if c.c0 {
				c0 = randn(rng, D*B*H, 0.5)
				inits = append(inits, state("c0", c0))
				inputs[6] = "c0"
			}
			if c.p {
				p = randn(rng, D*3*H, 0.5)
				inits = append(inits, f64s("P", []int{D, 3 * H}, p))
				inputs[7] = "P"
			}
			for len(inputs) > 0 && inputs[len(inputs)-1] == "" {
				inputs = inputs[:len(inputs)-1]
			}
			outputs := []string{"Y", "Y_h"}
			if c.kind == cellLSTM {
				outputs = append(outputs, "Y_c")
			}
			attrs := []*onnxpb.AttributeProto{aInt("hidden_size", H), aInt("layout", int64(c.layout)),
				{Name: proto.String("direction"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(c.dir)}}
			if c.clip > 0 {
				attrs = append(attrs, aFloat("clip", c.clip))
			}
			if c.acts != nil {
				a := &onnxpb.AttributeProto{Name: proto.String("activations"), Type: onnxpb.AttributeProto_STRINGS.Enum()}
				for _, s := range c.acts {
					a.Strings = append(a.Strings, []byte(s))
				}
				attrs = append(attrs, a)
			}
			if c.alpha != nil {
				attrs = append(attrs, &onnxpb.AttributeProto{Name: proto.String("activation_alpha"), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: c.alpha})
			}
			if c.beta != nil {
				attrs = append(attrs, &onnxpb.AttributeProto{Name: proto.String("activation_beta"), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: c.beta})
			}
			if c.linearBeforeReset {
				attrs = append(attrs, aInt("linear_before_reset", 1))
			}
			if c.inputForget {
				attrs = append(attrs, aInt("input_forget", 1))
			}
			op := [...]string{"RNN", "GRU", "LSTM"}[c.kind]
			xin := x
			xdims := []int{T, B, I}
			if c.layout == 1 {
				xin, xdims = permute(x, xdims, []int{1, 0, 2}), []int{B, T, I}
			}
			m := recurrentModel(t, xdims, inits, &onnxpb.NodeProto{Name: proto.String("rec"), OpType: proto.String(op), Input: inputs, Output: outputs, Attribute: attrs}, outputs)
			got := runOutputs(t, m, xin, outputs)
			n := &onnxpb.NodeProto{Attribute: attrs}
			acts, err := recurrentActivations(n, c.kind, D)
			if err != nil {
				t.Fatal(err)
			}
			y, yh, yc := refRecurrent(c, acts, T, B, I, H, x, w, r, b, h0, c0, p)
			if c.layout == 1 {
				y = permute(y, []int{T, D, B, H}, []int{2, 0, 1, 3})
				yh = permute(yh, []int{D, B, H}, []int{1, 0, 2})
				yc = permute(yc, []int{D, B, H}, []int{1, 0, 2})
			}
			for k, want := range [][]float64{y, yh, yc}[:len(outputs)] {
				g := got[k]
				if len(g) != len(want) {
					t.Fatalf("%s: %d values, want %d", outputs[k], len(g), len(want))
				}
				for i := range want {
					if !(math.Abs(g[i]-want[i]) <= 1e-12+1e-10*math.Abs(want[i])) {
						t.Fatalf("%s[%d] = %.17g, the equations give %.17g", outputs[k], i, g[i], want[i])
					}
				}
			}
		})
	}
}

// recurrentModel imports a model of one node with the f64 input x.
func recurrentModel(t *testing.T, xdims []int, inits []*onnxpb.TensorProto, n *onnxpb.NodeProto, outputs []string) *Model {
	t.Helper()
	f64 := int32(onnxpb.TensorProto_DOUBLE)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range xdims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
	}
	g := &onnxpb.GraphProto{
		Name:        proto.String("t"),
		Initializer: inits,
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f64, Shape: shape}}}}},
		Node: []*onnxpb.NodeProto{n},
	}
	for _, o := range outputs {
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	data, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runOutputs runs m's forward graph on x and returns the named outputs.
func runOutputs(t *testing.T, m *Model, x []float64, outputs []string) [][]float64 {
	t.Helper()
	p, err := kiln.Compile(m.Graph, kiln.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := kiln.NewExecutor(p, kiln.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	for _, pr := range m.Params {
		if err := ex.Set(pr.Name, kernels.Tensor{Type: pr.Type, Data: pr.Data}); err != nil {
			t.Fatal(err)
		}
	}
	in, err := ex.Get("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := kernels.SetFloat64s(in, x); err != nil {
		t.Fatal(err)
	}
	if err := ex.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out [][]float64
	for _, o := range outputs {
		v, err := ex.Get(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kernels.Float64s(v))
	}
	return out
}

// TestRecurrentRefused checks the one-line errors for what the unrolling
// does not support.
func TestRecurrentRefused(t *testing.T) {
	const T, B, I, H = 3, 2, 2, 2
	w := make([]float64, 4*H*I)
	r := make([]float64, 4*H*H)
	base := func() ([]*onnxpb.TensorProto, []string) {
		return []*onnxpb.TensorProto{f64s("W", []int{1, 4 * H, I}, w), f64s("R", []int{1, 4 * H, H}, r)}, []string{"x", "W", "R"}
	}
	for _, tc := range []struct {
		name  string
		edit  func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto
		error string
	}{
		{"padded sequences", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Input = append(in, "", "lens")
			return append(inits, &onnxpb.TensorProto{Name: proto.String("lens"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{B}, Int64Data: []int64{T, 2}})
		}, `node "rec" (LSTM): sequence_lens holds 2, but only sequences of the full length 3 are supported (padded sequences are not)`},
		{"unknown activation", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: proto.String("activations"), Type: onnxpb.AttributeProto_STRINGS.Enum(), Strings: [][]byte{[]byte("Sigmoid"), []byte("ThresholdedRelu"), []byte("Tanh")}})
			return inits
		}, `node "rec" (LSTM): activation "ThresholdedRelu" is not supported (Sigmoid, Tanh, Relu, LeakyRelu, Elu, HardSigmoid, Softsign, Softplus, Affine, ScaledTanh are)`},
		{"activation count", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: proto.String("activations"), Type: onnxpb.AttributeProto_STRINGS.Enum(), Strings: [][]byte{[]byte("Sigmoid")}})
			return inits
		}, `node "rec" (LSTM): expected 3 activations (or 3 per direction), found 1`},
		{"hidden size", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Attribute = append(n.Attribute, aInt("hidden_size", 3))
			return inits
		}, `node "rec" (LSTM): hidden_size is 3, but R has shape [1 8 2]`},
		{"direction", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: proto.String("direction"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("bidirectional")})
			return inits
		}, `node "rec" (LSTM): input W has shape [1 8 2], expected [2 8 2]`},
		{"clip", func(inits []*onnxpb.TensorProto, in []string, n *onnxpb.NodeProto) []*onnxpb.TensorProto {
			n.Attribute = append(n.Attribute, aFloat("clip", -1))
			return inits
		}, `node "rec" (LSTM): clip -1 is not positive`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inits, in := base()
			n := &onnxpb.NodeProto{Name: proto.String("rec"), OpType: proto.String("LSTM"), Input: in, Output: []string{"Y"}}
			inits = tc.edit(inits, in, n)
			f64 := int32(onnxpb.TensorProto_DOUBLE)
			shape := &onnxpb.TensorShapeProto{}
			for _, d := range []int64{T, B, I} {
				shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
			}
			data, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}, Graph: &onnxpb.GraphProto{
				Name: proto.String("t"), Initializer: inits, Node: []*onnxpb.NodeProto{n},
				Input:  []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f64, Shape: shape}}}}},
				Output: []*onnxpb.ValueInfoProto{{Name: proto.String("Y")}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(data, "")
			if err == nil || err.Error() != tc.error || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want %s", err, tc.error)
			}
		})
	}
}
