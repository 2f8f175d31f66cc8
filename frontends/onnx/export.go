package onnx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// ExportOpset is the default-domain opset version Export writes.
const ExportOpset = 17

// Export writes the forward graph of g as an ONNX model (opset
// ExportOpset) to w, for inference elsewhere: the values g's outputs
// depend on (set g.Outputs to choose them), with the inputs they read as
// graph inputs, the params as initializers holding the values params give
// (by name; every param the outputs read needs one), and kiln's names.
// Each kiln op is written through one table (docs/ONNX.md lists it); an op without an
// ONNX form, or with attribute values ONNX cannot state, is refused with
// an error naming the op and the value. Dropout is written as the identity
// (inference), and batch_norm with the batch's statistics, as kiln computes
// it.
func Export(g *ir.Graph, params []safetensors.Tensor, w io.Writer) error {
	if len(g.Outputs) == 0 {
		return errors.New("the graph has no outputs")
	}
	byName := map[string]safetensors.Tensor{}
	for _, p := range params {
		id, ok := g.Lookup(p.Name)
		if !ok || g.Value(id).Op != ir.OpParam {
			return fmt.Errorf("tensor %q of the params is not a param of graph %s", ir.Excerpt(p.Name), g.Name)
		}
		if t := g.Type(id); !t.Equal(p.Type) || len(p.Data) != t.Bytes() {
			return fmt.Errorf("param %q: expected %s, found %s (%d bytes)", ir.Excerpt(p.Name), t, p.Type, len(p.Data))
		}
		byName[p.Name] = p
	}
	used := make([]bool, len(g.Values))
	for _, o := range g.Outputs {
		used[o] = true
	}
	for i := len(g.Values) - 1; i >= 0; i-- {
		if used[i] {
			for _, a := range g.Values[i].Args {
				used[a] = true
			}
		}
	}
	e := &exporter{g: g, gp: &onnxpb.GraphProto{Name: proto.String(g.Name)}, taken: map[string]bool{}}
	for _, v := range g.Values {
		e.taken[v.Name] = true
	}
	for i := range g.Values {
		if !used[i] {
			continue
		}
		id := ir.ID(i)
		v := &g.Values[i]
		switch v.Op {
		case ir.OpInput:
			e.gp.Input = append(e.gp.Input, valueInfo(v.Name, v.Type))
			continue
		case ir.OpParam:
			p, ok := byName[v.Name]
			if !ok {
				return fmt.Errorf("param %q has no value in the params given", ir.Excerpt(v.Name))
			}
			e.gp.Initializer = append(e.gp.Initializer, rawTensor(v.Name, v.Type, p.Data))
			continue
		}
		rule, ok := exportOps[v.Op]
		if !ok {
			return fmt.Errorf("%%%s: op %s has no ONNX form in kiln's export", ir.Excerpt(v.Name), v.Op)
		}
		if err := rule.Emit(e, id, v); err != nil {
			return fmt.Errorf("%%%s (%s): %w", ir.Excerpt(v.Name), v.Op, err)
		}
	}
	seen := map[ir.ID]bool{}
	for _, o := range g.Outputs {
		name := g.Value(o).Name
		if seen[o] || g.Value(o).Op == ir.OpInput || g.Value(o).Op == ir.OpParam {
			// ONNX outputs are values of their own: an output named twice,
			// or an input or initializer, goes through Identity.
			alias := e.fresh(name + ".out")
			e.node("Identity", []string{name}, alias)
			name = alias
		}
		seen[o] = true
		e.gp.Output = append(e.gp.Output, valueInfo(name, g.Type(o)))
	}
	m := &onnxpb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("kiln"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(ExportOpset)}},
		Graph:        e.gp,
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// exportRule writes one kiln op as ONNX nodes: Emit writes the nodes that
// compute value id (v) from its arguments, the last one named v.Name; Doc
// says what they are.
type exportRule struct {
	Emit func(e *exporter, id ir.ID, v *ir.Value) error
	Doc  string
}

// exporter builds the ONNX graph of Export.
type exporter struct {
	g     *ir.Graph
	gp    *onnxpb.GraphProto
	taken map[string]bool
	n     int
}

// fresh returns a name no value of the graph or the export has, from base.
func (e *exporter) fresh(base string) string {
	for {
		e.n++
		name := fmt.Sprintf("%s.%d", base, e.n)
		if !e.taken[name] {
			e.taken[name] = true
			return name
		}
	}
}

func (e *exporter) node(op string, ins []string, out string, attrs ...*onnxpb.AttributeProto) {
	e.gp.Node = append(e.gp.Node, &onnxpb.NodeProto{OpType: proto.String(op), Input: slices.Clone(ins), Output: []string{out}, Name: proto.String(out), Attribute: attrs})
}

// tmp writes a node whose result is a new value and returns its name.
func (e *exporter) tmp(base, op string, ins []string, attrs ...*onnxpb.AttributeProto) string {
	out := e.fresh(base)
	e.node(op, ins, out, attrs...)
	return out
}

// ints writes an i64 initializer and returns its name.
func (e *exporter) ints(base string, v ...int) string {
	t := &tensor{dt: ir.I64, shape: []int{len(v)}}
	for _, x := range v {
		t.i = append(t.i, int64(x))
	}
	name := e.fresh(base)
	e.gp.Initializer = append(e.gp.Initializer, rawTensor(name, ir.Type{DType: ir.I64, Shape: ir.Shape{len(v)}}, t.bytes()))
	return name
}

// scalar writes a scalar initializer of dtype dt and returns its name.
func (e *exporter) scalar(base string, x float64, dt ir.DType) string {
	t := &tensor{dt: dt, shape: []int{}}
	if dt.IsFloat() {
		t.f = []float64{x}
	} else {
		t.i = []int64{int64(x)}
	}
	name := e.fresh(base)
	e.gp.Initializer = append(e.gp.Initializer, rawTensor(name, ir.Type{DType: dt, Shape: ir.Shape{}}, t.bytes()))
	return name
}

func (e *exporter) arg(v *ir.Value, k int) string { return e.g.Value(v.Args[k]).Name }

func (e *exporter) args(v *ir.Value) []string {
	out := make([]string, len(v.Args))
	for k := range v.Args {
		out[k] = e.arg(v, k)
	}
	return out
}

func aI(name string, v int) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(int64(v))}
}

func aF(name string, v float64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(float32(v))}
}

func aIs(name string, v ...int) *onnxpb.AttributeProto {
	a := &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum()}
	for _, x := range v {
		a.Ints = append(a.Ints, int64(x))
	}
	return a
}

func aS(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

func valueInfo(name string, t ir.Type) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range t.Shape {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dtypeCode(t.DType))), Shape: shape}}}}
}

func rawTensor(name string, t ir.Type, data []byte) *onnxpb.TensorProto {
	dims := make([]int64, len(t.Shape))
	for k, d := range t.Shape {
		dims[k] = int64(d)
	}
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(dtypeCode(t.DType))), Dims: dims, RawData: slices.Clone(data)}
}

// exportOps is the export table: how each kiln op is written as ONNX
// (opset ExportOpset). docs/ONNX.md lists it.
var exportOps map[ir.Op]exportRule

func init() {
	exportOps = map[ir.Op]exportRule{
		ir.OpAdd: xSame("Add"), ir.OpSub: xSame("Sub"), ir.OpMul: xSame("Mul"), ir.OpDiv: xSame("Div"),
		ir.OpMaximum: xSame("Max"), ir.OpMinimum: xSame("Min"),
		ir.OpNeg: xSame("Neg"), ir.OpExp: xSame("Exp"), ir.OpLog: xSame("Log"), ir.OpSqrt: xSame("Sqrt"),
		ir.OpTanh: xSame("Tanh"), ir.OpSigmoid: xSame("Sigmoid"), ir.OpRelu: xSame("Relu"), ir.OpAbs: xSame("Abs"),
		ir.OpSign: xSame("Sign"), ir.OpReciprocal: xSame("Reciprocal"), ir.OpSin: xSame("Sin"), ir.OpCos: xSame("Cos"),
		ir.OpErf: xSame("Erf"), ir.OpFloor: xSame("Floor"), ir.OpCeil: xSame("Ceil"), ir.OpRound: xSame("Round"),
		ir.OpGreater: xSame("Greater"), ir.OpGreaterEqual: xSame("GreaterOrEqual"), ir.OpLess: xSame("Less"),
		ir.OpLessEqual: xSame("LessOrEqual"), ir.OpEqual: xSame("Equal"), ir.OpLogicalAnd: xSame("And"),
		ir.OpLogicalOr: xSame("Or"), ir.OpLogicalNot: xSame("Not"), ir.OpWhere: xSame("Where"),
		ir.OpRsqrt: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Reciprocal", []string{e.tmp(v.Name, "Sqrt", e.args(v))}, v.Name)
			return nil
		}, "Reciprocal(Sqrt)"},
		ir.OpSquare: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Mul", []string{e.arg(v, 0), e.arg(v, 0)}, v.Name)
			return nil
		}, "Mul(x, x)"},
		ir.OpPow: {func(e *exporter, id ir.ID, v *ir.Value) error {
			b := ""
			if len(v.Args) == 2 {
				b = e.arg(v, 1)
			} else {
				b = e.scalar(v.Name+".exponent", v.Attrs.Float("exponent", 1), e.g.Type(id).DType)
			}
			e.node("Pow", []string{e.arg(v, 0), b}, v.Name)
			return nil
		}, "Pow; an exponent attribute as a scalar initializer"},
		ir.OpClip: {func(e *exporter, id ir.ID, v *ir.Value) error {
			ins := []string{e.arg(v, 0), "", ""}
			dt := e.g.Type(id).DType
			if a, ok := v.Attrs.Get("min"); ok {
				f, _ := a.AsFloat()
				ins[1] = e.scalar(v.Name+".min", f, dt)
			}
			if a, ok := v.Attrs.Get("max"); ok {
				f, _ := a.AsFloat()
				ins[2] = e.scalar(v.Name+".max", f, dt)
			}
			e.node("Clip", ins, v.Name)
			return nil
		}, "Clip with min and max as scalar initializers"},
		ir.OpLeakyRelu: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("LeakyRelu", e.args(v), v.Name, aF("alpha", v.Attrs.Float("alpha", 0.01)))
			return nil
		}, "LeakyRelu {alpha}"},
		ir.OpElu: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Elu", e.args(v), v.Name, aF("alpha", v.Attrs.Float("alpha", 1)))
			return nil
		}, "Elu {alpha}"},
		ir.OpSilu: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Mul", []string{e.arg(v, 0), e.tmp(v.Name, "Sigmoid", e.args(v))}, v.Name)
			return nil
		}, "Mul(x, Sigmoid(x))"},
		ir.OpGelu: {exportGelu, `approximate "none": 0.5*x*(1 + Erf(x/sqrt(2))); "tanh": 0.5*x*(1 + Tanh(sqrt(2/pi)*(x + 0.044715*x^3))) (opset 17 has no Gelu)`},
		ir.OpMatmul: {func(e *exporter, id ir.ID, v *ir.Value) error {
			ins := e.args(v)
			for k, attr := range []string{"transpose_a", "transpose_b"} {
				if v.Attrs.Bool(attr, false) {
					r := len(e.g.Type(v.Args[k]).Shape)
					perm := make([]int, r)
					for j := range perm {
						perm[j] = j
					}
					perm[r-1], perm[r-2] = r-2, r-1
					ins[k] = e.tmp(v.Name, "Transpose", ins[k:k+1], aIs("perm", perm...))
				}
			}
			e.node("MatMul", ins, v.Name)
			return nil
		}, "MatMul; transpose_a/b as a Transpose of the last two axes"},
		ir.OpTranspose: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			var attrs []*onnxpb.AttributeProto
			if perm, ok := v.Attrs.Ints("perm"); ok {
				attrs = append(attrs, aIs("perm", perm...))
			}
			e.node("Transpose", e.args(v), v.Name, attrs...)
			return nil
		}, "Transpose {perm}"},
		ir.OpReshape:   xShape("Reshape"),
		ir.OpSqueeze:   xShape("Reshape"),
		ir.OpUnsqueeze: xShape("Reshape"),
		ir.OpBroadcastTo: {func(e *exporter, id ir.ID, v *ir.Value) error {
			e.node("Expand", []string{e.arg(v, 0), e.ints(v.Name+".shape", e.g.Type(id).Shape...)}, v.Name)
			return nil
		}, "Expand to the static shape"},
		ir.OpSum:  xReduce("ReduceSum", true),
		ir.OpMean: xReduce("ReduceMean", false),
		ir.OpMax:  xReduce("ReduceMax", false),
		ir.OpMin:  xReduce("ReduceMin", false),
		ir.OpSoftmax: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Softmax", e.args(v), v.Name, aI("axis", v.Attrs.Int("axis", -1)))
			return nil
		}, "Softmax {axis}"},
		ir.OpLogSoftmax: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("LogSoftmax", e.args(v), v.Name, aI("axis", v.Attrs.Int("axis", -1)))
			return nil
		}, "LogSoftmax {axis}"},
		ir.OpConst: {exportConst, "an initializer"},
		ir.OpConcat: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Concat", e.args(v), v.Name, aI("axis", v.Attrs.Int("axis", 0)))
			return nil
		}, "Concat {axis}"},
		ir.OpSlice: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			end := math.MaxInt64
			if a, ok := v.Attrs.Get("end"); ok {
				end = int(a.I)
			}
			n := v.Name
			e.node("Slice", []string{e.arg(v, 0), e.ints(n+".starts", v.Attrs.Int("start", 0)), e.ints(n+".ends", end),
				e.ints(n+".axes", v.Attrs.Int("axis", 0)), e.ints(n+".steps", v.Attrs.Int("step", 1))}, n)
			return nil
		}, "Slice with starts, ends, axes and steps initializers"},
		ir.OpPad: {func(e *exporter, id ir.ID, v *ir.Value) error {
			kp, _ := v.Attrs.Ints("pads")
			r := len(e.g.Type(v.Args[0]).Shape)
			pads := make([]int, 2*r)
			for j := 0; 2*j+1 < len(kp); j++ { // kiln: pairs from the last axis
				pads[r-1-j], pads[2*r-1-j] = kp[2*j], kp[2*j+1]
			}
			e.node("Pad", []string{e.arg(v, 0), e.ints(v.Name+".pads", pads...), e.scalar(v.Name+".value", v.Attrs.Float("value", 0), e.g.Type(id).DType)}, v.Name, aS("mode", "constant"))
			return nil
		}, "Pad, mode constant"},
		ir.OpIndexSelect: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Gather", e.args(v), v.Name, aI("axis", v.Attrs.Int("axis", 0)))
			return nil
		}, "Gather {axis}"},
		ir.OpEmbedding: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Gather", e.args(v), v.Name, aI("axis", 0))
			return nil
		}, "Gather {axis=0} of the table"},
		ir.OpConv1d:    {exportConv, "Conv {strides, pads, dilations, group}"},
		ir.OpConv2d:    {exportConv, "Conv {strides, pads, dilations, group}"},
		ir.OpMaxPool2d: {exportPool("MaxPool"), "MaxPool {kernel_shape, strides, pads, dilations}; input [N,C,H,W]"},
		ir.OpAvgPool2d: {exportPool("AveragePool"), "AveragePool {kernel_shape, strides, pads, count_include_pad}; input [N,C,H,W]"},
		ir.OpLayerNorm: {exportLayerNorm, "LayerNormalization {axis (the first normalized axis), epsilon}; Scale of ones and no B when kiln's has no weight or bias"},
		ir.OpBatchNorm: {exportBatchNorm, "with the batch's statistics, as kiln computes it: ReduceMean over every axis but 1, Sub, Mul, ReduceMean, Add eps, Sqrt, Div, times weight plus bias (reshaped [C,1,...])"},
		ir.OpDropout: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("Identity", e.args(v), v.Name)
			return nil
		}, "Identity (inference)"},
		ir.OpSoftmaxCrossEntropy: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			if !e.g.Type(v.Args[1]).DType.IsInt() {
				return errors.New("class-probability targets have no ONNX form; labels only")
			}
			e.node("SoftmaxCrossEntropyLoss", e.args(v), v.Name, aS("reduction", v.Attrs.Str("reduction", "mean")))
			return nil
		}, "SoftmaxCrossEntropyLoss {reduction} (integer labels)"},
		ir.OpNLLLoss: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			e.node("NegativeLogLikelihoodLoss", e.args(v), v.Name, aS("reduction", v.Attrs.Str("reduction", "mean")))
			return nil
		}, "NegativeLogLikelihoodLoss {reduction}"},
		ir.OpMSELoss: {func(e *exporter, _ ir.ID, v *ir.Value) error {
			d := e.tmp(v.Name, "Sub", e.args(v))
			sq := d
			switch red := v.Attrs.Str("reduction", "mean"); red {
			case "none":
				e.node("Mul", []string{d, d}, v.Name)
				return nil
			case "mean":
				sq = e.tmp(v.Name, "Mul", []string{d, d})
				e.node("ReduceMean", []string{sq}, v.Name, aI("keepdims", 0))
			default:
				sq = e.tmp(v.Name, "Mul", []string{d, d})
				e.node("ReduceSum", []string{sq}, v.Name, aI("keepdims", 0))
			}
			return nil
		}, "Sub, Mul, ReduceMean or ReduceSum"},
	}
}

// xSame writes the op as the ONNX op of the same arguments.
func xSame(op string) exportRule {
	return exportRule{func(e *exporter, _ ir.ID, v *ir.Value) error {
		e.node(op, e.args(v), v.Name)
		return nil
	}, op}
}

// xShape writes a reshape to the value's static shape.
func xShape(op string) exportRule {
	return exportRule{func(e *exporter, id ir.ID, v *ir.Value) error {
		e.node(op, []string{e.arg(v, 0), e.ints(v.Name+".shape", e.g.Type(id).Shape...)}, v.Name)
		return nil
	}, "Reshape to the static shape"}
}

// xReduce writes a reduction; axesInput: the axes are an input (ReduceSum
// at opset 13 on), else an attribute.
func xReduce(op string, axesInput bool) exportRule {
	return exportRule{func(e *exporter, _ ir.ID, v *ir.Value) error {
		ins := e.args(v)
		attrs := []*onnxpb.AttributeProto{aI("keepdims", map[bool]int{true: 1, false: 0}[v.Attrs.Bool("keepdims", false)])}
		if axes, ok := v.Attrs.Ints("axes"); ok {
			if len(axes) == 0 {
				e.node("Identity", ins, v.Name) // no axes reduced
				return nil
			}
			if axesInput {
				ins = append(ins, e.ints(v.Name+".axes", axes...))
			} else {
				attrs = append(attrs, aIs("axes", axes...))
			}
		}
		e.node(op, ins, v.Name, attrs...)
		return nil
	}, op + " {axes, keepdims}"}
}

func exportConst(e *exporter, id ir.ID, v *ir.Value) error {
	t := e.g.Type(id)
	a, _ := v.Attrs.Get("value")
	vals, ok := a.AsFloats()
	if !ok {
		return errors.New("the const has no numbers")
	}
	n := t.Shape.NumElements()
	if len(vals) == 1 && n != 1 {
		vals = slices.Repeat(vals, n)
	}
	c := &tensor{dt: t.DType, shape: t.Shape}
	if t.DType.IsFloat() {
		c.f = vals
	} else {
		for _, x := range vals {
			c.i = append(c.i, int64(x))
		}
	}
	e.gp.Initializer = append(e.gp.Initializer, rawTensor(v.Name, t, c.bytes()))
	return nil
}

func exportGelu(e *exporter, id ir.ID, v *ir.Value) error {
	dt := e.g.Type(id).DType
	x, n := e.arg(v, 0), v.Name
	var inner string
	switch a := v.Attrs.Str("approximate", "none"); a {
	case "none":
		inner = e.tmp(n, "Erf", []string{e.tmp(n, "Mul", []string{x, e.scalar(n+".c", 1/math.Sqrt2, dt)})})
	case "tanh":
		x3 := e.tmp(n, "Mul", []string{x, e.tmp(n, "Mul", []string{x, x})})
		s := e.tmp(n, "Add", []string{x, e.tmp(n, "Mul", []string{x3, e.scalar(n+".c", 0.044715, dt)})})
		inner = e.tmp(n, "Tanh", []string{e.tmp(n, "Mul", []string{s, e.scalar(n+".c", math.Sqrt(2/math.Pi), dt)})})
	default:
		return fmt.Errorf("approximate %q has no ONNX form", ir.Excerpt(a))
	}
	half := e.tmp(n, "Mul", []string{x, e.scalar(n+".half", 0.5, dt)})
	e.node("Mul", []string{half, e.tmp(n, "Add", []string{inner, e.scalar(n+".one", 1, dt)})}, n)
	return nil
}

// perAxis expands an attribute given once for every spatial axis.
func perAxis(v []int, d int) []int {
	if len(v) == 1 && d > 1 {
		return slices.Repeat(v, d)
	}
	return v
}

func exportConv(e *exporter, _ ir.ID, v *ir.Value) error {
	d := len(e.g.Type(v.Args[1]).Shape) - 2
	get := func(name string, def int) []int {
		if x, ok := v.Attrs.Ints(name); ok && len(x) > 0 {
			return perAxis(x, d)
		}
		return slices.Repeat([]int{def}, d)
	}
	p := get("padding", 0)
	e.node("Conv", e.args(v), v.Name, aIs("strides", get("stride", 1)...), aIs("pads", slices.Concat(p, p)...),
		aIs("dilations", get("dilation", 1)...), aI("group", v.Attrs.Int("groups", 1)))
	return nil
}

func exportPool(op string) func(e *exporter, id ir.ID, v *ir.Value) error {
	return func(e *exporter, _ ir.ID, v *ir.Value) error {
		if r := len(e.g.Type(v.Args[0]).Shape); r != 4 {
			return fmt.Errorf("ONNX pools [N,C,H,W]; the input has rank %d", r)
		}
		k, _ := v.Attrs.Ints("kernel")
		k = perAxis(k, 2)
		s, ok := v.Attrs.Ints("stride")
		if !ok || len(s) == 0 {
			s = k
		}
		p := []int{0, 0}
		if x, ok := v.Attrs.Ints("padding"); ok && len(x) > 0 {
			p = perAxis(x, 2)
		}
		attrs := []*onnxpb.AttributeProto{aIs("kernel_shape", k...), aIs("strides", perAxis(s, 2)...), aIs("pads", slices.Concat(p, p)...)}
		if op == "MaxPool" {
			dl := []int{1, 1}
			if x, ok := v.Attrs.Ints("dilation"); ok && len(x) > 0 {
				dl = perAxis(x, 2)
			}
			attrs = append(attrs, aIs("dilations", dl...))
		} else {
			attrs = append(attrs, aI("count_include_pad", map[bool]int{true: 1, false: 0}[v.Attrs.Bool("count_include_pad", true)]))
		}
		e.node(op, e.args(v), v.Name, attrs...)
		return nil
	}
}

func exportLayerNorm(e *exporter, _ ir.ID, v *ir.Value) error {
	t := e.g.Type(v.Args[0])
	axes, ok := v.Attrs.Ints("axes")
	if !ok {
		axes = []int{-1}
	}
	axis := len(t.Shape)
	for _, a := range axes {
		if a < 0 {
			a += len(t.Shape)
		}
		axis = min(axis, a)
	}
	ins := e.args(v)
	if len(ins) == 1 {
		norm := t.Shape[axis:]
		ones := &tensor{dt: t.DType, shape: []int(norm.Clone()), f: make([]float64, norm.NumElements())}
		for k := range ones.f {
			ones.f[k] = 1
		}
		name := e.fresh(v.Name + ".scale")
		e.gp.Initializer = append(e.gp.Initializer, rawTensor(name, ir.Type{DType: t.DType, Shape: norm}, ones.bytes()))
		ins = append(ins, name)
	}
	e.node("LayerNormalization", ins, v.Name, aI("axis", axis), aF("epsilon", v.Attrs.Float("eps", 1e-5)))
	return nil
}

func exportBatchNorm(e *exporter, id ir.ID, v *ir.Value) error {
	t := e.g.Type(id)
	r := len(t.Shape)
	if r < 2 {
		return fmt.Errorf("expected an input of rank >= 2, found rank %d", r)
	}
	axes := []int{0}
	chanShape := []int{t.Shape[1]}
	for k := 2; k < r; k++ {
		axes = append(axes, k)
		chanShape = append(chanShape, 1)
	}
	x, n := e.arg(v, 0), v.Name
	mean := e.tmp(n+".mean", "ReduceMean", []string{x}, aIs("axes", axes...), aI("keepdims", 1))
	d := e.tmp(n, "Sub", []string{x, mean})
	vr := e.tmp(n+".var", "ReduceMean", []string{e.tmp(n, "Mul", []string{d, d})}, aIs("axes", axes...), aI("keepdims", 1))
	std := e.tmp(n, "Sqrt", []string{e.tmp(n, "Add", []string{vr, e.scalar(n+".eps", v.Attrs.Float("eps", 1e-5), t.DType)})})
	shape := e.ints(n+".shape", chanShape...)
	w := e.tmp(n, "Reshape", []string{e.arg(v, 1), shape})
	b := e.tmp(n, "Reshape", []string{e.arg(v, 2), shape})
	y := e.tmp(n, "Mul", []string{e.tmp(n, "Div", []string{d, std}), w})
	e.node("Add", []string{y, b}, n)
	return nil
}
