// Package onnx imports ONNX models as kiln graphs: the graph inputs that are
// not initializers become inputs; the float initializers that reach the
// first output (the loss) through differentiable kiln ops become params,
// with the initializers' values as their initial values; shape arithmetic
// on constants is folded at import, so the result is a static graph. The
// ops it translates, and their rules, are in the table Ops; docs/ONNX.md
// lists them. A training-mode BatchNormalization's running statistics are
// state that training updates (Model.States). Options choose static shapes,
// the params that train (Freeze, Train) and a loss appended to a model
// exported without one. Model.WriteTrained writes a trained model back as
// ONNX, and Export writes a kiln graph as ONNX for inference elsewhere.
package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// MinOpset and MaxOpset bound the default-domain opset versions Import
// reads. Opsets before 7 are read with their legacy broadcasting (the
// broadcast and axis attributes of the binary ops and Pow) and their
// attributes (Concat's default axis 1 before 4, Pad's paddings before 2,
// Dropout's is_test before 7).
const (
	MinOpset = 1
	MaxOpset = 21
)

// Model is an imported ONNX model.
type Model struct {
	// Graph is the kiln graph; its first output is the model's first output
	// (the loss when the model was exported with one).
	Graph *ir.Graph
	// Params holds the initial value of every param of Graph, taken from the
	// model's initializers, in the order of Graph.Params(); they are what kiln
	// train -init and Executor.Set take.
	Params []safetensors.Tensor
	// States holds the initial value of every state of Graph (the running
	// statistics of a training-mode BatchNormalization, which each training
	// step updates), taken from the initializers; set them like Params.
	States []safetensors.Tensor
	// Opset is the model's default-domain opset version.
	Opset int

	names map[string]string // kiln name -> ONNX name, for WriteTrained
}

// Options are the choices of an import.
type Options struct {
	// Shapes gives the static shape of graph inputs by ONNX name; it is
	// needed for an input with a symbolic dim (a batch size exported as
	// dynamic), and must agree with every static dim the model states.
	Shapes map[string][]int
	// FeedShapes gives the shapes of the tensors a run will feed, by name
	// (those of an inputs file): a graph input with a symbolic dim that
	// Shapes does not give takes its shape from here. Other names, and
	// inputs whose shape the model states in full, are left alone.
	FeedShapes map[string][]int
	// Freeze, when set, keeps the params whose ONNX name it matches
	// (anywhere in the name; anchor with ^ and $) at their initializer
	// values: they become constants, so no gradient is taken for them and
	// the optimizer has nothing of theirs to update. It must match a param.
	Freeze *regexp.Regexp
	// Train, when set, trains only the params whose ONNX name it matches;
	// the others are frozen as by Freeze. It must match a param, and at most
	// one of Freeze and Train is set.
	Train *regexp.Regexp
	// Loss, when set, appends a loss on the first output, for a model
	// exported without one (see Losses). The targets are a new input named
	// "labels" (with a suffix if the model has that name), the loss is the
	// new first output, named "loss", and the model's outputs follow it.
	Loss string
	// Constants gives graph inputs, by ONNX name, values known at import:
	// such an input is a constant of the graph, so the shape arithmetic a
	// model takes as an input (a Reshape's shape, a Slice's bounds, the
	// axes of a reduction) folds. Each must have the input's dtype and
	// agree with the dims the model states.
	Constants map[string]safetensors.Tensor
}

// Losses are the values of Options.Loss, each with the loss it appends on
// the first output y and the targets it takes.
var Losses = []struct{ Name, Doc string }{
	{"ce", "softmax_cross_entropy (mean) of logits y [N,C] against integer labels i64 [N] (torch CrossEntropyLoss)"},
	{"mse", "mse_loss (mean) of y against float targets of y's type (torch MSELoss)"},
	{"bce", "bce_with_logits (mean) of logits y against float targets in [0,1] of y's type (torch BCEWithLogitsLoss)"},
}

// Import reads the ONNX model file at path. External data files are read
// from path's folder. Every error names path.
func Import(path string) (*Model, error) { return Options{}.Import(path) }

// Import reads the ONNX model file at path with the options o.
func (o Options) Import(path string) (*Model, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > ir.MaxTensorBytes {
		return nil, fmt.Errorf("%s: the file is %d bytes, larger than kiln reads (%d)", path, fi.Size(), int64(ir.MaxTensorBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := o.Decode(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Decode imports a serialized ONNX ModelProto. dir is the folder external
// data files are read from ("" refuses external data). The params' values
// (Model.Params) may share data's bytes: data must not change after.
func Decode(data []byte, dir string) (*Model, error) { return Options{}.Decode(data, dir) }

// Decode imports a serialized ONNX ModelProto with the options o.
func (o Options) Decode(data []byte, dir string) (*Model, error) {
	mp, err := unmarshalModel(data)
	if err != nil {
		return nil, fmt.Errorf("not an ONNX model (a truncated or damaged file?): %v", err)
	}
	if mp.Graph == nil {
		return nil, errors.New("not an ONNX model: it has no graph")
	}
	opset := -1
	for _, o := range mp.OpsetImport {
		switch o.GetDomain() {
		case "", "ai.onnx":
			opset = int(o.GetVersion())
		default:
			return nil, fmt.Errorf("opset domain %q is not supported (only the default ONNX domain is)", ir.Excerpt(o.GetDomain()))
		}
	}
	if opset < 0 {
		return nil, errors.New("the model imports no opset of the default ONNX domain")
	}
	if opset < MinOpset || opset > MaxOpset {
		return nil, fmt.Errorf("opset %d is not supported (kiln reads opsets %d to %d)", opset, MinOpset, MaxOpset)
	}
	im := &importer{opset: opset, dir: dir, env: map[string]*val{}, names: map[string]string{}, opts: o, paramConst: map[ir.ID]*tensor{}}
	if err := im.run(mp.Graph); err != nil {
		return nil, err
	}
	return &Model{Graph: im.g, Params: im.params, States: im.states, Opset: opset, names: im.names}, nil
}

// val is an ONNX value during import: a kiln value, a constant known at
// import (c), or both once the constant was given a kiln value.
type val struct {
	id    ir.ID
	c     *tensor
	param bool // an initializer of a float dtype: becomes a param when used as a kiln value
	name  string
	// missing, when set, says why the value is not available: an output
	// of a node that kiln does not compute.
	missing string
}

type importer struct {
	opset  int
	dir    string
	g      *ir.Graph
	env    map[string]*val
	names  map[string]string // sanitized name -> ONNX name
	params []safetensors.Tensor
	states []safetensors.Tensor
	node   *onnxpb.NodeProto
	opts   Options
	// paramConst holds each param's initializer, for demoteParams.
	paramConst map[ir.ID]*tensor
}

func (im *importer) run(gp *onnxpb.GraphProto) error {
	im.g = ir.New(graphName(gp.GetName()))
	// Unsupported ops are reported all at once, before anything else.
	if err := unsupported(gp.Node); err != nil {
		return err
	}
	inits := map[string]bool{}
	for _, t := range gp.Initializer {
		c, err := im.readTensor(t, true)
		if err != nil {
			return fmt.Errorf("initializer %q: %w", ir.Excerpt(t.GetName()), err)
		}
		inits[t.GetName()] = true
		im.env[t.GetName()] = &val{id: ir.NoID, c: c, param: c.dt.IsFloat(), name: t.GetName()}
	}
	for _, in := range gp.Input {
		if inits[in.GetName()] {
			continue
		}
		shape := im.opts.Shapes[in.GetName()]
		if fed, ok := im.opts.FeedShapes[in.GetName()]; ok && shape == nil && !staticShape(in) {
			shape = fed
		}
		c, isConst := im.opts.Constants[in.GetName()]
		if isConst {
			shape = c.Type.Shape
		}
		t, err := valueType(in, shape)
		if err != nil {
			return fmt.Errorf("input %q: %w", ir.Excerpt(in.GetName()), err)
		}
		if isConst {
			if !c.Type.Equal(t) {
				return fmt.Errorf("input %q: the constant given is %s, the model's input %s", ir.Excerpt(in.GetName()), c.Type, t)
			}
			im.env[in.GetName()] = &val{id: ir.NoID, c: constTensor(c), name: in.GetName()}
			continue
		}
		id, err := im.g.Leaf(ir.OpInput, im.sanitize(in.GetName()), t, nil)
		if err != nil {
			return fmt.Errorf("input %q: %w", ir.Excerpt(in.GetName()), err)
		}
		im.env[in.GetName()] = &val{id: id, name: in.GetName()}
	}
	for _, n := range gp.Node {
		im.node = n
		rule := Ops[n.GetOpType()]
		outs, err := rule.Emit(im, n)
		if err != nil {
			return fmt.Errorf("node %q (%s): %w", ir.Excerpt(n.GetName()), n.GetOpType(), err)
		}
		for i, o := range n.Output {
			if o == "" {
				continue
			}
			if i >= len(outs) || outs[i] == nil {
				// An output kiln does not compute (Dropout's mask, the running
				// statistics of a training BatchNormalization) is an error
				// only where a node or the graph uses it.
				im.env[o] = &val{id: ir.NoID, name: o, missing: fmt.Sprintf("output %d of node %q (%s) is not supported", i, ir.Excerpt(n.GetName()), n.GetOpType())}
				continue
			}
			outs[i].name = o
			im.env[o] = outs[i]
		}
	}
	for name := range im.opts.Shapes {
		_, isConst := im.opts.Constants[name]
		if v, ok := im.env[name]; !ok || (!isConst && (v.id == ir.NoID || im.g.Value(v.id).Op != ir.OpInput)) {
			return fmt.Errorf("a shape is given for %q, which is not a graph input", ir.Excerpt(name))
		}
	}
	for name := range im.opts.Constants {
		if !slices.ContainsFunc(gp.Input, func(in *onnxpb.ValueInfoProto) bool { return in.GetName() == name && !inits[name] }) {
			return fmt.Errorf("a constant is given for %q, which is not a graph input", ir.Excerpt(name))
		}
	}
	if len(gp.Output) == 0 {
		return errors.New("the graph has no outputs")
	}
	for _, o := range gp.Output {
		v, ok := im.env[o.GetName()]
		if !ok {
			return fmt.Errorf("output %q is not computed by any node", ir.Excerpt(o.GetName()))
		}
		id, err := im.value(v, true)
		if err != nil {
			return fmt.Errorf("output %q: %w", ir.Excerpt(o.GetName()), err)
		}
		if op := im.g.Value(id).Op; op == ir.OpInput || op == ir.OpParam || op == ir.OpConst || slices.Contains(im.g.Outputs, id) {
			// An output that is an input, a param, a constant or another
			// output (through Identity) gets a value of its own to carry
			// its name: a reshape to its own shape.
			if id, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(im.shapeOf(id)...)), id); err != nil {
				return fmt.Errorf("output %q: %w", ir.Excerpt(o.GetName()), err)
			}
		}
		if err := im.g.Rename(id, im.sanitize(o.GetName())); err != nil {
			return fmt.Errorf("output %q: %w", ir.Excerpt(o.GetName()), err)
		}
		im.g.Outputs = append(im.g.Outputs, id)
	}
	if err := im.appendLoss(); err != nil {
		return err
	}
	if err := im.demoteParams(); err != nil {
		return err
	}
	if err := ir.Check(im.g); err != nil {
		return err
	}
	return nil
}

// demoteParams turns the params without a differentiable path to the first
// output (the loss) into constants: only what the loss depends on trains.
// So do the params that Options.Freeze matches, or that Options.Train does
// not.
func (im *importer) demoteParams() error {
	reach := make([]bool, len(im.g.Values))
	stack := []ir.ID{im.g.Outputs[0]}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if reach[id] {
			continue
		}
		reach[id] = true
		v := im.g.Value(id)
		if v.Op.Differentiable() {
			stack = append(stack, v.Args...)
		}
	}
	var names []string
	var reached []safetensors.Tensor
	for _, p := range im.params {
		if id, _ := im.g.Lookup(p.Name); reach[id] {
			names = append(names, im.names[p.Name])
			reached = append(reached, p)
		}
	}
	frozen, err := ir.MatchFrozen(names, im.opts.Freeze, im.opts.Train)
	if err != nil {
		return err
	}
	trained := map[string]bool{}
	for i, p := range reached {
		trained[p.Name] = !frozen[i]
	}
	kept := im.params[:0]
	for _, p := range im.params {
		id, _ := im.g.Lookup(p.Name)
		if trained[p.Name] {
			kept = append(kept, p)
			continue
		}
		c := im.paramConst[id]
		v := im.g.Value(id)
		v.Op = ir.OpConst
		v.Attrs = ir.MakeAttrs("dtype", ir.String(c.dt.String()), "shape", ir.Ints(c.shape...), "value", ir.Floats(c.floats()...))
	}
	im.params = kept
	return nil
}

// appendLoss appends the loss Options.Loss names on the first output, with
// a new input for its targets; the loss becomes the first output.
func (im *importer) appendLoss() error {
	if im.opts.Loss == "" {
		return nil
	}
	y := im.g.Outputs[0]
	yt := im.g.Type(y)
	yname := ir.Excerpt(im.names[im.g.Value(y).Name])
	var (
		op ir.Op
		lt ir.Type
	)
	switch im.opts.Loss {
	case "ce":
		if len(yt.Shape) != 2 || !yt.DType.IsFloat() {
			return fmt.Errorf("loss ce: expected the first output %q to be float logits [N,C], found %s", yname, yt)
		}
		op, lt = ir.OpSoftmaxCrossEntropy, ir.Type{DType: ir.I64, Shape: ir.Shape{yt.Shape[0]}}
	case "mse", "bce":
		if len(yt.Shape) == 0 || !yt.DType.IsFloat() {
			return fmt.Errorf("loss %s: expected the first output %q to be a float tensor of rank >= 1 (a scalar first output is a loss already), found %s", im.opts.Loss, yname, yt)
		}
		op, lt = ir.OpMSELoss, ir.Type{DType: yt.DType, Shape: yt.Shape.Clone()}
		if im.opts.Loss == "bce" {
			op = ir.OpBCEWithLogits
		}
	default:
		return fmt.Errorf("unknown loss %q: expected ce, mse or bce", ir.Excerpt(im.opts.Loss))
	}
	labels, err := im.g.Leaf(ir.OpInput, im.sanitize("labels"), lt, nil)
	if err != nil {
		return err
	}
	loss, err := im.g.Add(im.sanitize("loss"), op, ir.MakeAttrs("reduction", ir.String("mean")), y, labels)
	if err != nil {
		return fmt.Errorf("loss %s: %w", im.opts.Loss, err)
	}
	im.g.Outputs = append([]ir.ID{loss}, im.g.Outputs...)
	return nil
}

// unsupported returns one error line per op type that the table lacks, or
// whose domain is not the default one, with its count and first node.
func unsupported(nodes []*onnxpb.NodeProto) error {
	type miss struct {
		count int
		first string
	}
	missing := map[string]*miss{}
	for _, n := range nodes {
		key := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			key = d + "." + key
		} else if _, ok := Ops[key]; ok {
			continue
		}
		if m, ok := missing[key]; ok {
			m.count++
		} else {
			missing[key] = &miss{1, n.GetName()}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	keys := make([]string, 0, len(missing))
	for k := range missing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("unsupported op %s: %d node(s), the first %q", ir.Excerpt(k), missing[k].count, ir.Excerpt(missing[k].first))
	}
	return errors.New(strings.Join(lines, "\n"))
}

var badNameChar = regexp.MustCompile(`[^A-Za-z0-9_.]`)

// kirName maps an ONNX name to .kir's name syntax: every character other
// than a letter, digit, '_' or '.' becomes '_', and a leading '_' run left by
// a leading '/' (PyTorch's "/fc1/Gemm_output_0") is kept as is.
func kirName(s string) string { return badNameChar.ReplaceAllString(s, "_") }

var badGraphNameChar = regexp.MustCompile(`[^A-Za-z0-9_]`)

// graphName maps an ONNX graph name to a .kir graph name (an identifier):
// every character other than a letter, digit or '_' becomes '_', a leading
// digit gets a '_' before it, and an empty name is "onnx".
func graphName(s string) string {
	s = badGraphNameChar.ReplaceAllString(s, "_")
	switch {
	case s == "":
		return "onnx"
	case s[0] >= '0' && s[0] <= '9':
		return "_" + s
	}
	return s
}

// sanitize returns the kiln name of ONNX name s, unique in the graph: s
// itself when it is valid .kir, else kirName(s); a numeric suffix is added
// when another ONNX name maps to it or a value kiln named (%t12) has it.
func (im *importer) sanitize(s string) string {
	k := kirName(s)
	if k == "" {
		k = "v"
	}
	base := k
	for i := 1; ; i++ {
		prev, ok := im.names[k]
		if ok && prev == s {
			break
		}
		if _, taken := im.g.Lookup(k); !ok && !taken {
			break
		}
		k = fmt.Sprintf("%s_%d", base, i)
	}
	im.names[k] = s
	return k
}

// value returns v as a kiln value: a constant becomes a param (a float
// initializer, when asParam) or a const op.
func (im *importer) value(v *val, asParam bool) (ir.ID, error) {
	if v.id != ir.NoID {
		return v.id, nil
	}
	if v.missing != "" {
		return ir.NoID, errors.New(v.missing)
	}
	if v.c == nil {
		return ir.NoID, fmt.Errorf("value %q has no value", ir.Excerpt(v.name))
	}
	if v.param && asParam {
		t := ir.Type{DType: v.c.dt, Shape: ir.Shape(v.c.shape).Clone()}
		name := im.sanitize(v.name)
		id, err := im.g.Leaf(ir.OpParam, name, t, nil)
		if err != nil {
			return ir.NoID, err
		}
		im.params = append(im.params, safetensors.Tensor{Name: name, Type: t, Data: v.c.bytes()})
		im.paramConst[id] = v.c
		v.id = id
		return id, nil
	}
	id, err := im.constOp(v.c)
	if err != nil {
		return ir.NoID, err
	}
	if !v.param {
		v.id = id
	}
	return id, nil
}

func (im *importer) constOp(c *tensor) (ir.ID, error) {
	vals := c.floats()
	attrs := ir.MakeAttrs("dtype", ir.String(c.dt.String()), "shape", ir.Ints(c.shape...), "value", ir.Floats(vals...))
	return im.g.Add("", ir.OpConst, attrs)
}
