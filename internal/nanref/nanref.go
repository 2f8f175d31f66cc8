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
