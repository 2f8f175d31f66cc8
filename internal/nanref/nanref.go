// Package nanref reads the NaN and ±Inf reference cases that
// tests/pytorch/nan_reference.py computes with PyTorch: one small graph per
// case (one op applied to inputs that mix NaN, +Inf and -Inf with ordinary
// values), its inputs, and PyTorch's result and gradients in float32 and
// float64. The CPU tests (tests/nan_test.go) and the GPU tests (exec/gpu)
// both check kiln against them with Compare.
package nanref

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// Case is one reference case.
type Case struct {
	Name string
	// Src is the case's graph in the text format, in float32: the op's
	// result is %y; with Grad the graph's first output is the loss
	// sum(y * r) and its params are the float arguments.
	Src  string
	Grad bool
	// Inputs holds every input and param by name.
	Inputs map[string][]float64
	// Want holds, by dtype ("f32", "f64"), PyTorch's values by the name
	// kiln's executors use: "y" and "grad/NAME".
	Want map[string]map[string][]float64
}

// Load reads nan.kirs and nan.safetensors from dir.
func Load(dir string) ([]Case, error) {
	src, err := os.ReadFile(filepath.Join(dir, "nan.kirs"))
	if err != nil {
		return nil, err
	}
	ts, _, err := safetensors.ReadFile(filepath.Join(dir, "nan.safetensors"))
	if err != nil {
		return nil, err
	}
	var cases []Case
	byName := map[string]*Case{}
	for _, chunk := range strings.Split("\n"+string(src), "\ngraph ")[1:] {
		name, _, _ := strings.Cut(chunk, "\n")
		cases = append(cases, Case{Name: name, Src: "graph " + chunk, Inputs: map[string][]float64{},
			Want: map[string]map[string][]float64{"f32": {}, "f64": {}}})
	}
	for i := range cases {
		byName[cases[i].Name] = &cases[i]
	}
	for _, t := range ts {
		name, rest, _ := strings.Cut(t.Name, "/")
		c := byName[name]
		if c == nil {
			return nil, fmt.Errorf("nan.safetensors: %s has no graph in nan.kirs", t.Name)
		}
		kind, key, _ := strings.Cut(rest, "/")
		switch kind {
		case "in":
			c.Inputs[key] = t.Float64s()
		case "f32", "f64":
			c.Want[kind][key] = t.Float64s()
			if strings.HasPrefix(key, "grad/") {
				c.Grad = true
			}
		default:
			return nil, fmt.Errorf("nan.safetensors: unexpected tensor %s", t.Name)
		}
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	return cases, nil
}

// Source returns the case's graph with its float values in dt.
func (c *Case) Source(dt ir.DType) string {
	if dt == ir.F32 {
		return c.Src
	}
	return strings.ReplaceAll(c.Src, ": f32[", ": "+dt.String()+"[")
}

// Parse returns the case's graph in dt.
func (c *Case) Parse(dt ir.DType) (*ir.Graph, error) {
	return ir.Parse(c.Name+".kir", []byte(c.Source(dt)))
}

// Tolerance returns the bound on finite values in dt: |got - want| <= atol
// + rtol*|want|. PyTorch and kiln evaluate the special functions
// differently, so a few ulps apart.
func Tolerance(dt ir.DType) (rtol, atol float64) {
	if dt == ir.F32 {
		return 2e-5, 1e-6
	}
	return 1e-9, 1e-12
}

// Compare checks got against want: NaN exactly where want is NaN, the same
// infinity where want is infinite, and finite values within rtol and atol.
// It returns a line naming the first element that differs, or "".
func Compare(got, want []float64, rtol, atol float64) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d elements, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		var ok bool
		switch {
		case math.IsNaN(w):
			ok = math.IsNaN(g)
		case math.IsInf(w, 0):
			ok = g == w
		default:
			ok = !math.IsNaN(g) && !math.IsInf(g, 0) && math.Abs(g-w) <= atol+rtol*math.Abs(w)
		}
		if !ok {
			return fmt.Sprintf("[%d] = %v, want %v", i, g, w)
		}
	}
	return ""
}

// Consts rewrites every input and param of g into a const holding the
// case's values, so that constant folding sees the whole graph.
func (c *Case) Consts(g *ir.Graph) error {
	for i := range g.Values {
		v := &g.Values[i]
		if v.Op != ir.OpInput && v.Op != ir.OpParam {
			continue
		}
		vals, ok := c.Inputs[v.Name]
		if !ok {
			return fmt.Errorf("%s: no values for %s", c.Name, v.Name)
		}
		attrs, err := ir.Canonical(ir.OpConst, ir.MakeAttrs("dtype", ir.String(v.Type.DType.String()),
			"shape", ir.Ints(v.Type.Shape...), "value", ir.Floats(vals...)))
		if err != nil {
			return err
		}
		v.Op, v.Attrs = ir.OpConst, attrs
	}
	return ir.Check(g)
}

// Deviations lists the results, by case and then by name ("y",
// "grad/NAME", or "f32:NAME" for one dtype only), where kiln departs from
// PyTorch on purpose, with the reason (docs/ARCHITECTURE.md lists them).
// There the tests skip the elements where either side is NaN and check the
// rest as usual; the CPU test fails when the two agree everywhere, so a
// deviation that is gone is taken off the list.
var Deviations = map[string]map[string]string{
	"sign":                {"y": "sign(NaN) is NaN, as NumPy's; PyTorch 1.13 gives 0, which would hide the NaN"},
	"abs":                 {"grad/x": "the gradient of abs at NaN is dy*sign(NaN) = NaN; PyTorch's sgn gives 0, which would hide the NaN"},
	"elu":                 {"grad/x": "the gradient at NaN is NaN; PyTorch gives NaN or dy depending on the element's place in its vector loop"},
	"gelu_tanh":           {"grad/x": "the gradient at ±Inf is its limit (dy at +Inf, 0 at -Inf); PyTorch's formula computes Inf*0 there and gives NaN"},
	"gelu_grad_tanh":      {"y": "the gradient at ±Inf is its limit (dy at +Inf, 0 at -Inf); PyTorch's formula computes Inf*0 there and gives NaN"},
	"prod":                {"grad/x": prodDeviation},
	"prod_axis0":          {"grad/x": prodDeviation},
	"prod_exclusive":      {"grad/x": prodDeviation},
	"prod_exclusive_grad": {"y": prodDeviation},
	"conv_input_grad": {"f32:grad/w": "the f32 convolution weight gradient multiplies the zero padding by dy, so a NaN in dy " +
		"also reaches the taps that read the padding beside it, where PyTorch leaves those terms out (more NaN, never less)"},
}

const prodDeviation = "prod's gradients are products of the other elements (prefix and suffix products, no division), " +
	"exact at zeros and infinities; PyTorch divides the product by the element, which gives NaN at an infinite one"

// Deviation returns the reason kiln departs from PyTorch in the case's
// result key ("y" or "grad/NAME") in dt, if it does.
func (c *Case) Deviation(dt ir.DType, key string) (string, bool) {
	if r, ok := Deviations[c.Name][key]; ok {
		return r, true
	}
	r, ok := Deviations[c.Name][dt.String()+":"+key]
	return r, ok
}

// DropNaNs returns got and want without the elements where either is NaN.
func DropNaNs(got, want []float64) (g, w []float64) {
	for i := range want {
		if !math.IsNaN(got[i]) && !math.IsNaN(want[i]) {
			g, w = append(g, got[i]), append(w, want[i])
		}
	}
	return g, w
}
