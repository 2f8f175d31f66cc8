package planner

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kilnml/kiln/ir"
)

// checkGraph proves that p does what its graph says, for Check: one buffer
// per value, of the value's name, type, role and size; the inputs, params
// and state in graph order; the outputs the graph's, by name and value;
// gradients, outside a training step, the graph's; one kernel step per
// computed value, running the value's op on its arguments; and the
// graph's updates each applied once, by a copy or in place, and by nothing
// else: only the copy of an update writes a param or state, and no step
// after it reads or writes the target. The plan's buffer indices must have
// passed checkIndices.
func (p *Plan) checkGraph() error {
	g := p.Graph
	n := len(g.Values)
	if len(p.Buffers) != n {
		return fmt.Errorf("%d buffers for the graph's %d values", len(p.Buffers), n)
	}
	var inputs, params, states []int
	for i := range p.Buffers {
		b, v := &p.Buffers[i], &g.Values[i]
		if b.Value != ir.ID(i) || b.Name != v.Name || !b.Type.Equal(v.Type) {
			return fmt.Errorf("buffer %d is %%%s: %s (value %d), the graph's value %d is %%%s: %s", i, b.Name, b.Type, b.Value, i, v.Name, v.Type)
		}
		if want := roleOf(v.Op); b.Role != want {
			return fmt.Errorf("buffer %%%s: role %s, but the value is a %s", b.Name, b.Role, v.Op)
		}
		if want := int64(b.Type.Bytes()); b.Size != want {
			return fmt.Errorf("buffer %%%s: size %d, %s needs %d", b.Name, b.Size, b.Type, want)
		}
		switch b.Role {
		case Input:
			inputs = append(inputs, i)
		case Param:
			params = append(params, i)
		case State:
			states = append(states, i)
		}
	}
	for _, l := range []struct {
		what      string
		got, want []int
	}{{"inputs", p.Inputs, inputs}, {"params", p.Params, params}, {"state", p.States, states}} {
		if !slices.Equal(l.got, l.want) {
			return fmt.Errorf("the plan's %s are buffers %v, the graph's are %v", l.what, clip(fmt.Sprint(l.got)), clip(fmt.Sprint(l.want)))
		}
	}
	var outputs, grads []Named
	for _, o := range g.Outputs {
		outputs = append(outputs, Named{g.Values[o].Name, int(o)})
	}
	if !g.UpdatesParams() {
		for _, gp := range g.Grads {
			grads = append(grads, Named{"grad/" + g.Values[gp.Param].Name, int(gp.Grad)})
		}
	}
	for _, l := range []struct {
		what      string
		got, want []Named
	}{{"output", p.Outputs, outputs}, {"gradient", p.Grads, grads}} {
		if len(l.got) != len(l.want) {
			names := make([]string, len(l.want))
			for k, w := range l.want {
				names[k] = "%" + g.Values[w.Buffer].Name
			}
			return fmt.Errorf("%d %ss, the graph has %d%s", len(l.got), l.what, len(l.want), listNames(names))
		}
		for k, w := range l.want {
			if got := l.got[k]; got != w {
				return fmt.Errorf("%s %d (%s) is buffer %d (%%%s), the graph's %s %d is %%%s (buffer %d)", l.what, k, clip(got.Name), got.Buffer, g.Values[got.Buffer].Name, l.what, k, g.Values[w.Buffer].Name, w.Buffer)
			}
		}
	}

	by := make([]int, n) // the kernel step computing each value, or -1
	for i := range by {
		by[i] = -1
	}
	update := make([]int, n) // the value each param or state is updated with, or -1
	for i := range update {
		update[i] = -1
	}
	for _, u := range g.Updates {
		update[u.Target] = int(u.Value)
	}
	copied := make([]int, n) // the step copying each update into its target, or -1
	for i := range copied {
		copied[i] = -1
	}
	for s, st := range p.Steps {
		out := &p.Buffers[st.Out]
		switch st.Kind {
		case Kernel:
			v := &g.Values[st.Out]
			if v.Op.IsLeaf() {
				return fmt.Errorf("step %d runs %s into %%%s, a %s; only the copy of an update writes a param or state", s, st.Op, v.Name, v.Op)
			}
			if st.Op != v.Op || !st.Attrs.Equal(v.Attrs) {
				return fmt.Errorf("step %d runs %s %s, but %%%s is %s %s", s, st.Op, clip(st.Attrs.String()), v.Name, v.Op, clip(v.Attrs.String()))
			}
			if len(st.Args) != len(v.Args) {
				return fmt.Errorf("step %d: %d arguments for %%%s, which takes %d", s, len(st.Args), v.Name, len(v.Args))
			}
			for k, a := range st.Args {
				if ir.ID(a) != v.Args[k] {
					return fmt.Errorf("step %d: argument %d is buffer %d (%%%s), %%%s reads %s", s, k, a, g.Values[a].Name, v.Name, g.NameOf(v.Args[k]))
				}
			}
			if prev := by[st.Out]; prev >= 0 {
				return fmt.Errorf("%%%s is computed by both step %d and step %d", v.Name, prev, s)
			}
			by[st.Out] = s
		case Copy:
			if len(st.Args) != 1 {
				return fmt.Errorf("step %d: a copy takes one buffer, found %d", s, len(st.Args))
			}
			from := &p.Buffers[st.Args[0]]
			switch u := update[st.Out]; {
			case u < 0:
				return fmt.Errorf("step %d copies %%%s into %%%s, which the graph does not update", s, from.Name, out.Name)
			case u != st.Args[0]:
				return fmt.Errorf("step %d copies %%%s into %%%s, which the graph updates with %%%s", s, from.Name, out.Name, g.Values[u].Name)
			case u == st.Out || p.Buffers[u].Alias == st.Out:
				return fmt.Errorf("step %d applies the update of %%%s, which %%%s already holds in place", s, out.Name, from.Name)
			case copied[st.Out] >= 0:
				return fmt.Errorf("steps %d and %d both apply the update of %%%s", copied[st.Out], s, out.Name)
			}
			copied[st.Out] = s
		default:
			return fmt.Errorf("step %d: unknown kind %d", s, st.Kind)
		}
	}
	for i, v := range g.Values {
		if !v.Op.IsLeaf() && by[i] < 0 {
			return fmt.Errorf("no step computes %%%s", v.Name)
		}
	}
	last := make([]int, n) // the last step that reads or writes each buffer
	for s, st := range p.Steps {
		last[st.Out] = s
		for _, a := range st.Args {
			last[a] = s
		}
	}
	for _, u := range g.Updates {
		t, v := int(u.Target), int(u.Value)
		if t != v && p.Buffers[v].Alias != t && copied[t] < 0 {
			return fmt.Errorf("no step applies the update of %%%s (with %%%s)", g.Values[t].Name, g.Values[v].Name)
		}
		if c := copied[t]; c >= 0 && last[t] != c {
			return fmt.Errorf("step %d reads or writes %%%s after step %d copied its update into it", last[t], g.Values[t].Name, c)
		}
	}
	return nil
}

// CheckTraining reports whether p, a plan that passes Check, is a training
// step, as a plan file's TrainPlan must be: its first output, the loss, is
// a float scalar that a step computes, and it updates every param that its
// graph does not mark frozen (ir.Graph.Frozen), and no frozen one (Check
// proves that each update is applied).
func (p *Plan) CheckTraining() error {
	if err := p.checkLoss("a training step"); err != nil {
		return err
	}
	updated := map[int]bool{}
	for _, u := range p.Graph.Updates {
		updated[int(u.Target)] = true
	}
	var missing, frozen []string
	trainable := 0
	for _, i := range p.Params {
		if i < 0 || i >= len(p.Buffers) {
			continue
		}
		b := &p.Buffers[i]
		if int(b.Value) >= 0 && int(b.Value) < len(p.Graph.Values) && p.Graph.Frozen(b.Value) {
			if updated[i] {
				frozen = append(frozen, "%"+b.Name)
			}
			continue
		}
		trainable++
		if !updated[i] {
			missing = append(missing, "%"+b.Name)
		}
	}
	switch {
	case len(p.Params) == 0:
		return fmt.Errorf("not a training step: it has no params")
	case len(frozen) > 0:
		return fmt.Errorf("not a training step: it updates frozen params%s; a frozen param keeps its initial value", listNames(frozen))
	case trainable == 0:
		return fmt.Errorf("not a training step: all of its %d params are frozen", len(p.Params))
	}
	what := "params"
	if trainable < len(p.Params) {
		what = "params not frozen"
	}
	switch {
	case len(missing) == trainable:
		return fmt.Errorf("not a training step: it updates none of its %d %s%s", trainable, what, listNames(missing))
	case len(missing) > 0:
		return fmt.Errorf("not a training step: it does not update %d of its %d %s%s", len(missing), trainable, what, listNames(missing))
	}
	return nil
}

// CheckEvaluation reports whether p, a plan that passes Check, is an
// evaluation graph, as a plan file's EvalPlan must be: its first output,
// the loss, is a float scalar that a step computes, and it updates no
// param or state.
func (p *Plan) CheckEvaluation() error {
	if err := p.checkLoss("an evaluation graph"); err != nil {
		return err
	}
	if us := p.Graph.Updates; len(us) > 0 {
		names := make([]string, len(us))
		for k, u := range us {
			names[k] = p.Graph.NameOf(u.Target)
		}
		return fmt.Errorf("not an evaluation graph: it updates %d params and state%s; evaluation must change none", len(us), listNames(names))
	}
	return nil
}

// checkLoss reports whether p's first output is a loss: a float scalar
// computed by a step.
func (p *Plan) checkLoss(what string) error {
	if p.Graph == nil {
		return fmt.Errorf("not %s: the plan has no graph", what)
	}
	if len(p.Outputs) == 0 {
		return fmt.Errorf("not %s: it has no output; the first output must be the loss", what)
	}
	i := p.Outputs[0].Buffer
	if i < 0 || i >= len(p.Buffers) {
		return fmt.Errorf("not %s: its first output names buffer %d of %d", what, i, len(p.Buffers))
	}
	b := &p.Buffers[i]
	if !b.Type.DType.IsFloat() || len(b.Type.Shape) != 0 {
		return fmt.Errorf("not %s: its first output %%%s is %s; the loss is a float scalar", what, b.Name, b.Type)
	}
	if b.Role != Temp {
		return fmt.Errorf("not %s: its first output %%%s is a %s; the loss must be computed by a step", what, b.Name, b.Role)
	}
	return nil
}

// listNames formats names for an error: " (a, b, c)", at most three of
// them, then how many more; "" for none.
func listNames(names []string) string {
	if len(names) == 0 {
		return ""
	}
	const most = 3
	shown := make([]string, min(len(names), most))
	for k := range shown {
		shown[k] = clip(names[k])
	}
	s := strings.Join(shown, ", ")
	if len(names) > most {
		s += fmt.Sprintf(" and %d more", len(names)-most)
	}
	return " (" + s + ")"
}

// clip shortens text quoted from a file to at most 80 bytes.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	end := most - 3
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "..."
}
