package planner_test

import (
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// TestScheduleComparison plans every ratio model with each schedule, with
// and without in-place reuse, and checks that each plan is a valid
// topological order (Check), that planning is deterministic, and that the
// default (ScheduleAuto) is the better of the two schedules alone and never
// worse than any variant. With -v
// it prints the lower bounds recorded in docs/PERFORMANCE.md.
func TestScheduleComparison(t *testing.T) {
	variants := []struct {
		name string
		opts planner.Options
	}{
		{"topo, no in-place", planner.Options{Schedule: planner.ScheduleTopo, NoInPlace: true}},
		{"memory, no in-place", planner.Options{Schedule: planner.ScheduleMemory, NoInPlace: true}},
		{"topo", planner.Options{Schedule: planner.ScheduleTopo}},
		{"memory", planner.Options{Schedule: planner.ScheduleMemory}},
	}
	t.Logf("| model | mode | %s | %s | %s | %s | default arena |", variants[0].name, variants[1].name, variants[2].name, variants[3].name)
	for _, m := range ratioModels(t) {
		g, err := ir.Parse(m.name, []byte(m.src))
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range ratioModes() {
			tg, err := kiln.Transform(g, mode.opts)
			if err != nil {
				t.Fatal(err)
			}
			line := "| " + m.name + " | " + mode.name
			minArena := int64(-1)
			for _, v := range variants {
				p := plan(t, tg, v.opts)
				line += " | " + itoa(p.LowerBound)
				if minArena < 0 || p.ArenaBytes < minArena {
					minArena = p.ArenaBytes
				}
			}
			auto := plan(t, tg, planner.Options{})
			// The default plan is the topological one when that has the
			// smaller arena, or an equal one and a smaller lower bound,
			// else the memory-aware one: New stops placing the second
			// once it cannot win, which must not change the choice.
			topo, mem := plan(t, tg, variants[2].opts), plan(t, tg, variants[3].opts)
			want := mem
			if topo.ArenaBytes < mem.ArenaBytes || topo.ArenaBytes == mem.ArenaBytes && topo.LowerBound < mem.LowerBound {
				want = topo
			}
			if auto.Format() != want.Format() {
				t.Errorf("%s %s: the default plan is not the better of the topological and the memory-aware plan", m.name, mode.name)
			}
			if auto.ArenaBytes > minArena {
				t.Errorf("%s %s: the default plan's arena %d is above %d, the smallest of the variants", m.name, mode.name, auto.ArenaBytes, minArena)
			}
			if again := plan(t, tg, planner.Options{}); again.Format() != auto.Format() {
				t.Errorf("%s %s: two plans of one graph differ", m.name, mode.name)
			}
			t.Log(line + " | " + itoa(auto.ArenaBytes) + " |")
		}
	}
}

// plan plans g and checks the plan.
func plan(t *testing.T, g *ir.Graph, opts planner.Options) *planner.Plan {
	t.Helper()
	p, err := planner.New(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return p
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestMemoryScheduleFreesEarly: two branches each make a large value and
// reduce it. In value order both large values are live at once; the
// memory-aware order reduces the first before making the second.
func TestMemoryScheduleFreesEarly(t *testing.T) {
	g, err := ir.Parse("t.kir", []byte(`graph branches
input %x: f32[64,64]
%a1 = exp %x
%a2 = tanh %x
%s1 = sum %a1
%s2 = sum %a2
%out = add %s1, %s2
output %out
`))
	if err != nil {
		t.Fatal(err)
	}
	const big = 64 * 64 * 4
	topo := plan(t, g, planner.Options{Schedule: planner.ScheduleTopo})
	mem := plan(t, g, planner.Options{Schedule: planner.ScheduleMemory})
	if topo.LowerBound < 3*big {
		t.Errorf("value order: lower bound %d, want x, a1 and a2 live together (%d)", topo.LowerBound, 3*big)
	}
	if mem.LowerBound >= 3*big {
		t.Errorf("memory-aware order: lower bound %d, want a1 reduced before a2 is made (< %d)\n%s", mem.LowerBound, 3*big, mem.Format())
	}
	var order []string
	for _, st := range mem.Steps {
		order = append(order, mem.Buffers[st.Out].Name)
	}
	if got, want := order, []string{"a1", "s1", "a2", "s2", "out"}; !equal(got, want) {
		t.Errorf("memory-aware order %v, want %v", got, want)
	}
	if auto := plan(t, g, planner.Options{}); auto.LowerBound != mem.LowerBound {
		t.Errorf("default plan: lower bound %d, want the memory-aware order's %d", auto.LowerBound, mem.LowerBound)
	}
}

// TestMemoryScheduleDefersAllocations: a value that only allocates (a
// transposed weight, smaller than the activation computed first) is
// computed where the graph computes it, close to its use, not as soon as
// its arguments allow, as a rule that took the smallest allocation first
// would.
func TestMemoryScheduleDefersAllocations(t *testing.T) {
	g, err := ir.Parse("t.kir", []byte(`graph defer
input %x: f32[64,16]
param %w: f32[16,16]
%h = matmul %x, %w
%r = relu %h
%s = sum %r
%wt = transpose %w
%y = matmul %x, %wt
%t = sum %y
%out = add %s, %t
output %out
`))
	if err != nil {
		t.Fatal(err)
	}
	mem := plan(t, g, planner.Options{Schedule: planner.ScheduleMemory})
	var order []string
	for _, st := range mem.Steps {
		order = append(order, mem.Buffers[st.Out].Name)
	}
	if want := []string{"h", "r", "s", "wt", "y", "t", "out"}; !equal(order, want) {
		t.Errorf("memory-aware order %v, want %v", order, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
