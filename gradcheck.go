package kiln

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// GradCheckOptions control GradCheck.
type GradCheckOptions struct {
	// RTol and ATol bound |analytic - numeric| <= ATol + RTol*|numeric|.
	// Zero values take DESIGN.md's float64 bound (1e-7, 1e-10), or the
	// float32 bound (1e-4, 1e-7) when Native is set on an f32 graph.
	RTol, ATol float64
	// Step is the finite-difference step h (default 1e-3).
	Step float64
	// Native computes the analytic gradient in the graph's own dtype instead
	// of in float64; the numeric reference is always float64.
	Native bool
	// O0 compiles both graphs without the optimizing passes.
	O0 bool
	// Workers is the number of goroutines the executors run steps on
	// (cpu.Options.Workers); 0 means runtime.NumCPU().
	Workers int
}

// ParamCheck is the result of GradCheck for one param: its worst element.
type ParamCheck struct {
	Param    string
	Index    int     // flat index of the worst element; -1 when every element was skipped
	Analytic float64 // analytic gradient there
	Numeric  float64 // central-difference gradient there
	Excess   float64 // |analytic-numeric| - (atol + rtol*|numeric|); > 0 fails
	// Skipped counts the elements where the loss is not smooth within 2h
	// (a relu kink, a tie of a max): there the estimates with steps h and
	// h/2 disagree beyond the bound, and no numeric reference exists.
	Skipped int
}

// AllSkipped reports whether every element of the param was skipped, so
// that nothing was compared: Index is -1 and the other fields are zero.
func (c ParamCheck) AllSkipped() bool { return c.Index < 0 && c.Skipped > 0 }

// OK reports whether the param's gradient is within the bound everywhere.
// A param whose every element was skipped is not OK: nothing was checked.
func (c ParamCheck) OK() bool {
	return (c.Index >= 0 || c.Skipped == 0) && !(c.Excess > 0) && !math.IsNaN(c.Analytic)
}

// GradCheck compares the analytic gradient of the loss (the first output)
// with respect to every param of g that is not frozen against the
// five-point central difference (f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) /
// 12h of the graph promoted to float64, whose truncation error is O(h^4). Elements where the
// estimates with steps h and h/2 disagree beyond the bound lie within 2h of
// a point where the loss is not smooth; they are counted in Skipped, not
// compared. feeds holds a value for every input and param, by name, as
// float64. It returns the worst element of each param.
func GradCheck(g *ir.Graph, feeds map[string][]float64, opts GradCheckOptions) ([]ParamCheck, error) {
	g64, err := g.Promote()
	if err != nil {
		return nil, err
	}
	analyticGraph := g64
	if opts.Native {
		analyticGraph = g
	}
	if opts.RTol == 0 && opts.ATol == 0 {
		opts.RTol, opts.ATol = 1e-7, 1e-10
		if opts.Native && hasF32(g) {
			opts.RTol, opts.ATol = 1e-4, 1e-7
		}
	}
	if opts.Step == 0 {
		opts.Step = 1e-3
	}
	check := Options{Debug: debugCheck(), O0: opts.O0}
	check.Grad = true
	ap, err := Compile(analyticGraph, check)
	if err != nil {
		return nil, err
	}
	check.Grad = false
	fp, err := Compile(g64, check)
	if err != nil {
		return nil, err
	}
	ax, err := cpu.New(ap, cpu.Options{Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	defer ax.Close()
	fx, err := cpu.New(fp, cpu.Options{Workers: opts.Workers})
	if err != nil {
		return nil, err
	}
	defer fx.Close()
	ctx := context.Background()
	if err := feedFloat64s(ax, feeds); err != nil {
		return nil, err
	}
	if err := ax.Step(ctx); err != nil {
		return nil, err
	}
	if err := feedFloat64s(fx, feeds); err != nil {
		return nil, err
	}
	loss := fp.Outputs[0].Name
	eval := func(param string, vals []float64) (float64, error) {
		if err := setFloat64s(fx, param, vals); err != nil {
			return 0, err
		}
		if err := fx.Step(ctx); err != nil {
			return 0, err
		}
		lt, _ := fx.Get(loss)
		return kernels.Float64s(lt)[0], nil
	}
	var out []ParamCheck
	for _, pi := range ap.Params {
		if ap.Graph.Frozen(ap.Buffers[pi].Value) {
			continue // no gradient to check
		}
		name := ap.Buffers[pi].Name
		gt, err := ax.Get("grad/" + name)
		if err != nil {
			return nil, err
		}
		analytic := kernels.Float64s(gt)
		base := append([]float64(nil), feeds[name]...)
		res := ParamCheck{Param: name, Index: -1}
		h := opts.Step
		bound := func(num float64) float64 { return opts.ATol + opts.RTol*math.Abs(num) }
		skipped := 0
		for j := range base {
			numAt := func(h float64) (float64, error) {
				var f [4]float64
				for k, d := range [4]float64{-2 * h, -h, h, 2 * h} {
					old := base[j]
					base[j] = old + d
					v, err := eval(name, base)
					base[j] = old
					if err != nil {
						return 0, err
					}
					f[k] = v
				}
				return (f[0] - 8*f[1] + 8*f[2] - f[3]) / (12 * h), nil
			}
			num, err := numAt(h)
			if err != nil {
				return nil, err
			}
			excess := math.Abs(analytic[j]-num) - bound(num)
			if excess > 0 {
				// Out of bound: a wrong rule, or a kink within 2h?
				half, err := numAt(h / 2)
				if err != nil {
					return nil, err
				}
				if math.Abs(half-num) > bound(num) {
					skipped++
					continue
				}
			}
			if math.IsNaN(excess) {
				excess = math.Inf(1)
			}
			if res.Index < 0 || excess > res.Excess {
				res = ParamCheck{Param: name, Index: j, Analytic: analytic[j], Numeric: num, Excess: excess}
			}
		}
		res.Skipped = skipped
		if err := setFloat64s(fx, name, base); err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// setFloat64s sets the tensor called name in x from float64 values.
func setFloat64s(x *cpu.Executor, name string, vals []float64) error {
	t, err := x.Get(name)
	if err != nil {
		return err
	}
	return kernels.SetFloat64s(t, vals)
}

func hasF32(g *ir.Graph) bool {
	for _, v := range g.Values {
		if v.Type.DType == ir.F32 {
			return true
		}
	}
	return false
}

func feedFloat64s(x *cpu.Executor, feeds map[string][]float64) error {
	p := x.Plan()
	for _, i := range append(append([]int(nil), p.Inputs...), p.Params...) {
		name := p.Buffers[i].Name
		vals, ok := feeds[name]
		if !ok {
			return fmt.Errorf("no value for %s %%%s", p.Buffers[i].Role, name)
		}
		if err := setFloat64s(x, name, vals); err != nil {
			return fmt.Errorf("%%%s: %v", name, err)
		}
	}
	return nil
}

// RandomFeeds draws a value for every input and param of g from seed: floats
// with magnitude in [0.1, 1] and a random sign; integers in [0, n) where n is
// the size of what they index (the classes of a loss or one_hot, the rows of
// an embedding or the axis of a gather), or 2 when kiln cannot tell.
func RandomFeeds(g *ir.Graph, seed uint64) map[string][]float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	bound := indexBounds(g)
	f := map[string][]float64{}
	for i, v := range g.Values {
		if v.Op != ir.OpInput && v.Op != ir.OpParam {
			continue
		}
		vals := make([]float64, v.Type.Shape.NumElements())
		for j := range vals {
			switch {
			case v.Type.DType.IsInt():
				vals[j] = float64(rng.IntN(max(bound[ir.ID(i)], 1)))
			case v.Type.DType == ir.Bool:
				vals[j] = float64(rng.IntN(2))
			default:
				vals[j] = 0.1 + 0.9*rng.Float64()
				if rng.IntN(2) == 0 {
					vals[j] = -vals[j]
				}
			}
		}
		f[v.Name] = vals
	}
	return f
}

// indexBounds returns, for integer values used as labels or indices, the
// number of valid values: the least over their uses (the op table's
// Indices).
func indexBounds(g *ir.Graph) map[ir.ID]int {
	b := map[ir.ID]int{}
	for _, v := range g.Values {
		indices := v.Op.Info().Indices
		if indices == nil {
			continue
		}
		args := make([]ir.Type, len(v.Args))
		for i, a := range v.Args {
			args[i] = g.Type(a)
		}
		for _, ix := range indices(args, v.Attrs) {
			id := v.Args[ix.Arg]
			if old, ok := b[id]; !ok || ix.N < old {
				b[id] = ix.N
			}
		}
	}
	return b
}
