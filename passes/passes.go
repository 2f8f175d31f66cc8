// Package passes holds kiln's graph-to-graph passes and the runner that
// applies them in order. A pass is a plain func(*ir.Graph) error; the pass
// table (Passes) lists them in order with their docs and when they run,
// and the reasons for the order are data too (Constraints), checked at
// start-up.
package passes

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/ir"
)

// Pass is one named graph transformation, as a pipeline runs it.
type Pass struct {
	Name string
	Run  func(*ir.Graph) error
}

// PassInfo is one row of the pass table: a pass, what it does, when a
// pipeline runs it and how it is made for the options.
type PassInfo struct {
	Name string
	Doc  string // for users: kiln dump -after and the HTML view show it
	// Enabled reports whether a pipeline for opts runs the pass; nil
	// means always.
	Enabled func(Options) bool
	// Make returns the pass's function for opts.
	Make func(Options) func(*ir.Graph) error
	// Required passes cannot be disabled (KILN_DEBUG=disable=PASS): the
	// graph would not be valid, or not what was asked for, without them.
	Required bool
}

// optimizing reports whether the optimizing passes run (not at -O0).
func optimizing(opts Options) bool { return !opts.O0 }

// always returns f for any options.
func always(f func(*ir.Graph) error) func(Options) func(*ir.Graph) error {
	return func(Options) func(*ir.Graph) error { return f }
}

// Passes is the pass table, in the order the passes run when they run at
// all; Constraints records the reasons for the order, checked at start-up.
var Passes = []PassInfo{
	{Name: "verify", Doc: "check the graph (ir.Check)", Make: always(ir.Check), Required: true},
	{Name: "inference", Doc: "evaluation only: replace every dropout by its input and drop the forward graph's state updates (Options.Inference)",
		Enabled: func(o Options) bool { return o.Inference }, Make: always(Inference), Required: true},
	{Name: "shapes", Doc: "re-infer every value's type from its op and arguments", Make: always(Shapes), Required: true},
	{Name: "canonicalize", Doc: "rewrite forward patterns into the op whose backward fuses: nll_loss(log_softmax(x)) into softmax_cross_entropy(x), softmax(q·kᵀ·scale + mask)·v into attention, max_pool2d(relu(x)) into relu(max_pool2d(x)) (not at -O0)",
		Enabled: optimizing, Make: always(Canonicalize)},
	{Name: "autodiff", Doc: "append the backward graph: the gradient of the first output (the loss) for every param",
		Enabled: func(o Options) bool { return o.Grad || o.Optimizer != nil }, Make: always(Autodiff), Required: true},
	{Name: "dataparallel", Doc: "data-parallel training: replace every gradient by its mean over the ranks, reduced in buckets by chained allreduce collectives (Options.Ranks; with Options.Shard the optimizer reduces)",
		Enabled: func(o Options) bool { return o.Ranks > 1 && !(o.Shard && o.Optimizer != nil) }, Required: true,
		Make: func(o Options) func(*ir.Graph) error {
			ranks, bucket := o.Ranks, o.BucketBytes
			return func(g *ir.Graph) error { return DataParallel(g, ranks, bucket) }
		}},
	{Name: "optimizer", Doc: "append the optimizer update of every param (SGD, Adam, AdamW, RMSprop; schedules, clipping, accumulation; with Options.Shard, of this rank's shard of the params, from the gradients reduced and scattered over the ranks, then gathered)",
		Enabled: func(o Options) bool { return o.Optimizer != nil }, Required: true,
		Make: func(o Options) func(*ir.Graph) error {
			cfg := *o.Optimizer
			var sh *sharding
			if o.Shard && o.Ranks > 1 {
				sh = &sharding{o.Ranks, o.BucketBytes}
			}
			return func(g *ir.Graph) error { return optimize(g, cfg, sh) }
		}},
	{Name: "simplify", Doc: "algebraic simplification, constant folding, common-subexpression and dead-code elimination, to a fixed point (not at -O0)",
		Enabled: optimizing, Make: always(Simplify)},
	{Name: "fuse", Doc: "fuse softmax and max backward, softmax with cross-entropy, elementwise chains, matmul epilogues and reduction prologues into single ops (not at -O0)",
		Enabled: optimizing, Make: always(Fuse)},
	{Name: "remat", Doc: "recompute chosen forward activations in the backward pass (-recompute, -memory-budget, recompute marks): clone each just before its first backward user",
		Enabled: func(o Options) bool {
			return o.Checkpoint.Policy.Kind != checkpoint.None || o.Checkpoint.Policy.Budget > 0
		},
		Make: func(o Options) func(*ir.Graph) error {
			cfg, report := o.Checkpoint, o.CheckpointReport
			return func(g *ir.Graph) error { return Remat(g, cfg, report) }
		}},
	{Name: "dce", Doc: "remove values that no output, gradient or update needs", Make: always(DCE)},
}

// Constraint says that pass Before must run before pass After, and why.
type Constraint struct {
	Before, After, Why string
}

// Constraints are the reasons behind the order of Passes, checked when the
// package is initialized.
var Constraints = []Constraint{
	{"verify", "shapes", "shape inference assumes well-formed ops and attributes"},
	{"verify", "inference", "rewiring dropout's users assumes well-formed ops and arguments"},
	{"inference", "shapes", "every later pass must see the evaluation graph, without dropout"},
	{"inference", "autodiff", "a gradient taken for evaluation must not go through dropout's training mask"},
	{"shapes", "autodiff", "gradient rules read the inferred types of their operands"},
	{"shapes", "canonicalize", "the rewrites read inferred types (ranks, axes, dtypes)"},
	{"canonicalize", "autodiff", "autodiff must differentiate the canonical form, whose backward (softmax_cross_entropy's) is the one fuse turns into a single kernel"},
	{"autodiff", "optimizer", "the optimizer update reads the gradients"},
	{"autodiff", "dataparallel", "the gradients to reduce over the ranks are the backward graph's"},
	{"dataparallel", "optimizer", "every rank must update from the same, reduced gradients"},
	{"autodiff", "dce", "autodiff leaves gradients of non-params that only DCE removes"},
	{"optimizer", "dce", "the update decides which gradients stay live"},
	{"optimizer", "simplify", "the update's arithmetic is simplified with the rest"},
	{"simplify", "fuse", "fusion matches the simplified, deduplicated graph; simplification does not know fused ops"},
	{"fuse", "dce", "fusion leaves the ops it replaced unused"},
	{"autodiff", "remat", "recomputation is decided for the activations the backward graph reads"},
	{"optimizer", "remat", "the update's steps are part of the peak that a memory budget bounds"},
	{"simplify", "remat", "common-subexpression elimination would merge every clone back into its original"},
	{"fuse", "remat", "gradients stay bitwise because a clone runs the kernel its original runs; fusion after remat could fuse a clone into a different kernel"},
	{"remat", "dce", "a forward value read only by the backward dies when its users move to its clone"},
}

func init() {
	if err := checkPassTable(Passes, Constraints); err != nil {
		panic("passes: " + err.Error())
	}
}

// checkPassTable reports a pass named twice or without a doc or a
// function, and a constraint that names an unknown pass or that the order
// breaks.
func checkPassTable(table []PassInfo, cons []Constraint) error {
	pos := map[string]int{}
	for i, p := range table {
		if _, dup := pos[p.Name]; dup {
			return fmt.Errorf("pass %s appears twice in the table", p.Name)
		}
		if p.Doc == "" || p.Make == nil {
			return fmt.Errorf("pass %s has no Doc or no Make", p.Name)
		}
		pos[p.Name] = i
	}
	for _, c := range cons {
		b, ok1 := pos[c.Before]
		a, ok2 := pos[c.After]
		if !ok1 || !ok2 {
			return fmt.Errorf("constraint %s -> %s names an unknown pass", c.Before, c.After)
		}
		if b >= a {
			return fmt.Errorf("%s must run before %s: %s", c.Before, c.After, c.Why)
		}
	}
	return nil
}

// Names returns the passes' names in order.
func Names() []string {
	names := make([]string, len(Passes))
	for i, p := range Passes {
		names[i] = p.Name
	}
	return names
}

// Lookup returns the table row of the pass name.
func Lookup(name string) (PassInfo, bool) {
	for _, p := range Passes {
		if p.Name == name {
			return p, true
		}
	}
	return PassInfo{}, false
}

// Options select the passes of a pipeline.
type Options struct {
	// Grad appends the backward graph (autodiff).
	Grad bool
	// Optimizer, when non-nil, appends the parameter update; it implies Grad.
	Optimizer *OptimizerConfig
	// Inference compiles the graph for evaluation: the inference pass
	// replaces every dropout by its input and drops the forward graph's
	// updates of state.
	Inference bool
	// O0 runs no optimizing pass (canonicalize, simplify, fuse); the
	// default runs them.
	O0 bool
	// Checkpoint chooses what the backward recomputes; the remat pass runs
	// when its policy is not checkpoint.None. Measure and Report as in
	// checkpoint.Config and Remat.
	Checkpoint checkpoint.Config
	// CheckpointReport, when set, receives the remat pass's report.
	CheckpointReport func(*checkpoint.Report)
	// Ranks, when above 1, compiles the training step for data-parallel
	// training on that many processes (the dataparallel pass), reducing
	// the gradients in buckets of up to BucketBytes (0:
	// DefaultBucketBytes).
	Ranks       int
	BucketBytes int64
	// Shard, with Ranks and an Optimizer, shards the optimizer state over
	// the ranks (ZeRO stage 1): the optimizer pass reduces the gradients
	// to each rank's shard, updates that shard of the params and gathers
	// them, instead of the dataparallel pass reducing whole gradients.
	Shard bool
}

// Pipeline returns the passes of the table that opts enables, in order.
func Pipeline(opts Options) []Pass {
	var ps []Pass
	for _, p := range Passes {
		if p.Enabled == nil || p.Enabled(opts) {
			ps = append(ps, Pass{p.Name, p.Make(opts)})
		}
	}
	return ps
}

// Debug holds the runner's debug switches, normally read from KILN_DEBUG.
type Debug struct {
	Check bool            // run ir.Check after every pass
	Dump  map[string]bool // dump the IR after these passes ("all" for every pass)
	Time  bool            // print each pass's time and value counts
	NaN   bool            // executors stop at the first step that produces NaN or Inf
	// Disable names passes that Run skips (disable=PASS); only passes that
	// are not Required.
	Disable map[string]bool
	Out     io.Writer // where dumps and timings go (default os.Stderr)
}

// DebugFromEnv parses KILN_DEBUG: a comma-separated list of check,
// dump=PASS (repeatable, or dump=all), disable=PASS (repeatable), time
// and nan. Unknown words are an error.
func DebugFromEnv() (Debug, error) {
	return ParseDebug(os.Getenv("KILN_DEBUG"))
}

// ParseDebug parses a KILN_DEBUG value.
func ParseDebug(s string) (Debug, error) {
	d := Debug{Dump: map[string]bool{}, Disable: map[string]bool{}}
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
		case w == "check":
			d.Check = true
		case w == "time":
			d.Time = true
		case w == "nan":
			d.NaN = true
		case strings.HasPrefix(w, "dump="):
			p := strings.TrimPrefix(w, "dump=")
			if _, ok := Lookup(p); !ok && p != "all" {
				return d, fmt.Errorf("KILN_DEBUG: unknown pass %q in %q (passes: %s, or all)", ir.Excerpt(p), ir.Excerpt(w), strings.Join(Names(), ", "))
			}
			d.Dump[p] = true
		case strings.HasPrefix(w, "disable="):
			p := strings.TrimPrefix(w, "disable=")
			info, ok := Lookup(p)
			if !ok {
				return d, fmt.Errorf("KILN_DEBUG: unknown pass %q in %q (passes: %s)", ir.Excerpt(p), ir.Excerpt(w), strings.Join(Names(), ", "))
			}
			if info.Required {
				return d, fmt.Errorf("KILN_DEBUG: %q: pass %s cannot be disabled (%s)", ir.Excerpt(w), p, info.Doc)
			}
			d.Disable[p] = true
		default:
			return d, fmt.Errorf("KILN_DEBUG: unknown switch %q (expected check, time, nan, dump=PASS, dump=all or disable=PASS)", ir.Excerpt(w))
		}
	}
	return d, nil
}

// Run applies ps to g in order. With dbg.Check it runs ir.Check after every
// pass and names the pass that broke the graph. after, when non-nil, is
// called with each pass name and the graph after it.
func Run(g *ir.Graph, ps []Pass, dbg Debug, after func(pass string, g *ir.Graph)) error {
	out := dbg.Out
	if out == nil {
		out = os.Stderr
	}
	var notes *[]string
	if dbg.Time {
		notes = new([]string)
		passNotes.Store(g, notes)
		defer passNotes.Delete(g)
	}
	for _, p := range ps {
		if dbg.Disable[p.Name] {
			continue
		}
		before := len(g.Values)
		start := time.Now()
		if err := p.Run(g); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if dbg.Time {
			note := ""
			if len(*notes) > 0 {
				note = "  (" + strings.Join(*notes, "; ") + ")"
				*notes = (*notes)[:0]
			}
			fmt.Fprintf(out, "pass %-10s %10s  values %d -> %d%s\n", p.Name, time.Since(start).Round(time.Microsecond), before, len(g.Values), note)
		}
		if dbg.Check {
			if err := ir.Check(g); err != nil {
				return fmt.Errorf("after pass %s the graph is invalid: %w", p.Name, err)
			}
		}
		if dbg.Dump["all"] || dbg.Dump[p.Name] {
			fmt.Fprintf(out, "# after %s\n%s", p.Name, g.Format())
		}
		if after != nil {
			after(p.Name, g)
		}
	}
	return nil
}

// passNotes holds, for each graph that Run is timing (KILN_DEBUG=time),
// the notes that passes add with passNote; Run prints them at the end of
// the pass's timing line and clears them.
var passNotes sync.Map // *ir.Graph -> *[]string

// passNote adds a note (rounds, rewrites) to the timing line of the pass
// running on g. It does nothing unless Run is timing g, so a
// pass may call it unconditionally.
func passNote(g *ir.Graph, format string, args ...any) {
	if p, ok := passNotes.Load(g); ok {
		notes := p.(*[]string)
		*notes = append(*notes, fmt.Sprintf(format, args...))
	}
}

// Shapes re-infers the type of every computed value from its op, arguments
// and attributes, canonicalizing the attributes on the way.
func Shapes(g *ir.Graph) error {
	for i := range g.Values {
		v := &g.Values[i]
		if v.Op.IsLeaf() {
			continue
		}
		t, attrs, err := g.Infer(v.Op, v.Attrs, v.Args)
		if err != nil {
			return fmt.Errorf("%s: %s: %v", g.Where(ir.ID(i)), g.NameOf(ir.ID(i)), err)
		}
		v.Type, v.Attrs = t, attrs
	}
	return nil
}

// DCE removes every value that no output, gradient or update needs. Inputs
// and params stay: they are the graph's signature.
func DCE(g *ir.Graph) error {
	keep := make([]bool, len(g.Values))
	var stack []ir.ID
	mark := func(id ir.ID) {
		if !keep[id] {
			keep[id] = true
			stack = append(stack, id)
		}
	}
	for i, v := range g.Values {
		if v.Op == ir.OpInput || v.Op == ir.OpParam {
			mark(ir.ID(i))
		}
	}
	for _, id := range g.Roots() {
		mark(id)
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, a := range g.Values[id].Args {
			mark(a)
		}
	}
	g.Retain(keep)
	return nil
}
