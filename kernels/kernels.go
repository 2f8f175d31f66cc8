// Package kernels defines what a compute kernel is to kiln: a function over
// typed views of arena buffers, built once per plan step. Backends register
// their kernel builders per (op, result dtype) in sub-packages (kernels/cpu,
// kernels/wgsl), which import this package and never each other; what they
// share (constants' values, the wording of index errors) lives here.
package kernels

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	"github.com/kilnml/kiln/ir"
)

// Tensor is a view of one buffer: its static type and its bytes. Data is
// exactly Type.Bytes() long and aligned for the element type.
type Tensor struct {
	Type ir.Type
	Data []byte
}

// Elem is the set of Go element types tensors hold.
type Elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~bool
}

// View returns t's elements as a []T. T must match t's dtype; View panics
// otherwise, since a mismatch is a bug in kiln, not bad input.
func View[T Elem](t Tensor) []T {
	var z T
	if want := ir.DType(dtypeOf(z)); want != t.Type.DType {
		panic(fmt.Sprintf("kernels: %s tensor viewed as %s", t.Type, want))
	}
	n := t.Type.Shape.NumElements()
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(t.Data))), n)
}

func dtypeOf(v any) ir.DType {
	switch v.(type) {
	case float32:
		return ir.F32
	case float64:
		return ir.F64
	case int32:
		return ir.I32
	case int64:
		return ir.I64
	case bool:
		return ir.Bool
	}
	return ir.InvalidDType
}

// DTypeOf returns the dtype of Go element type T.
func DTypeOf[T Elem]() ir.DType {
	var z T
	return dtypeOf(z)
}

// Node is what a kernel builder sees of a step: the op, its canonical
// attributes and the static types of its arguments and result.
type Node struct {
	Op    ir.Op
	Attrs ir.Attrs
	Args  []ir.Type
	Out   ir.Type

	// Step, when set, points at the executor's count of completed steps
	// (0 during the first step, and again after a reset). Kernels whose
	// result depends on the step (dropout's mask) read it on every call;
	// nil reads as step 0.
	Step *int64

	// Par, when set, runs the parts of one call of the kernel on the
	// executor's workers (see Parallel); nil runs them in order on the
	// calling goroutine. Kernels read Par.Workers() once, in the builder,
	// to fix their parts and the state each part needs.
	Par Parallel

	// Comm, when set, is the data-parallel job's communicator, which the
	// collectives (ir.Op.IsCollective) run on; a collective's builder
	// refuses a nil Comm or one of another size than its "ranks".
	Comm Collective
}

// Collective is a data-parallel job's communicator as a kernel sees it
// (dist.Comm): sums over the ranks in rank order, the same bits on every
// rank.
type Collective interface {
	// Rank is this process's rank, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllreduceSum replaces data, elements of dt, by their sum over the
	// ranks in rank order.
	AllreduceSum(data []byte, dt ir.DType) error
	// ReduceScatter sets shard to this rank's shard (ir.ShardLen
	// elements) of that sum of data.
	ReduceScatter(data []byte, dt ir.DType, shard []byte) error
	// Allgather sets data to every rank's shard in rank order, cut to
	// len(data).
	Allgather(shard, data []byte) error
}

// RunCollective computes out, the result of op (one of the ops of
// data-parallel training, ir.Op.IsCollective), from its argument x on c:
// the host code every backend runs them with.
func RunCollective(c Collective, op ir.Op, out, x Tensor) error {
	switch op {
	case ir.OpAllReduce:
		copy(out.Data, x.Data)
		return c.AllreduceSum(out.Data, out.Type.DType)
	case ir.OpReduceScatter:
		return c.ReduceScatter(x.Data, x.Type.DType, out.Data)
	case ir.OpAllGather:
		return c.Allgather(x.Data, out.Data)
	case ir.OpShard:
		// This rank's part of x: the bytes from rank*len(out), zeros past
		// the end of x.
		lo := min(c.Rank()*len(out.Data), len(x.Data))
		k := copy(out.Data, x.Data[lo:])
		clear(out.Data[k:])
		return nil
	}
	return fmt.Errorf("%s is not an op of data-parallel training", op)
}

// CheckCollective reports an error when a collective compiled for the
// ranks in attrs cannot run on c.
func CheckCollective(c Collective, op ir.Op, attrs ir.Attrs) error {
	ranks := attrs.Int("ranks", 0)
	if c == nil {
		return fmt.Errorf("the plan is compiled for data-parallel training on %d ranks (%s), but this process is not part of such a job: launch it under mpirun with -dist mpi", ranks, op)
	}
	if c.Size() != int(ranks) {
		return fmt.Errorf("the plan is compiled for %d ranks, but this job has %d", ranks, c.Size())
	}
	return nil
}

// Parallel is an executor's pool as a kernel sees it: a way to split one
// call's work into parts that run side by side. A kernel splits only what
// every chunking computes bit for bit alike (rows of a gemm's result, never
// its inner dimension; ranges of an elementwise result), so its result is
// the same for any number of workers.
type Parallel interface {
	// Workers is how many goroutines may run parts at once (at least 1).
	Workers() int
	// Run calls body(0), ..., body(n-1), each once, on the pool's idle
	// workers and the calling goroutine, and returns when all have
	// returned. It may be called from a kernel running on a worker (the
	// caller always runs parts itself, so it never waits on a busy pool)
	// and allocates nothing: body should be made once, in the builder.
	// exec/cpu's pool runs the parts [c·n/W, (c+1)·n/W) on CPU c of W
	// (worker c where workers and CPUs differ in number) when it is free
	// to, so state a kernel keeps per worker (buffers its parts write)
	// stays on one core when keyed by that block; which goroutine runs a
	// part never changes its result.
	Run(n int, body func(part int))
}

// Workers returns p.Workers(), or 1 when p is nil.
func Workers(p Parallel) int {
	if p == nil {
		return 1
	}
	return max(p.Workers(), 1)
}

// Run runs body(0..n-1) with p (see Parallel.Run), or in order on the
// calling goroutine when p is nil or n is 1.
func Run(p Parallel, n int, body func(part int)) {
	if p == nil || n <= 1 {
		for i := range n {
			body(i)
		}
		return
	}
	p.Run(n, body)
}

// Func computes out from args. It returns an error for bad data that static
// types cannot rule out (a label out of range); the executor names the op.
type Func func(out Tensor, args []Tensor) error

// Builder prepares a kernel for one node: it reads the attributes and
// shapes once so that the returned Func does no planning per step.
type Builder func(n *Node) (Func, error)

// Key identifies a kernel: op and result dtype.
type Key struct {
	Op    ir.Op
	DType ir.DType
}

// Table maps (op, dtype) to one backend's kernel builders, of whatever
// form that backend's builders take: a CPU builder returns a Func, a GPU
// builder a description of its shader dispatches (kernels/wgsl).
type Table[B any] struct {
	name     string
	builders map[Key]B
}

// NewTable returns an empty table for the named backend.
func NewTable[B any](name string) *Table[B] {
	return &Table[B]{name: name, builders: map[Key]B{}}
}

// Name returns the backend's name.
func (r *Table[B]) Name() string { return r.name }

// Register adds the builder for op producing dtype dt. Registering a key
// twice is a programming error and panics at init.
func (r *Table[B]) Register(op ir.Op, dt ir.DType, b B) {
	k := Key{op, dt}
	if _, dup := r.builders[k]; dup {
		panic(fmt.Sprintf("kernels: %s kernel for %s/%s registered twice", r.name, op, dt))
	}
	r.builders[k] = b
}

// Has reports whether a kernel is registered for op producing dt.
func (r *Table[B]) Has(op ir.Op, dt ir.DType) bool {
	_, ok := r.builders[Key{op, dt}]
	return ok
}

// Keys returns every registered (op, dtype), sorted by op, then dtype.
func (r *Table[B]) Keys() []Key {
	keys := make([]Key, 0, len(r.builders))
	for k := range r.builders {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if a.Op != b.Op {
			return cmp.Compare(a.Op, b.Op)
		}
		return cmp.Compare(a.DType, b.DType)
	})
	return keys
}

// Lookup returns the builder for op producing dt, or an error naming the
// backend, the op and the dtype when there is none.
func (r *Table[B]) Lookup(op ir.Op, dt ir.DType) (B, error) {
	b, ok := r.builders[Key{op, dt}]
	if !ok {
		return b, fmt.Errorf("%s backend has no %s kernel for %s", r.name, op, dt)
	}
	return b, nil
}

// Registry maps (op, dtype) to CPU-style kernel builders for one backend.
type Registry struct {
	*Table[Builder]
}

// NewRegistry returns an empty registry for the named backend.
func NewRegistry(name string) *Registry {
	return &Registry{NewTable[Builder](name)}
}

// Build returns the kernel for n.
func (r *Registry) Build(n *Node) (Func, error) {
	b, err := r.Lookup(n.Op, n.Out.DType)
	if err != nil {
		return nil, err
	}
	f, err := b(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", n.Op, err)
	}
	return f, nil
}

// CheckNode reports whether n is a node a builder for (op, dt) may take
// without further checks: the right op, arity and result dtype, valid
// dtypes, no negative dimension, and a result type equal to the one ir
// infers from the argument types and attributes. Builders can then index
// shapes freely.
func CheckNode(op ir.Op, dt ir.DType, n *Node) error {
	if n.Op != op || n.Out.DType != dt {
		return fmt.Errorf("kernel for %s/%s given a %s node producing %s", op, dt, n.Op, n.Out.DType)
	}
	if err := ir.CheckArity(op, len(n.Args)); err != nil {
		return err
	}
	for _, t := range append([]ir.Type{n.Out}, n.Args...) {
		if t.DType.Size() == 0 {
			return fmt.Errorf("invalid dtype in %s", t)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("shape %s has a negative dimension", t.Shape)
			}
		}
	}
	want, err := op.Info().Infer(n.Args, n.Attrs)
	if err != nil {
		return err
	}
	if !want.Equal(n.Out) {
		return fmt.Errorf("result type %s does not match %s, inferred from %v%s", n.Out, want, n.Args, n.Attrs)
	}
	return nil
}

// Float64s returns t's elements converted to float64 (bool as 0 or 1).
func Float64s(t Tensor) []float64 {
	switch t.Type.DType {
	case ir.F32:
		return convert[float32](View[float32](t))
	case ir.F64:
		return append([]float64(nil), View[float64](t)...)
	case ir.I32:
		return convert[int32](View[int32](t))
	case ir.I64:
		return convert[int64](View[int64](t))
	case ir.Bool:
		b := View[bool](t)
		out := make([]float64, len(b))
		for i, x := range b {
			if x {
				out[i] = 1
			}
		}
		return out
	}
	return nil
}

func convert[T float32 | int32 | int64](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// SetFloat64s stores v into t, converting to t's dtype (integers truncate
// toward zero, bool is v != 0). v must have one element per element of t.
func SetFloat64s(t Tensor, v []float64) error {
	if n := t.Type.Shape.NumElements(); len(v) != n {
		return fmt.Errorf("%d values for a %s tensor of %d elements", len(v), t.Type, n)
	}
	switch t.Type.DType {
	case ir.F32:
		d := View[float32](t)
		for i, x := range v {
			d[i] = float32(x)
		}
	case ir.F64:
		copy(View[float64](t), v)
	case ir.I32:
		d := View[int32](t)
		for i, x := range v {
			d[i] = int32(x)
		}
	case ir.I64:
		d := View[int64](t)
		for i, x := range v {
			d[i] = int64(x)
		}
	case ir.Bool:
		d := View[bool](t)
		for i, x := range v {
			d[i] = x != 0
		}
	default:
		return fmt.Errorf("cannot store into a %s tensor", t.Type)
	}
	return nil
}

// New returns a zeroed tensor of type t backed by fresh memory, aligned for
// any element type.
func New(t ir.Type) Tensor {
	n := t.Bytes()
	words := make([]uint64, (n+7)/8)
	var data []byte
	if n > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
	}
	return Tensor{Type: t, Data: data}
}
