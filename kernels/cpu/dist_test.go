package cpu

import (
	"strings"
	"sync"
	"testing"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// runComm builds op for args with comm and runs it once (see run).
func runComm(t *testing.T, comm kernels.Collective, op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) kernels.Tensor {
	t.Helper()
	n := node(t, op, attrs, typesOf(args)...)
	n.Comm = comm
	out, err := runNode(t, n, args...)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return out
}

// TestDistKernels runs the ops of data-parallel training on a 2-rank job
// of goroutines: rank r holds x + 10r, 5 elements (shards of 3, the last
// padded); allreduce gives the sum, reduce_scatter and shard each rank's
// part of the sum and of x, allgather the whole again.
func TestDistKernels(t *testing.T) {
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		var wg sync.WaitGroup
		for r, tp := range dist.Local(2) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dist.NewComm(tp)
				a := ir.MakeAttrs("ranks", ir.Int(2))
				x := make([]float64, 5)
				for i := range x {
					x[i] = float64(i+1) + 10*float64(r)
				}
				xt := kernels.New(ir.Type{DType: dt, Shape: ir.Shape{5}})
				if err := kernels.SetFloat64s(xt, x); err != nil {
					t.Error(err)
					return
				}
				check := func(what string, got kernels.Tensor, want []float64) {
					if g := kernels.Float64s(got); len(g) != len(want) || !equalFloats(g, want) {
						t.Errorf("%s rank %d %s = %v, want %v", dt, r, what, g, want)
					}
				}
				sum := runComm(t, c, ir.OpAllReduce, a, xt)
				check("allreduce", sum, []float64{12, 14, 16, 18, 20})
				rs := runComm(t, c, ir.OpReduceScatter, a, xt, sum)
				check("reduce_scatter", rs, [][]float64{{12, 14, 16}, {18, 20, 0}}[r])
				sh := runComm(t, c, ir.OpShard, a, xt)
				check("shard", sh, [][]float64{{1, 2, 3}, {14, 15, 0}}[r])
				all := runComm(t, c, ir.OpAllGather, a.With("shape", ir.Ints(5)), rs, sum)
				check("allgather", all, []float64{12, 14, 16, 18, 20})
			}()
		}
		wg.Wait()
	}
}

func equalFloats(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDistKernelsRefuseOtherJobs checks the builders' errors: no
// communicator, and one of another size than the plan's.
func TestDistKernelsRefuseOtherJobs(t *testing.T) {
	a := ir.MakeAttrs("ranks", ir.Int(4))
	n := node(t, ir.OpAllReduce, a, ir.Type{DType: ir.F32, Shape: ir.Shape{3}})
	if _, err := Kernels.Build(n); err == nil || !strings.Contains(err.Error(), "compiled for data-parallel training on 4 ranks (allreduce), but this process is not part of such a job") {
		t.Errorf("no communicator: %v", err)
	}
	n.Comm = dist.NewComm(dist.Local(2)[0])
	if _, err := Kernels.Build(n); err == nil || !strings.Contains(err.Error(), "compiled for 4 ranks, but this job has 2") {
		t.Errorf("2-rank communicator: %v", err)
	}
}
