package cpu_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/passes"
)

// TestTrace checks that a trace sees every step of one Step exactly once,
// on a worker in range, with start <= end, and that the next Step runs
// untraced.
func TestTrace(t *testing.T) {
	opt, _ := passes.DefaultOptimizer("sgd")
	p := plan(t, mlp, kiln.Options{Optimizer: &opt})
	for _, w := range []int{1, 3} {
		x, err := cpu.New(p, cpu.Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		set(t, x, "y", 1, 2, 3, 4, 5, 6, 7, 8)
		var mu sync.Mutex
		seen := make([]int, len(p.Steps))
		calls := 0
		x.Trace(func(step, worker int, start, end time.Time) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			seen[step]++
			if worker < 0 || worker >= w {
				t.Errorf("%d workers: step %d on worker %d", w, step, worker)
			}
			if end.Before(start) {
				t.Errorf("step %d ends before it starts", step)
			}
		})
		ctx := context.Background()
		if err := x.Step(ctx); err != nil {
			t.Fatal(err)
		}
		for s, n := range seen {
			if n != 1 {
				t.Errorf("%d workers: step %d traced %d times", w, s, n)
			}
		}
		if err := x.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if calls != len(p.Steps) {
			t.Errorf("%d workers: %d trace calls over two Steps, want %d (one traced Step)", w, calls, len(p.Steps))
		}
		x.Close()
	}
}
