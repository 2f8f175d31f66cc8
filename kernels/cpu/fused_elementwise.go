package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of the fused elementwise ops (ir/ops_fused_elementwise.go):
// fused_elementwise, fused_matmul and fused_reduce, which carry an
// elementwise program.
//
// The program runs in one loop over its result in blocks of fuseewBlock
// elements. For each block every input's row is found (a slice of the input
// itself when it has the result's layout, a row filled once per call for a
// scalar, a row gathered with precomputed strides for any other broadcast),
// then each instruction computes its row into a small scratch row allocated
// by the builder, and the last instruction writes into the output (or, for
// fused_reduce, into a scratch row that is added into the sums). So the
// intermediates stay in cache and each input and the output are touched
// once. Each instruction is computed by the row code of its op's own kernel
// (negRow, binaryRow, vmath.Lookup's table, logicWhereRow, ...), element for
// element, so a fused op's result is bitwise the unfused chain's.
//
// Add, sub, mul and div of float rows and scalars, the bulk of most
// programs, are not closures: on amd64 with AVX2 each stretch of them runs
// as one call of a block runner (fuseewArithF32/F64,
// elementwise_avx2_amd64.s) that reads its steps as data and runs, for each,
// the same AVX2 loop vecVec, vecScalar or scalarVec runs; without AVX2 each
// such step calls that loop (SSE2, or Go) directly. A result of
// fuseewStreamBytes or more whose last instruction is one of them is
// written with streaming stores.

func init() {
	register(ir.OpFusedElementwise, ir.F32, buildFusedElementwise[float32])
	register(ir.OpFusedElementwise, ir.F64, buildFusedElementwise[float64])
	register(ir.OpFusedMatmul, ir.F32, buildFusedMatmul[float32])
	register(ir.OpFusedMatmul, ir.F64, buildFusedMatmul[float64])
	register(ir.OpFusedReduce, ir.F32, buildFusedReduce[float32])
	register(ir.OpFusedReduce, ir.F64, buildFusedReduce[float64])
}

// fuseewBlock is the number of elements a program computes per block: a
// scratch row is 2 KiB (f32) or 4 KiB (f64), so the rows of a program of the
// fuse pass's longest length stay in a core's L1 and L2 caches. The
// per-block work (finding the input rows, one call per closure step or
// stretch of arithmetic steps) costs some 35 ns, against about 180 ns of
// AVX2 arithmetic for the 6-op chain of bench/elementwise_chain.kir; 1024
// halves that share in cache but streams from memory more slowly (the
// longer bursts of misses outrun the hardware prefetcher), 256 doubles it.
const fuseewBlock = 512

// How a program input's row is found for a block.
const (
	fuseewModeDirect = iota // a slice of the input: it has the result's layout
	fuseewModeSplat         // one element, filled into a row once per call
	fuseewModeGather        // any other broadcast: gathered per block
)

// fuseewIn is one program input of element type E.
type fuseewIn[E any] struct {
	arg  int // the argument it is; -1 for the product of fused_matmul
	slot int // its row slot
	mode int
	buf  []E // the splat or gathered row
	cur  fuseewCursor
	src  []E // its elements, during a run
	base int // the element src[0] is (input -1 read from fuseewMachine.src)
}

// fuseewCursor walks a strided operand (or, for fused_reduce, the sums)
// along a row-major output from any position: the walk of newWalk, with the
// position inside the current row kept between blocks.
type fuseewCursor struct {
	inner, ia int   // row length and the operand's stride along a row
	dims, st  []int // the outer dimensions and the operand's strides along them
	idx       []int // odometer
	j, row    int   // position in the current row, operand offset of its start
}

// newFuseewCursor plans the cursor over shape out of an operand with
// strides along out's dimensions.
func newFuseewCursor(out ir.Shape, strides []int) fuseewCursor {
	w := newWalk(out, strides, nil)
	return fuseewCursor{inner: w.inner, ia: w.ia, dims: w.dims, st: w.sa, idx: make([]int, len(w.dims))}
}

// seek moves the cursor to element pos of the output.
func (c *fuseewCursor) seek(pos int) {
	r := pos / c.inner
	c.j, c.row = pos%c.inner, 0
	for k := len(c.dims) - 1; k >= 0; k-- {
		c.idx[k] = r % c.dims[k]
		r /= c.dims[k]
		c.row += c.idx[k] * c.st[k]
	}
}

// advance takes n elements from the current row (n <= inner - j).
func (c *fuseewCursor) advance(n int) {
	c.j += n
	if c.j < c.inner {
		return
	}
	c.j = 0
	for k := len(c.idx) - 1; k >= 0; k-- {
		c.idx[k]++
		c.row += c.st[k]
		if c.idx[k] < c.dims[k] {
			return
		}
		c.row -= c.st[k] * c.dims[k]
		c.idx[k] = 0
	}
}

// fuseewGather fills dst with the next len(dst) elements of the broadcast
// operand src.
func fuseewGather[E any](c *fuseewCursor, dst, src []E) {
	for len(dst) > 0 {
		n := min(len(dst), c.inner-c.j)
		gatherRow(dst[:n], src, c.row+c.j*c.ia, c.ia)
		dst = dst[n:]
		c.advance(n)
	}
}

// fuseewAccumulate adds the next len(src) elements of the reduced operand
// into the sums o of the kept innermost axis (ia = 1), in order, as
// buildReduce does.
func fuseewAccumulate[T number](c *fuseewCursor, o, src []T) {
	for len(src) > 0 {
		n := min(len(src), c.inner-c.j)
		reduceAddRow(o, src[:n], c.row+c.j)
		src = src[n:]
		c.advance(n)
	}
}

// accumulate adds the next len(src) elements of the reduced operand into
// the sums o as buildReduce does: with the innermost axis kept, element by
// element (fuseewAccumulate); else each run (a row of the walk, reduced
// into one sum) in rowSum's order (rowsum.go), its blocks of sumAllBlock
// gathered in pend, so that a run split across the program's blocks sums
// as a whole. A run's elements all come in one call of run.
func (mc *fuseewMachine[T]) accumulate(c *fuseewCursor, o, src []T) {
	if c.ia != 0 {
		fuseewAccumulate(c, o, src)
		return
	}
	for len(src) > 0 {
		n := min(len(src), c.inner-c.j, sumAllBlock-len(mc.pend))
		mc.pend = append(mc.pend, src[:n]...)
		src = src[n:]
		row := c.row
		c.advance(n)
		if len(mc.pend) == sumAllBlock || c.j == 0 {
			mc.runSum += blockSum(mc.pend)
			mc.pend = mc.pend[:0]
		}
		if c.j == 0 { // the run ended
			o[row] += mc.runSum
			mc.runSum = 0
		}
	}
}

// fuseewMachine runs one program over T values (and bool intermediates).
type fuseewMachine[T float] struct {
	n     int      // elements of the program's result
	fs    [][]T    // float row slots for the current block
	bs    [][]bool // bool row slots
	fin   []fuseewIn[T]
	bin   []fuseewIn[bool]
	steps []fuseewStep[T]
	res   int  // the result's float slot
	rbuf  []T  // the result row when it is not the output (fused_reduce)
	fence bool // the last step streams its stores: fence them after a run
	off   int  // during runTo: the element the output row starts at
	src   []T  // during runFrom: input -1's elements from element off on

	// fused_reduce into sums of runs (ia = 0): the current block of the
	// current run, and the sum of the run's blocks so far (accumulate).
	pend   []T
	runSum T

	// With AVX2, the steps are grouped into runs: each stretch of add, sub,
	// mul and div steps is one call of arith (fuseewArithF32 or F64, the
	// block runner), each other step a run of its own.
	arith func(steps []fuseewArith, fs [][]T, m int)
	runs  []fuseewRun

	// ahead lists the arrays whose lines a run asks for ahead of use:
	// with each block of elements [s, s+m) it prefetches elements
	// [s+aheadBy, s+aheadBy+m) of each. fused_softmax_grad's epilogue
	// asks so for the next chunk's dy and y: asking for them from the
	// gradient rows instead (rowAhead, beside the epilogue's inputs) took
	// its SGD-step kernel from 3.2-3.5 to 3.9-4.7 ms, no better than
	// without prefetching (BenchmarkSoftmaxStepKernels, 1 worker).
	// fused_elementwise written over one of its arguments asks so for its
	// output, writable, ownAhead elements on.
	ahead   []prefetchArray
	aheadBy int
}

// fuseewRun is a run of steps: arith steps for the block runner, or (arith
// nil) the one step k.
type fuseewRun struct {
	arith []fuseewArith
	k     int
}

// fuseewArith is an add, sub, mul or div step as the block runner reads it:
// code is the op's ewOpIndex, plus 4 for a row and a scalar (VS) or 8 for a
// scalar and a row (SV), plus 16 for streaming stores; o, x and y are row
// slots, a scalar operand being element 0 of its row.
type fuseewArith struct {
	code, o, x, y int
}

// The forms of a step. The arithmetic ones call their row loop directly
// (the AVX2 or SSE2 loop of vecVec, vecScalar or scalarVec, or its Go loop
// elsewhere), with no closure between; every other op runs its closure.
const (
	fuseewStepFunc = iota // fn(m)
	fuseewStepVV          // vv(o, x, y): add, sub, mul, div of two rows
	fuseewStepVS          // vs(o, x, y[0]): of a row and a scalar
	fuseewStepSV          // sv(o, x[0], y): of a scalar and a row
)

// fuseewStep is one instruction of a compiled program.
type fuseewStep[T float] struct {
	form    int
	code    int // the block runner's code (fuseewArith), for VV, VS and SV
	o, x, y int // float row slots of the result and the operands (VV, VS, SV)
	vv      func(o, a, b []T)
	vs      func(o, a []T, s T)
	sv      func(o []T, s T, b []T)
	fn      func(m int) // the instruction over the first m elements of its rows
}

// fuseewValue is where a program value lives: a float or bool row slot.
type fuseewValue struct {
	isBool bool
	slot   int
	scalar bool // one value repeated (an immediate, a scalar input): its row is filled, and ops that take strides read element 0 with stride 0, as the unfused kernels read a scalar operand
}

// newFuseewMachine compiles prog over inputs of types in for a result of
// shape out (the program's own result shape). Program input i is kernel
// argument argOf[i]; -1 stands for the output itself, which holds the
// product of fused_matmul when its epilogue runs.
func newFuseewMachine[T float](prog ir.EwProgram, in []ir.Type, argOf []int, out ir.Shape) (*fuseewMachine[T], error) {
	types, err := prog.Types(in)
	if err != nil {
		return nil, err
	}
	dt := kernels.DTypeOf[T]()
	for i, t := range in {
		if t.DType != dt && t.DType != ir.Bool {
			return nil, fmt.Errorf("input i%d is %s; a %s program takes %s and bool values only", i, t, dt, dt)
		}
	}
	for k, t := range types {
		if t.DType != dt && t.DType != ir.Bool {
			return nil, fmt.Errorf("t%d is %s; a %s program takes %s and bool values only", k, t, dt, dt)
		}
	}
	if last := types[len(types)-1]; last.DType != dt {
		return nil, fmt.Errorf("the program gives %s, expected %s", last, dt)
	}
	mc := &fuseewMachine[T]{n: out.NumElements()}
	newF := func(row []T) int { mc.fs = append(mc.fs, row); return len(mc.fs) - 1 }
	newB := func(row []bool) int { mc.bs = append(mc.bs, row); return len(mc.bs) - 1 }

	// Inputs.
	vals := make([]fuseewValue, len(in))
	n := out.NumElements()
	for i, t := range in {
		c := t.Shape.NumElements()
		mode := fuseewModeGather
		switch {
		case c == n:
			mode = fuseewModeDirect // broadcasting adds only size-1 axes: same layout
		case c == 1:
			mode = fuseewModeSplat
		}
		st := broadcastStrides(t.Shape, out)
		if t.DType == ir.Bool {
			fi := fuseewIn[bool]{arg: argOf[i], mode: mode}
			if mode != fuseewModeDirect {
				fi.buf = make([]bool, fuseewBlock)
				fi.cur = newFuseewCursor(out, st)
			}
			fi.slot = newB(fi.buf)
			vals[i] = fuseewValue{isBool: true, slot: fi.slot, scalar: mode == fuseewModeSplat}
			mc.bin = append(mc.bin, fi)
			continue
		}
		fi := fuseewIn[T]{arg: argOf[i], mode: mode}
		if mode != fuseewModeDirect {
			fi.buf = make([]T, fuseewBlock)
			fi.cur = newFuseewCursor(out, st)
		}
		fi.slot = newF(fi.buf)
		vals[i] = fuseewValue{slot: fi.slot, scalar: mode == fuseewModeSplat}
		mc.fin = append(mc.fin, fi)
	}

	// Instructions: each result gets a scratch row, reused once its last
	// reader has run; the last result gets the output slot.
	lastUse := make([]int, len(prog))
	for k, instr := range prog {
		for _, a := range instr.Args {
			if a.Kind == ir.EwTemp {
				lastUse[a.Index] = k
			}
		}
	}
	var freeF, freeB []int
	temps := make([]fuseewValue, len(prog))
	for k, instr := range prog {
		ops := make([]fuseewValue, len(instr.Args))
		for j, a := range instr.Args {
			switch a.Kind {
			case ir.EwInput:
				ops[j] = vals[a.Index]
			case ir.EwTemp:
				ops[j] = temps[a.Index]
			default:
				row := make([]T, fuseewBlock)
				v := T(a.Imm) // as the const kernel converts its value
				for i := range row {
					row[i] = v
				}
				ops[j] = fuseewValue{slot: newF(row), scalar: true}
			}
		}
		var d fuseewValue
		switch {
		case k == len(prog)-1:
			mc.rbuf = make([]T, fuseewBlock)
			d = fuseewValue{slot: newF(mc.rbuf)}
			mc.res = d.slot
		case types[k].DType == ir.Bool && len(freeB) > 0:
			d, freeB = fuseewValue{isBool: true, slot: freeB[len(freeB)-1]}, freeB[:len(freeB)-1]
		case types[k].DType == ir.Bool:
			d = fuseewValue{isBool: true, slot: newB(make([]bool, fuseewBlock))}
		case len(freeF) > 0:
			d, freeF = fuseewValue{slot: freeF[len(freeF)-1]}, freeF[:len(freeF)-1]
		default:
			d = fuseewValue{slot: newF(make([]T, fuseewBlock))}
		}
		temps[k] = d
		step, err := newFuseewStep(mc, instr, types[k], in, types, d, ops)
		if err != nil {
			return nil, fmt.Errorf("t%d = %s: %v", k, instr.Op, err)
		}
		mc.steps = append(mc.steps, step)
		for _, a := range instr.Args {
			if a.Kind == ir.EwTemp && lastUse[a.Index] == k {
				lastUse[a.Index] = -1 // free once, even when read twice
				if v := temps[a.Index]; v.isBool {
					freeB = append(freeB, v.slot)
				} else {
					freeF = append(freeF, v.slot)
				}
			}
		}
	}
	mc.plan()
	return mc, nil
}

// plan groups the steps into runs for the block runner, when the CPU has
// one (AVX2).
func (mc *fuseewMachine[T]) plan() {
	mc.arith, mc.runs = fuseewArithFunc[T](), nil
	if mc.arith == nil {
		return
	}
	for k, st := range mc.steps {
		if st.form == fuseewStepFunc {
			mc.runs = append(mc.runs, fuseewRun{k: k})
			continue
		}
		a := fuseewArith{code: st.code, o: st.o, x: st.x, y: st.y}
		if n := len(mc.runs); n > 0 && mc.runs[n-1].arith != nil {
			mc.runs[n-1].arith = append(mc.runs[n-1].arith, a)
		} else {
			mc.runs = append(mc.runs, fuseewRun{arith: []fuseewArith{a}})
		}
	}
}

// newFuseewStep returns the step computing instr into d from operands ops,
// with the row code of the op's own kernel: add, sub, mul and div of float
// operands as one call of vecVec's, vecScalar's or scalarVec's loop (as
// binaryRow calls them for strides 1 and 0), every other op as a closure.
func newFuseewStep[T float](mc *fuseewMachine[T], instr ir.EwInstr, t ir.Type, in, types []ir.Type, d fuseewValue, ops []fuseewValue) (fuseewStep[T], error) {
	if k := ewOpIndex(instr.Op); k >= 0 && !d.isBool && len(ops) == 2 && !ops[0].isBool && !ops[1].isBool {
		op := instr.Op
		st := fuseewStep[T]{o: d.slot, x: ops[0].slot, y: ops[1].slot}
		switch x, y := ops[0].scalar, ops[1].scalar; {
		case !x && !y:
			st.form, st.code, st.vv = fuseewStepVV, k, ewVecVecFunc[T](op, false)
			if st.vv == nil {
				st.vv = func(o, a, b []T) { vecVec(op, o, a, b) }
			}
			return st, nil
		case !x && y:
			st.form, st.code, st.vs = fuseewStepVS, k+4, ewVecScalarFunc[T](op, false)
			if st.vs == nil {
				st.vs = func(o, a []T, s T) { vecScalar(op, o, a, s) }
			}
			return st, nil
		case x && !y:
			st.form, st.code, st.sv = fuseewStepSV, k+8, ewScalarVecFunc[T](op, false)
			if st.sv == nil {
				st.sv = func(o []T, s T, b []T) { scalarVec(op, o, s, b) }
			}
			return st, nil
		}
	}
	fn, err := fuseewStepClosure(mc, instr, t, in, types, d, ops)
	return fuseewStep[T]{form: fuseewStepFunc, fn: fn}, err
}

// fuseewStepClosure returns the closure computing instr into d from operands
// ops, with the row code of the op's own kernel.
func fuseewStepClosure[T float](mc *fuseewMachine[T], instr ir.EwInstr, t ir.Type, in, types []ir.Type, d fuseewValue, ops []fuseewValue) (func(m int), error) {
	argType := func(j int) ir.DType {
		switch a := instr.Args[j]; a.Kind {
		case ir.EwInput:
			return in[a.Index].DType
		case ir.EwTemp:
			return types[a.Index].DType
		}
		return t.DType // an immediate: the program's float dtype
	}
	unary := func(row func(o, x []T)) func(int) {
		o, x := d.slot, ops[0].slot
		return func(m int) { row(mc.fs[o][:m], mc.fs[x][:m]) }
	}
	binary := func(row func(o, a, b []T)) func(int) {
		o, x, y := d.slot, ops[0].slot, ops[1].slot
		return func(m int) { row(mc.fs[o][:m], mc.fs[x][:m], mc.fs[y][:m]) }
	}
	// stride is an operand's stride: 0 for a scalar, read at element 0.
	stride := func(v fuseewValue) int {
		if v.scalar {
			return 0
		}
		return 1
	}
	x, y := ops[0], ops[len(ops)-1]
	ia, ib := stride(x), stride(y)
	strided := func(row func(o, a, b []T, ao, bo, ia, ib int)) func(int) {
		o := d.slot
		return func(m int) { row(mc.fs[o][:m], mc.fs[x.slot][:m], mc.fs[y.slot][:m], 0, 0, ia, ib) }
	}
	op, attrs := instr.Op, instr.Attrs
	if row, ok, err := tableRow[T](op, attrs); ok {
		if err != nil {
			return nil, err
		}
		return unary(row), nil
	}
	switch op {
	case ir.OpNeg:
		return unary(negRow[T]), nil
	case ir.OpSqrt, ir.OpRelu:
		return unary(unaryFloatRow[T](op)), nil
	case ir.OpAbs, ir.OpSign, ir.OpSquare:
		return unary(numericUnaryRow[T](op, true)), nil
	case ir.OpClip:
		return unary(clipRow[T](attrs)), nil
	case ir.OpLeakyRelu:
		row, err := activationRow[T](op, attrs)
		if err != nil {
			return nil, err
		}
		return unary(row), nil
	case ir.OpPow:
		if len(ops) == 1 {
			return unary(powExpRow[T](attrs.Float("exponent", math.NaN()))), nil
		}
		return strided(func(o, a, b []T, ao, bo, ia, ib int) { binaryMathRow(powElem[T], o, a, b, ao, bo, ia, ib) }), nil
	case ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv:
		return strided(func(o, a, b []T, ao, bo, ia, ib int) { binaryRow(op, o, a, b, ao, bo, ia, ib) }), nil
	case ir.OpMaximum, ir.OpMinimum:
		return strided(maxMinRow[T](op)), nil
	case ir.OpFloorDiv:
		return strided(func(o, a, b []T, ao, bo, ia, ib int) { binaryMathRow(floorDivFloat[T], o, a, b, ao, bo, ia, ib) }), nil
	case ir.OpMod:
		return strided(func(o, a, b []T, ao, bo, ia, ib int) { binaryMathRow(modFloat[T], o, a, b, ao, bo, ia, ib) }), nil
	case ir.OpReluGrad:
		return binary(reluGradRow[T]), nil
	case ir.OpGeluGrad:
		row, err := activationGeluGradRow[T](attrs)
		if err != nil {
			return nil, err
		}
		return binary(row), nil
	case ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual:
		o := d.slot
		ne := op == ir.OpNotEqual
		if argType(0) == ir.Bool {
			return func(m int) { logicEqualityRow(ne, mc.bs[o][:m], mc.bs[x.slot][:m], mc.bs[y.slot][:m], 0, 0, ia, ib) }, nil
		}
		if op == ir.OpEqual || op == ir.OpNotEqual {
			return func(m int) { logicEqualityRow(ne, mc.bs[o][:m], mc.fs[x.slot][:m], mc.fs[y.slot][:m], 0, 0, ia, ib) }, nil
		}
		row := logicCompareRow[T](op)
		return func(m int) { row(mc.bs[o][:m], mc.fs[x.slot][:m], mc.fs[y.slot][:m], 0, 0, ia, ib) }, nil
	case ir.OpLogicalAnd, ir.OpLogicalOr:
		o := d.slot
		and := op == ir.OpLogicalAnd
		return func(m int) { logicAndOrRow(and, mc.bs[o][:m], mc.bs[x.slot][:m], mc.bs[y.slot][:m], 0, 0, ia, ib) }, nil
	case ir.OpLogicalNot:
		o := d.slot
		return func(m int) { logicNotRow(mc.bs[o][:m], mc.bs[x.slot][:m]) }, nil
	case ir.OpWhere:
		o, c := d.slot, ops[0].slot
		a, b := ops[1], ops[2]
		st := [3]int{stride(ops[0]), stride(a), stride(b)}
		if t.DType == ir.Bool {
			return func(m int) {
				logicWhereRow(mc.bs[o][:m], mc.bs[c][:m], mc.bs[a.slot][:m], mc.bs[b.slot][:m], [3]int{}, st)
			}, nil
		}
		return func(m int) {
			logicWhereRow(mc.fs[o][:m], mc.bs[c][:m], mc.fs[a.slot][:m], mc.fs[b.slot][:m], [3]int{}, st)
		}, nil
	}
	return nil, fmt.Errorf("%s has no row code for fused programs", op)
}

// run evaluates the program over elements [lo, hi) of its result, block by
// block. self is the output the program's result is written into (and, for
// fused_matmul, input -1, the product); with sums set the result is instead
// added into sums along the cursor red.
func (mc *fuseewMachine[T]) run(self []T, args []kernels.Tensor, lo, hi int, sums []T, red *fuseewCursor) {
	if lo >= hi {
		return
	}
	for i := range mc.fin {
		fuseewStart(&mc.fin[i], self, args, lo, hi)
		if in := &mc.fin[i]; in.arg < 0 && mc.src != nil {
			in.src, in.base = mc.src, mc.off
		}
	}
	for i := range mc.bin {
		fuseewStart(&mc.bin[i], nil, args, lo, hi)
	}
	if red != nil {
		red.seek(lo)
		if cap(mc.pend) == 0 {
			mc.pend = make([]T, 0, sumAllBlock)
		}
		mc.pend, mc.runSum = mc.pend[:0], 0
	}
	for s := lo; s < hi; s += fuseewBlock {
		m := min(fuseewBlock, hi-s)
		for _, a := range mc.ahead {
			from, to := (s+mc.aheadBy)*a.size, min((s+mc.aheadBy+m)*a.size, len(a.data))
			switch {
			case from >= to:
			case a.write:
				prefetchLinesW(unsafe.Pointer(&a.data[from]), (to-from+63)/64)
			default:
				prefetchLines(unsafe.Pointer(&a.data[from]), (to-from+63)/64)
			}
		}
		for i := range mc.fin {
			fuseewRow(&mc.fin[i], mc.fs, s, m)
		}
		for i := range mc.bin {
			fuseewRow(&mc.bin[i], mc.bs, s, m)
		}
		if red == nil {
			mc.fs[mc.res] = self[s-mc.off : s-mc.off+m]
		}
		fs := mc.fs
		if mc.arith != nil {
			for _, r := range mc.runs {
				if r.arith != nil {
					mc.arith(r.arith, fs, m)
				} else {
					mc.steps[r.k].fn(m)
				}
			}
		} else {
			mc.runSteps(m)
		}
		if red != nil {
			mc.accumulate(red, sums, mc.rbuf[:m])
		}
	}
	if mc.fence {
		storeFence()
	}
}

// runTo writes the program's result for elements [lo, hi) into
// dst[:hi-lo] (for a program with no input -1: fused_reduce's, whose
// blocks of a sum over a whole tensor are summed from dst).
func (mc *fuseewMachine[T]) runTo(dst []T, args []kernels.Tensor, lo, hi int) {
	mc.off = lo
	mc.run(dst, args, lo, hi, nil, nil)
	mc.off = 0
}

// runSteps runs the steps over a block of m elements one by one.
func (mc *fuseewMachine[T]) runSteps(m int) {
	fs := mc.fs
	for k := range mc.steps {
		st := &mc.steps[k]
		switch st.form {
		case fuseewStepVV:
			st.vv(fs[st.o][:m], fs[st.x][:m], fs[st.y][:m])
		case fuseewStepVS:
			st.vs(fs[st.o][:m], fs[st.x][:m], fs[st.y][0])
		case fuseewStepSV:
			st.sv(fs[st.o][:m], fs[st.x][0], fs[st.y][:m])
		default:
			st.fn(m)
		}
	}
}

// fuseewStreamBytes is the size from which fused_elementwise writes its
// output with streaming stores (non-temporal: a cache line is written
// without first being read, and not kept in the cache). An output this
// large, with its inputs, passes more data through the cache than the
// last-level cache a core can count on (32 MiB per 8-core complex on an
// EPYC, shared), so its reader would not find it there anyway; streaming
// saves reading it before writing it, a quarter of the memory traffic of a
// two-input program (the 6-op chain: 14 ms to 11 ms on the 2-core EPYC).
var fuseewStreamBytes = 16 << 20 // a variable for the tests

// stream makes the last step write the result with streaming stores, when
// it is add, sub, mul or div and the CPU has the loops (AVX2). Only for a
// result written into the output (not fused_reduce's row) that is then
// left alone: fused_matmul's epilogue rewrites a product still in cache.
func (mc *fuseewMachine[T]) stream(instr ir.EwInstr) {
	st := &mc.steps[len(mc.steps)-1]
	if st.o != mc.res {
		return
	}
	switch st.form {
	case fuseewStepVV:
		if f := ewVecVecFunc[T](instr.Op, true); f != nil {
			st.vv, mc.fence = f, true
		}
	case fuseewStepVS:
		if f := ewVecScalarFunc[T](instr.Op, true); f != nil {
			st.vs, mc.fence = f, true
		}
	case fuseewStepSV:
		if f := ewScalarVecFunc[T](instr.Op, true); f != nil {
			st.sv, mc.fence = f, true
		}
	}
	if mc.fence {
		st.code += 16
		mc.plan()
	}
}

// fuseewStart prepares input in for a run over elements [lo, hi): its
// elements are found, a scalar is filled into as much of its row as a block
// uses, a broadcast operand's cursor is placed.
func fuseewStart[E kernels.Elem](in *fuseewIn[E], self []E, args []kernels.Tensor, lo, hi int) {
	in.base = 0
	if in.arg < 0 {
		in.src = self
	} else {
		in.src = kernels.View[E](args[in.arg])
	}
	switch in.mode {
	case fuseewModeSplat:
		v := in.src[0]
		row := in.buf[:min(len(in.buf), hi-lo)]
		for i := range row {
			row[i] = v
		}
	case fuseewModeGather:
		in.cur.seek(lo)
	}
}

// fuseewRow sets input in's row slot for the block of m elements at s.
func fuseewRow[E kernels.Elem](in *fuseewIn[E], slots [][]E, s, m int) {
	switch in.mode {
	case fuseewModeDirect:
		slots[in.slot] = in.src[s-in.base : s-in.base+m]
	case fuseewModeGather:
		fuseewGather(&in.cur, in.buf[:m], in.src)
	}
}

// fuseewArgs returns 0, 1, ..., n-1 shifted by off: the kernel argument of
// each program input.
func fuseewArgs(n, off int) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = i + off
	}
	return a
}

// buildFusedElementwise builds fused_elementwise: the program over the
// arguments, written into the output; a large output in fixed ranges of
// whole blocks on the executor's workers.
func buildFusedElementwise[T float](n *kernels.Node) (kernels.Func, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	count := n.Out.Shape.NumElements()
	parts := 1
	if count >= fuseewSplitElems {
		parts = min(kernels.Workers(n.Par), (count+fuseewBlock-1)/fuseewBlock)
	}
	mcs := make([]*fuseewMachine[T], parts)
	for p := range mcs {
		if mcs[p], err = newFuseewMachine[T](prog, n.Args, fuseewArgs(len(n.Args), 0), n.Out.Shape); err != nil {
			return nil, err
		}
		if n.Out.Bytes() >= fuseewStreamBytes {
			mcs[p].stream(prog[len(prog)-1])
		}
	}
	// own points the machines at the output while it is written over an
	// argument (in place), to ask for its lines writable ahead; an empty
	// out clears them.
	own := func(out kernels.Tensor, args []kernels.Tensor) {
		inPlace := prefetchW && !noPrefetch && overlapsAny(out.Data, args)
		for _, mc := range mcs {
			mc.ahead, mc.aheadBy = mc.ahead[:0], ownAhead
			if inPlace && !mc.fence {
				mc.ahead = append(mc.ahead, prefetchArray{data: out.Data, size: elemSize[T](), write: true})
			}
		}
	}
	if parts == 1 {
		mc := mcs[0]
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			own(out, args)
			mc.run(kernels.View[T](out), args, 0, mc.n, nil, nil)
			own(kernels.Tensor{}, nil)
			return nil
		}, nil
	}
	// Split across the workers: part p computes the elements [bounds[p],
	// bounds[p+1]) with its own machine. The bounds are whole blocks, so
	// each block is computed as in one run over all elements.
	bounds := make([]int, parts+1)
	for p := range bounds {
		bounds[p] = min(count, roundUp(p*count/parts, fuseewBlock))
	}
	bounds[parts] = count
	var (
		o    []T
		args []kernels.Tensor
	)
	body := func(p int) { mcs[p].run(o, args, bounds[p], bounds[p+1], nil, nil) }
	par := n.Par
	return func(out kernels.Tensor, a []kernels.Tensor) error {
		o, args = kernels.View[T](out), a
		own(out, a)
		par.Run(parts, body)
		own(kernels.Tensor{}, nil)
		o, args = nil, nil
		return nil
	}, nil
}

// fuseewSplitElems is the size (elements) from which fused_elementwise
// splits its output across the executor's workers.
var fuseewSplitElems = 1 << 16 // a variable for the tests

// buildFusedMatmul builds fused_matmul: the product as matmul computes it,
// each gemm call (one per batch element, or per part's rows of one when
// split across workers) followed at once, by the same goroutine, by the
// epilogue over the part of the output it wrote, in place.
func buildFusedMatmul[T float](n *kernels.Node) (kernels.Func, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	product, err := ir.OpMatmul.Info().Infer(n.Args[:2], n.Attrs)
	if err != nil {
		return nil, err
	}
	in := append([]ir.Type{product}, n.Args[2:]...)
	mp, err := newMatmulPlan[T](n.Args[0].Shape, n.Args[1].Shape, n.Attrs, n.Par)
	if err != nil {
		return nil, err
	}
	// One machine per part: the parts run their epilogues side by side.
	mcs := make([]*fuseewMachine[T], mp.parts())
	for p := range mcs {
		if mcs[p], err = newFuseewMachine[T](prog, in, append([]int{-1}, fuseewArgs(len(n.Args)-2, 2)...), n.Out.Shape); err != nil {
			return nil, err
		}
	}
	var (
		o    []T
		args []kernels.Tensor
	)
	epilogue := func(part, lo, hi int) { mcs[part].run(o, args, lo, hi, nil, nil) }
	return func(out kernels.Tensor, a []kernels.Tensor) error {
		o, args = kernels.View[T](out), a
		mp.run(o, kernels.View[T](a[0]), kernels.View[T](a[1]), epilogue)
		o, args = nil, nil
		return nil
	}, nil
}

// buildFusedReduce builds fused_reduce: the program's result, block by
// block, added into the sums in the order of buildReduce (each sum from
// zero in T, each run of reduced elements in rowSum's order, rowsum.go; a
// sum of the whole result in sumAllBlock blocks, sum_all.go), then divided
// by the count for mean.
func buildFusedReduce[T float](n *kernels.Node) (kernels.Func, error) {
	prog, err := ir.EwProgramOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	types, err := prog.Types(n.Args)
	if err != nil {
		return nil, err
	}
	xs := types[len(types)-1].Shape
	mc, err := newFuseewMachine[T](prog, n.Args, fuseewArgs(len(n.Args), 0), xs)
	if err != nil {
		return nil, err
	}
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	var mean bool
	switch op := n.Attrs.Str("op", "sum"); op {
	case "sum":
	case "mean":
		mean = true
	default:
		return nil, fmt.Errorf(`op must be "sum" or "mean", found %q`, op)
	}
	dst := ir.ReducedShape(xs, axes, true).Strides()
	count := 1
	for _, ax := range axes {
		dst[ax] = 0
		count *= xs[ax]
	}
	red := newFuseewCursor(xs, dst)
	div := T(count)
	if n.Out.Shape.NumElements() == 1 && count > sumAllBlock {
		return fusedReduceAll[T](n, prog, xs, count, mean, div)
	}
	if f, err := splitFusedReduce[T](n, prog, xs, axes, count, div, mean); f != nil || err != nil {
		return f, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o := kernels.View[T](out)
		clear(o)
		mc.run(nil, args, 0, mc.n, o, &red)
		if mean {
			reduceDivide(o, div)
		}
		return nil
	}, nil
}

// fusedReduceAll returns the Func of a fused_reduce of count elements
// into one, in the block order of sum_all.go: part p computes the
// program's result four blocks at a time into scratch of its own
// (runTo), whose blocks sumAllBlocks sums.
func fusedReduceAll[T float](n *kernels.Node, prog ir.EwProgram, xs ir.Shape, count int, mean bool, div T) (kernels.Func, error) {
	parts := sumAllParts(n.Par, count, len(prog)+1)
	mcs := make([]*fuseewMachine[T], parts)
	bufs := make([][]T, parts)
	for p := range mcs {
		var err error
		if mcs[p], err = newFuseewMachine[T](prog, n.Args, fuseewArgs(len(n.Args), 0), xs); err != nil {
			return nil, err
		}
		bufs[p] = make([]T, 4*sumAllBlock)
	}
	aheads := make([]rowAhead, parts)
	return sumAllFunc(n.Par, parts, count, mean, div, func(p int, sums []T, args []kernels.Tensor, k0, k1 int) {
		mc, buf := mcs[p], bufs[p]
		// While the blocks are summed in cache, each asks for a block of
		// the next four's inputs.
		ahead := aheads[p].of(args, sumAllBlock, k1*sumAllBlock, count)
		for k := k0; k < k1; k += 4 {
			lo, hi := k*sumAllBlock, min((k+4)*sumAllBlock, k1*sumAllBlock, count)
			mc.runTo(buf, args, lo, hi)
			ahead.from = k + 4
			for j := k; j < min(k+4, k1); j++ {
				ahead.row(j - k)
				sumAllBlocks(sums[j:j+1], buf[(j-k)*sumAllBlock:hi-lo])
			}
		}
	}), nil
}

// splitFusedReduce returns fused_reduce's Func split across n.Par's
// workers, or nil when it stays on one. Each part has a machine and a
// cursor of its own and adds the same elements, in the same order, into
// each sum as an unsplit run (each sum from zero, in buildReduce's order),
// so the bits do not depend on the number of parts:
//
//   - over trailing axes (each output element sums a contiguous run of
//     count elements), part p computes the output elements [bounds[p],
//     bounds[p+1]); the bounds are also multiples of fuseewBlock
//     elements, so every block of the program is the one an unsplit run
//     computes;
//   - keeping the innermost axis (a bias gradient: the sum over the
//     leading axes), part p computes the columns [bounds[p], bounds[p+1])
//     of every row, rows in order; rows and bounds are multiples of
//     parAlign elements, so every vector of a step covers the elements it
//     covers in an unsplit run.
func splitFusedReduce[T float](n *kernels.Node, prog ir.EwProgram, xs ir.Shape, axes []int, count int, div T, mean bool) (kernels.Func, error) {
	outs := n.Out.Shape.NumElements()
	if count == 0 || outs < 2 {
		return nil, nil
	}
	dst := ir.ReducedShape(xs, axes, true).Strides()
	trailing := true
	for i, ax := range axes {
		dst[ax] = 0
		trailing = trailing && ax == len(xs)-len(axes)+i
	}
	var (
		parts int
		body  func(p int)
		o     []T
		args  []kernels.Tensor
	)
	w := newWalk(xs, dst, nil)
	switch {
	case trailing:
		align := fuseewBlock / gcd(count, fuseewBlock) // outputs per whole number of blocks
		parts = min(parParts(n.Par, outs, 4*count), outs/align)
		if parts < 2 {
			return nil, nil
		}
		bounds := parBounds(outs, parts, align)
		mcs, reds, err := newFuseewMachines[T](parts, prog, n.Args, xs, dst)
		if err != nil {
			return nil, err
		}
		body = func(p int) {
			lo, hi := bounds[p], bounds[p+1]
			mcs[p].run(nil, args, lo*count, hi*count, o, &reds[p])
		}
	case w.ia == 1 && w.inner%parAlign == 0:
		// At least reduceSplitCols columns a part, as a sum's (reduce.go).
		parts = min(parParts(n.Par, xs.NumElements()/parAlign, 4*parAlign), w.inner/reduceSplitCols)
		if parts < 2 {
			return nil, nil
		}
		bounds := parBounds(w.inner, parts, parAlign)
		mcs, reds, err := newFuseewMachines[T](parts, prog, n.Args, xs, dst)
		if err != nil {
			return nil, err
		}
		walks := make([]*walk, parts)
		for p := range walks {
			walks[p] = newWalk(xs, dst, nil)
		}
		body = func(p int) {
			lo, hi := bounds[p], bounds[p+1]
			walks[p].each(func(xo, _, _ int) {
				mcs[p].run(nil, args, xo+lo, xo+hi, o, &reds[p])
			})
		}
	default:
		return nil, nil
	}
	par := n.Par
	return func(out kernels.Tensor, a []kernels.Tensor) error {
		o, args = kernels.View[T](out), a
		clear(o)
		par.Run(parts, body)
		if mean {
			reduceDivide(o, div)
		}
		o, args = nil, nil
		return nil
	}, nil
}

// newFuseewMachines returns parts machines of prog over the arguments
// args, computing a result of shape xs, and as many cursors over the sums
// of fused_reduce (strides dst along xs).
func newFuseewMachines[T float](parts int, prog ir.EwProgram, args []ir.Type, xs ir.Shape, dst []int) ([]*fuseewMachine[T], []fuseewCursor, error) {
	mcs := make([]*fuseewMachine[T], parts)
	reds := make([]fuseewCursor, parts)
	for p := range mcs {
		var err error
		if mcs[p], err = newFuseewMachine[T](prog, args, fuseewArgs(len(args), 0), xs); err != nil {
			return nil, nil, err
		}
		reds[p] = newFuseewCursor(xs, dst)
	}
	return mcs, reds, nil
}

// gcd returns the greatest common divisor of a and b.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
