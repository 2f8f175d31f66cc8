package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// modelFlags are the flags that choose how a model is loaded: -freeze and
// -train (the params that train; an ONNX model's frozen params become
// constants, a .kir model's stay params marked frozen, ir.Freeze), and the
// ONNX import flags -shape and -loss (onnx.Options), which a .kir model
// refuses. Every command that takes a model takes them.
type modelFlags struct {
	shapes        shapesFlag
	freeze, train string
	loss          string
	fed           map[string][]int // the shapes of the tensors of the run's inputs file
}

// feed records the shapes of the tensors a run feeds (its -inputs file), so
// that an ONNX input with a symbolic dim takes its shape from there when
// -shape does not give it.
func (m *modelFlags) feed(tensors []safetensors.Tensor) {
	m.fed = map[string][]int{}
	for _, t := range tensors {
		m.fed[t.Name] = t.Type.Shape
	}
}

func addModelFlags(fs *flag.FlagSet) *modelFlags {
	m := &modelFlags{}
	fs.Var(&m.shapes, "shape", "NAME=DIMS (32x64 or 32,64): the shape of the ONNX model's input NAME, for a symbolic dim; repeat for more inputs")
	fs.StringVar(&m.freeze, "freeze", "", "keep the params whose names this regular expression matches at their initial values (no gradient, no optimizer state, no update)")
	fs.StringVar(&m.train, "train", "", "train only the params whose names this regular expression matches; freeze the rest")
	var names []string
	for _, l := range onnx.Losses {
		names = append(names, l.Name)
	}
	fs.StringVar(&m.loss, "loss", "", "append a loss on the ONNX model's first output, with a new input \"labels\" for its targets: "+strings.Join(names, ", ")+" (for a model exported without one)")
	return m
}

// onnxOnly returns the names of the ONNX import flags given (those a .kir
// model refuses), in a fixed order.
func (m *modelFlags) onnxOnly() []string {
	var g []string
	for _, f := range m.given() {
		if f == "-shape" || f == "-loss" {
			g = append(g, f)
		}
	}
	return g
}

// freezeKIR marks the params of g, the .kir model at path, that -freeze or
// -train selects as frozen (ir.Freeze).
func (m *modelFlags) freezeKIR(path string, g *ir.Graph) error {
	o, err := m.options()
	if err != nil {
		return err
	}
	if err := ir.Freeze(g, o.Freeze, o.Train); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// given returns the names of the flags given, in a fixed order.
func (m *modelFlags) given() []string {
	var g []string
	if m == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"-shape", len(m.shapes) > 0}, {"-freeze", m.freeze != ""}, {"-train", m.train != ""}, {"-loss", m.loss != ""}} {
		if f.set {
			g = append(g, f.name)
		}
	}
	return g
}

// options returns the import options the flags give; bad values are usage
// errors.
func (m *modelFlags) options() (onnx.Options, error) {
	var o onnx.Options
	if m == nil {
		return o, nil
	}
	if m.freeze != "" && m.train != "" {
		return o, usagef("-freeze and -train both choose the params that train; give one")
	}
	var err error
	if m.freeze != "" {
		if o.Freeze, err = regexp.Compile(m.freeze); err != nil {
			return o, usagef("-freeze: %v", err)
		}
	}
	if m.train != "" {
		if o.Train, err = regexp.Compile(m.train); err != nil {
			return o, usagef("-train: %v", err)
		}
	}
	if m.loss != "" && !slices.ContainsFunc(onnx.Losses, func(l struct{ Name, Doc string }) bool { return l.Name == m.loss }) {
		return o, usagef("-loss must be ce, mse or bce, found %q", m.loss)
	}
	o.Loss = m.loss
	o.FeedShapes = m.fed
	if len(m.shapes) > 0 {
		o.Shapes = map[string][]int(m.shapes)
	}
	return o, nil
}

// settings records the flags in a run's settings (see trainSettings).
func (m *modelFlags) settings(s map[string]string) {
	if m == nil {
		m = &modelFlags{}
	}
	s["-shape"] = m.shapes.String()
	s["-freeze"], s["-train"], s["-loss"] = m.freeze, m.train, m.loss
}

// shapesFlag is -shape: NAME=DIMS, repeatable, one shape per name.
type shapesFlag map[string][]int

func (s *shapesFlag) String() string {
	if s == nil {
		return ""
	}
	var parts []string
	for name, dims := range *s {
		d := make([]string, len(dims))
		for i, n := range dims {
			d[i] = strconv.Itoa(n)
		}
		parts = append(parts, name+"="+strings.Join(d, "x"))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (s *shapesFlag) Set(v string) error {
	name, dims, ok := strings.Cut(v, "=")
	if !ok || name == "" || dims == "" {
		return fmt.Errorf("expected NAME=DIMS (x=32x64), found %q", v)
	}
	if _, dup := (*s)[name]; dup {
		return fmt.Errorf("the shape of %q is given twice", name)
	}
	var shape []int
	for _, f := range strings.FieldsFunc(dims, func(r rune) bool { return r == 'x' || r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("%s: expected dims of positive integers separated by x or ',' (32x64), found %q", name, dims)
		}
		shape = append(shape, n)
	}
	if len(shape) == 0 || strings.Count(dims, "x")+strings.Count(dims, ",") != len(shape)-1 {
		return fmt.Errorf("%s: expected dims of positive integers separated by x or ',' (32x64), found %q", name, dims)
	}
	if *s == nil {
		*s = shapesFlag{}
	}
	(*s)[name] = shape
	return nil
}

// paramsDesc describes the params of t's training step for the first line
// of a run: "4 params (4810 values)", with the frozen ones named after the
// values when there are any ("; frozen: %w1, %b1").
func paramsDesc(t *kiln.Trainer) string {
	var frozen []string
	for _, i := range t.Plan.Params {
		if b := t.Plan.Buffers[i]; t.Plan.Graph.Frozen(b.Value) {
			frozen = append(frozen, "%"+b.Name)
		}
	}
	d := fmt.Sprintf("%d params (%d values", len(t.Plan.Params), countParams(t))
	if len(frozen) > 0 {
		d += "; frozen: " + ir.Excerpt(strings.Join(frozen, ", "))
	}
	return d + ")"
}
