package planner_test

import (
	"crypto/sha256"
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// wideMLP returns the .kir text of a wide graph: branches parallel layers
// tanh(x·w_i) of one input, summed by a balanced tree of adds, with
// softmax cross entropy over the width classes. Its training step keeps
// every branch's activation live from the forward to the backward at once.
func wideMLP(branches, width, batch int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph wide%d\ninput %%x: f32[%d,%d]\ninput %%y: i64[%d]\n", branches, batch, width, batch)
	for i := range branches {
		fmt.Fprintf(&b, "param %%w%d: f32[%d,%d]\n", i, width, width)
	}
	var level []string
	for i := range branches {
		fmt.Fprintf(&b, "%%h%d = matmul %%x, %%w%d\n%%t%d = tanh %%h%d\n", i, i, i, i)
		level = append(level, fmt.Sprintf("t%d", i))
	}
	for n := 0; len(level) > 1; {
		var next []string
		for i := 0; i+1 < len(level); i += 2 {
			fmt.Fprintf(&b, "%%s%d = add %%%s, %%%s\n", n, level[i], level[i+1])
			next = append(next, fmt.Sprintf("s%d", n))
			n++
		}
		if len(level)%2 == 1 {
			next = append(next, level[len(level)-1])
		}
		level = next
	}
	fmt.Fprintf(&b, "%%loss = softmax_cross_entropy %%%s, %%y\noutput %%loss\n", level[0])
	return b.String()
}

// TestPlansUnchanged keeps the plans of the example models and of the
// benchmark models byte for byte (Format, by SHA-256, in
// testdata/plans.sha256): the planner's speed-ups must not change a plan.
// go test -run TestPlansUnchanged -update rewrites the file, for a change
// meant to change plans.
func TestPlansUnchanged(t *testing.T) {
	type model struct{ name, src string }
	var models []model
	files, _ := filepath.Glob("../examples/*/*.kir")
	for _, f := range files {
		if filepath.Base(f) == "automaton.kir" {
			continue // slow to compile; sharpen.kir is its small sibling
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, model{strings.TrimPrefix(f, "../"), string(src)})
	}
	models = append(models, model{"deepMLP(160,64,32)", deepMLP(160, 64, 32)}, model{"wideMLP(256,16,8)", wideMLP(256, 16, 8)})
	adam, _ := passes.DefaultOptimizer("adam")
	modes := []struct {
		name string
		opts kiln.Options
	}{
		{"forward", kiln.Options{}},
		{"adam", kiln.Options{Optimizer: &adam}},
		{"adam sqrt", kiln.Options{Optimizer: &adam, Checkpoint: "sqrt"}},
	}
	var got strings.Builder
	for _, m := range models {
		for _, mode := range modes {
			g, err := ir.Parse(m.name, []byte(m.src))
			if err != nil {
				t.Fatal(err)
			}
			p, err := kiln.Compile(g, mode.opts)
			if err != nil {
				fmt.Fprintf(&got, "%s %s: %v\n", m.name, mode.name, err)
				continue
			}
			fmt.Fprintf(&got, "%s %s: %x\n", m.name, mode.name, sha256.Sum256([]byte(p.Format())))
		}
	}
	const goldenPath = "testdata/plans.sha256"
	if golden.Update() {
		if err := os.WriteFile(goldenPath, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		t.Errorf("plans changed:\n%s\nwant:\n%s", got.String(), want)
	}
}
