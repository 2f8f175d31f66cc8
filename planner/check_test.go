package planner_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// TestDisjointMatchesPairwise checks Check's O(n log n) overlap test
// (disjoint) against the pairwise sweep it replaced (overlapping), which
// Check still runs to name the pair: on the plans of the example models,
// where both find no overlap, and on those plans with buffers moved,
// stretched and made to alias at random, where disjoint must never miss an
// overlap the pairwise sweep finds, and may add a false alarm (which costs
// only time) in few cases.
func TestDisjointMatchesPairwise(t *testing.T) {
	adam, _ := passes.DefaultOptimizer("adam")
	files, _ := filepath.Glob("../examples/*/*.kir")
	if len(files) < 5 {
		t.Fatalf("found %d example models", len(files))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var alarms, mutants int
	for _, f := range files {
		if filepath.Base(f) == "automaton.kir" {
			continue // slow to compile; sharpen.kir is its small sibling
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []kiln.Options{{}, {Optimizer: &adam}, {Optimizer: &adam, Checkpoint: "sqrt"}} {
			g, err := ir.Parse(f, src)
			if err != nil {
				t.Fatal(err)
			}
			p, err := kiln.Compile(g, opts)
			if err != nil {
				continue // a model that needs inputs it lacks for this mode
			}
			if !p.Disjoint() || p.Overlapping() != nil {
				t.Errorf("%s: disjoint %v, pairwise %v", f, p.Disjoint(), p.Overlapping())
			}
			tries := 200
			if len(p.Buffers) > 1000 {
				tries = 5 // the pairwise sweep is quadratic
			}
			for range tries {
				q := mutate(p, rng)
				mutants++
				pair := q.Overlapping()
				switch d := q.Disjoint(); {
				case d && pair != nil:
					t.Errorf("%s: disjoint missed %v", f, pair)
				case !d && pair == nil:
					alarms++
				}
				if pair != nil {
					if err := q.Check(); err == nil {
						t.Errorf("%s: Check passed a plan with %v", f, pair)
					}
				}
			}
		}
	}
	t.Logf("%d false alarms in %d mutated plans", alarms, mutants)
	if alarms*20 > mutants {
		t.Errorf("%d false alarms in %d mutated plans", alarms, mutants)
	}
}

// mutate returns a copy of p with one or two buffers moved (to another's
// offset), stretched (live longer) or made to alias another.
func mutate(p *planner.Plan, rng *rand.Rand) *planner.Plan {
	q := *p
	q.Buffers = append([]planner.Buffer(nil), p.Buffers...)
	n := len(q.Buffers)
	for range 1 + rng.IntN(2) {
		i, j := rng.IntN(n), rng.IntN(n)
		b, c := &q.Buffers[i], &q.Buffers[j]
		switch rng.IntN(4) {
		case 0:
			b.Offset = c.Offset
		case 1:
			b.End = min(b.End+1+rng.IntN(5), len(q.Steps)-1)
			b.Start = max(b.Start-rng.IntN(3), 0)
		case 2:
			b.Offset, b.Start, b.End = c.Offset, c.End, max(c.End, b.End)
		case 3:
			if i != j && b.Size == c.Size {
				b.Alias, b.Offset, b.Start, b.End = j, c.Offset, c.End, max(c.End, b.End)
			}
		}
	}
	return &q
}
