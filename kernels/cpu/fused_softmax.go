package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of fused_softmax and fused_softmax_grad
// (ir/ops_fused_softmax.go): softmax over the last axis with an
// elementwise prologue, and its gradient with an elementwise epilogue.
// Both run the program with the fused elementwise machine
// (fused_elementwise.go) and the rows with the row code of softmax
// (softmaxRows, softmaxStream) and softmax_grad (fusepatSoftmaxGradRows),
// a chunk of rows at a time through scratch that stays in cache, so the
// result is bitwise the unfused ops'. The rows are split across the
// workers at multiples of fusepatBlock, as the unfused kernels split them.

func init() {
	register(ir.OpFusedSoftmax, ir.F32, buildFusedSoftmax[float32])
	register(ir.OpFusedSoftmax, ir.F64, buildFusedSoftmax[float64])
	register(ir.OpFusedSoftmaxGrad, ir.F32, buildFusedSoftmaxGrad[float32])
	register(ir.OpFusedSoftmaxGrad, ir.F64, buildFusedSoftmaxGrad[float64])
}

// fusedSoftmaxChunkElems is about the number of elements of the chunk of
// rows a fused softmax kernel puts through its scratch at a time: 16 KiB
// of f32, which stays in a core's L1 cache between the program and the
// rows.
const fusedSoftmaxChunkElems = 4096

// fusedSoftmaxChunk returns the rows of length dim > 0 of a chunk: a
// multiple of fusepatBlock, so that the rows' blocks are those of the
// unfused kernels.
func fusedSoftmaxChunk(dim int) int {
	return max(1, fusedSoftmaxChunkElems/(fusepatBlock*dim)) * fusepatBlock
}

// fusedSoftmaxRows returns the rows and the row length of a result of
// shape s, softmax's slices over its last axis.
func fusedSoftmaxRows(s ir.Shape) (rows, dim int, err error) {
	if len(s) == 0 {
		return 0, 0, fmt.Errorf("expected a result of rank 1 or more, found a scalar")
	}
	dim = s[len(s)-1]
	if dim == 0 {
		return 0, 0, nil
	}
	return s.NumElements() / dim, dim, nil
}

// buildFusedSoftmax builds fused_softmax(in...) {program, log}: for each
// chunk of rows, the program's result into the part's scratch (runTo),
// then softmaxRows (or, for a large softmax, softmaxStream's rows with
// streaming stores) from the scratch into the output.
func buildFusedSoftmax[T float](n *kernels.Node) (kernels.Func, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	logOut := n.Attrs.Bool("log", false)
	rows, dim, err := fusedSoftmaxRows(n.Out.Shape)
	if err != nil {
		return nil, err
	}
	if rows*dim == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	chunk := fusedSoftmaxChunk(dim)
	parts := parParts(n.Par, rows, dim*(parCostExp+len(prog)))
	mcs := make([]*fuseewMachine[T], parts)
	bufs := make([][]T, parts)
	for p := range mcs {
		if mcs[p], err = newFuseewMachine[T](prog, n.Args, fuseewArgs(len(n.Args), 0), n.Out.Shape); err != nil {
			return nil, err
		}
		bufs[p] = make([]T, min(chunk, rows)*dim)
	}
	sm := softmaxStreamer[T](n.Out, dim, logOut, parts)
	aheads := make([]rowAhead, parts)
	return parRows(n.Par, parts, rows, fusepatBlock, func(part int, out kernels.Tensor, args []kernels.Tensor, r0, r1 int) error {
		o := kernels.View[T](out)
		// While a chunk's rows are computed in cache, each row asks for a
		// row of the next chunk's inputs.
		ahead := aheads[part].of(args, dim, r1*dim, rows*dim)
		for r := r0; r < r1; r += chunk {
			lo, hi := r*dim, min(r+chunk, r1)*dim
			x := bufs[part][:hi-lo]
			mcs[part].runTo(x, args, lo, hi)
			ahead.from = r + chunk
			if sm != nil {
				sm.rowsUnfenced(part, o[lo:hi], x, dim, ahead.row)
			} else {
				softmaxRows(o[lo:hi], x, dim, logOut, ahead.row)
			}
		}
		if sm != nil {
			storeFence() // once for the part's streaming stores
		}
		return nil
	}), nil
}

// buildFusedSoftmaxGrad builds fused_softmax_grad(dy, y, in...) {program,
// log}: for each chunk of rows, softmax_grad (or log_softmax_grad) into
// the part's scratch, then the program over it (its input i0) and the
// extra arguments into the output (runFrom); a large output is written
// with streaming stores where the program's last step has them.
func buildFusedSoftmaxGrad[T float](n *kernels.Node) (kernels.Func, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	logGrad := n.Attrs.Bool("log", false)
	rows, dim, err := fusedSoftmaxRows(n.Args[1].Shape)
	if err != nil {
		return nil, err
	}
	if rows*dim == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	in := append([]ir.Type{n.Args[1]}, n.Args[2:]...)
	argOf := append([]int{-1}, fuseewArgs(len(n.Args)-2, 2)...)
	chunk := fusedSoftmaxChunk(dim)
	parts := parParts(n.Par, rows, dim*(3+len(prog)))
	mcs := make([]*fuseewMachine[T], parts)
	bufs, diffs := make([][]T, parts), make([][]T, parts)
	for p := range mcs {
		if mcs[p], err = newFuseewMachine[T](prog, in, argOf, n.Out.Shape); err != nil {
			return nil, err
		}
		if n.Out.Bytes() >= fuseewStreamBytes {
			mcs[p].stream(prog[len(prog)-1])
		}
		bufs[p], diffs[p] = make([]T, min(chunk, rows)*dim), make([]T, dim)
	}
	aheads := make([]rowAhead, parts)
	return parRows(n.Par, parts, rows, fusepatBlock, func(part int, out kernels.Tensor, args []kernels.Tensor, r0, r1 int) error {
		o, dy, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		// While a chunk's gradient rows are computed, each row asks for
		// its row of the epilogue's inputs; while the epilogue runs, its
		// blocks ask for the next chunk's dy and y.
		ahead := aheads[part].of(args[2:], dim, r1*dim, rows*dim)
		mc := mcs[part]
		mc.ahead, mc.aheadBy = mc.ahead[:0], chunk*dim
		if !noPrefetch {
			mc.ahead = append(mc.ahead, prefetchArray{data: args[0].Data, size: elemSize[T]()}, prefetchArray{data: args[1].Data, size: elemSize[T]()})
		}
		for r := r0; r < r1; r += chunk {
			lo, hi := r*dim, min(r+chunk, r1)*dim
			g := bufs[part][:hi-lo]
			ahead.from = r
			fusepatSoftmaxGradRows(g, dy[lo:hi], y[lo:hi], dim, logGrad, diffs[part], nil, ahead.row)
			mc.runFrom(o[lo:hi], g, args, lo, hi)
		}
		if mcs[part].fence {
			storeFence() // once for the part's streaming stores
		}
		return nil
	}), nil
}

// runFrom writes the program's result for elements [lo, hi) into
// dst[:hi-lo], reading its input -1 from src[:hi-lo]. It does not fence
// streaming stores (the caller fences once after its last call).
func (mc *fuseewMachine[T]) runFrom(dst, src []T, args []kernels.Tensor, lo, hi int) {
	fence := mc.fence
	mc.src, mc.fence = src, false
	mc.runTo(dst, args, lo, hi)
	mc.src, mc.fence = nil, fence
}
