package cpu

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// TestPoolPanicReachesTheCaller checks that a part that panics on a helper
// goroutine does not end the process: Run panics with its value on the
// goroutine that called it (where the step's recover turns it into an
// error), after the other parts have stopped.
func TestPoolPanicReachesTheCaller(t *testing.T) {
	p := newPool(4)
	r := &runner{plan: &planner.Plan{}, workers: 4, pool: p}
	r.start()
	defer r.close()
	for range 50 {
		got := func() (v any) {
			defer func() { v = recover() }()
			p.Run(64, func(i int) {
				if i%7 == 3 {
					panic(fmt.Sprintf("part %d", i))
				}
			})
			return nil
		}()
		if s, ok := got.(string); !ok || !strings.HasPrefix(s, "part ") {
			t.Fatalf("Run recovered %v, want the panic of a part", got)
		}
	}
	// The pool still works after.
	var n [8]int
	p.Run(8, func(i int) { n[i]++ })
	if n != [8]int{1, 1, 1, 1, 1, 1, 1, 1} {
		t.Errorf("parts ran %v times, want once each", n)
	}
}

// TestKernelPanicIsAStepError checks that a kernel that panics, on one
// worker or several, makes Step return an error naming the step as an
// internal error, instead of ending the process with a Go panic (whose exit
// status, 2, would read as a usage error).
func TestKernelPanicIsAStepError(t *testing.T) {
	g, err := ir.Parse("t.kir", []byte("graph g\ninput %x: f32[64]\n%y = relu %x\n%z = exp %y\noutput %z\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 4} {
		x, err := New(p, Options{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		for s := range x.funcs {
			if x.funcs[s] != nil && x.plan.Steps[s].Op == ir.OpExp {
				x.funcs[s] = func(out kernels.Tensor, args []kernels.Tensor) error {
					var idx []int
					_ = idx[3]
					return nil
				}
			}
		}
		err = x.Step(context.Background())
		x.Close()
		want := "(%z: f32[64] = exp %y): internal error in the kernel: runtime error: index out of range [3] with length 0"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%d workers: Step: %v, want an error containing %q", workers, err, want)
		}
	}
}
