package planner_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// TestOverlapMatchesPairwise checks Check's O(n log n) overlap test
// against the pairwise sweep it replaced: on the plans of the example
// models, where neither finds an overlap, and on those plans with buffers
// moved, stretched and made to alias at random (keeping each alias at the
// offset and size of the buffer it names, as Check has made sure before
// it tests overlap), where both must find an overlap or neither, and the
// pair named must overlap.
func TestOverlapMatchesPairwise(t *testing.T) {
	adam, _ := passes.DefaultOptimizer("adam")
	files, _ := filepath.Glob("../examples/*/*.kir")
	if len(files) < 5 {
		t.Fatalf("found %d example models", len(files))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var found, mutants int
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
			if err, want := p.Overlap(), pairwise(p); err != nil || want != nil {
				t.Errorf("%s: overlap %v, pairwise %v", f, err, want)
			}
			tries := 300
			if len(p.Buffers) > 1000 {
				tries = 5 // the pairwise sweep is quadratic
			}
			for range tries {
				q := mutate(p, rng)
				if !aliasesAligned(q) {
					continue
				}
				mutants++
				err, want := q.Overlap(), pairwise(q)
				if (err == nil) != (want == nil) {
					t.Errorf("%s: overlap %v, pairwise %v", f, err, want)
				}
				if err != nil {
					found++
					if !strings.Contains(err.Error(), "overlap while both are live") {
						t.Errorf("%s: %v", f, err)
					}
				}
			}
		}
	}
	t.Logf("%d of %d mutated plans overlap", found, mutants)
	if found < mutants/10 || found == mutants {
		t.Errorf("%d of %d mutated plans overlap: the mutations test too little", found, mutants)
	}
}

// pairwise is the overlap test Check ran before: every pair of buffers
// live at a common step, in a sweep by start.
func pairwise(p *planner.Plan) error {
	var idx []int
	for i := range p.Buffers {
		if p.Buffers[i].Size > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(x, y int) bool { return p.Buffers[idx[x]].Start < p.Buffers[idx[y]].Start })
	for x, i := range idx {
		b := &p.Buffers[i]
		for _, j := range idx[x+1:] {
			c := &p.Buffers[j]
			if c.Start > b.End {
				break
			}
			if b.Alias != j && c.Alias != i && b.Offset < c.Offset+c.Size && c.Offset < b.Offset+b.Size {
				return fmt.Errorf("%%%s and %%%s overlap", b.Name, c.Name)
			}
		}
	}
	return nil
}

// aliasesAligned reports whether every alias lies at the offset and size
// of the buffer it names.
func aliasesAligned(p *planner.Plan) bool {
	for _, b := range p.Buffers {
		if b.Alias >= 0 && (p.Buffers[b.Alias].Offset != b.Offset || p.Buffers[b.Alias].Size != b.Size) {
			return false
		}
	}
	return true
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
