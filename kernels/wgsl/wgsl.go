// Package wgsl is kiln's GPU kernel library: for each (op, dtype) a builder
// that turns one plan step into WGSL compute shaders and the dispatches that
// run them. It is plain Go (strings and data, no cgo): exec/gpu compiles the
// shaders, binds the arena and records the dispatches.
//
// A builder sees the step as a kernels.Node (op, canonical attributes,
// argument and result types) and returns a Kernel: one or more Dispatches,
// each with its WGSL source, its workgroup counts and the operands it binds
// (the step's arguments and result, scratch buffers and constant tables the
// builder asks for, the status word). Shapes and attributes are baked into
// the source as constants, so the source depends only on the node, and
// identical nodes share one compiled pipeline (exec/gpu caches pipelines by
// source).
//
// Conventions every kernel follows:
//
//   - Binding i of group 0 is Dispatch.Bind[i]. Every binding is declared
//     var<storage, read_write> (wgpu refuses a buffer bound read-only and
//     read-write in one dispatch, and the arena is one buffer), with Decl.
//   - Element types: f32 as f32; i32 as i32; i64 as two u32 words, of which
//     kernels read the low one (values must fit in i32); bool as bytes packed
//     four to a u32 word. Decl also writes a loader ld_NAME(i) -> f32, i32 or
//     bool for element i. A kernel writing bool writes whole words (one
//     thread per 4 elements).
//   - Float atomics do not exist: a value several threads contribute to is
//     computed by one thread (or one workgroup) that sums in a fixed order,
//     so results are deterministic.
//   - Data errors (a label out of range) are reported through the Status
//     operand: atomicMax of a code (k+1 for Kernel.Checks[k]) into word 0,
//     atomicMin of the offending element's index into word 1.
//
// # Adding a kernel
//
// One file per op family; one test case per (op, dtype).
//
//  1. Write func buildX(n *kernels.Node) (*Kernel, error). Call
//     checkDTypes(n) first (it refuses f64). Declare each binding with
//     Decl(i, name, dtype) (and StatusDecl(i) if the op can meet bad data,
//     StepDecl(i) if its result depends on the step, as dropout's does),
//     write main with header(WorkgroupSize) (builtins gid, wid, lid), and
//     guard every thread with the element count: sizes are rarely
//     multiples of the workgroup size. Bake shapes in as u32 constants and
//     float attributes with F32(v) (exact bits).
//  2. Return a Kernel whose Dispatches hold the source, the workgroup
//     counts and Bind[i], the operand of @binding(i). Ask for Scratch
//     buffers for results passed between dispatches and Data tables for
//     precomputed index lists (the consumer lists of a backward written as
//     a gather). At most 8 bindings per dispatch (WebGPU's default limit;
//     the executor checks the device's).
//  3. Register it in the file's init: register(ir.OpX, ir.F32, buildX);
//     the wrapper runs kernels.CheckNode, so the builder sees only nodes
//     shape inference accepts. An elementwise op needs only a line in
//     ewRules (elementwise.go).
//  4. Add a case to wgsltest.Cases: a small .kir graph on odd shapes.
//     exec/gpu's TestKernelsMatchCPU compares its outputs with the CPU
//     executor's; the pure-Go TestEveryBuilderGenerates builds every node
//     of the cases, checks each kernel's shape (entry point, bindings
//     declared once, at most 8) and fails for a registered (op, dtype) no
//     case builds. Golden shaders under testdata (go test ./kernels/wgsl
//     -update) make a generator change visible in review.
package wgsl

import (
	"fmt"
	"math"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kind says what a binding of a dispatch refers to.
type Kind uint8

// The operand kinds.
const (
	Arg     Kind = iota // the step's argument Index
	Out                 // the step's result
	Scratch             // Kernel.Scratch[Index], device memory private to the step
	Data                // Kernel.Data[Index], a constant table uploaded once
	Status              // the step's status words (see Kernel.Checks)
	StepNo              // the executor's count of completed steps (see StepDecl)
)

// Operand is one binding of a dispatch.
type Operand struct {
	Kind  Kind
	Index int
}

// Dispatch is one compute shader run: Source's entry point "main" on
// Groups workgroups, binding Bind[i] at @group(0) @binding(i).
type Dispatch struct {
	Source string
	Groups [3]uint32
	Bind   []Operand
}

// Check is a data error a kernel may report through its Status operand.
type Check struct {
	// Arg is the argument whose element at the reported index the message
	// quotes (labels), or -1.
	Arg int
	// Message formats the error from that element's value and the index.
	Message func(value, index int64) string
}

// Kernel is what a builder returns: dispatches run in order, with the
// buffers they need beside the arena.
type Kernel struct {
	Dispatches []Dispatch
	Scratch    []int64  // bytes of each scratch buffer; contents undefined at the start of a step
	Data       [][]byte // constant tables, uploaded once when the executor is built
	Checks     []Check  // the data errors the kernel reports (codes 1, 2, ...)
}

// Builder prepares the kernel of one node. It returns an error for a node
// it cannot run (an unsupported shape or attribute), naming what it found.
type Builder func(n *kernels.Node) (*Kernel, error)

// Kernels is the GPU backend's table of builders.
var Kernels = kernels.NewTable[Builder]("gpu")

// Build returns the kernel for n, or an error naming the op and dtype when
// the GPU backend has none.
func Build(n *kernels.Node) (*Kernel, error) {
	b, err := Kernels.Lookup(n.Op, n.Out.DType)
	if err != nil {
		return nil, err
	}
	k, err := b(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", n.Op, err)
	}
	return k, nil
}

// register adds b for (op, dt) behind kernels.CheckNode, so builders only
// see nodes that shape inference accepts.
func register(op ir.Op, dt ir.DType, b Builder) {
	Kernels.Register(op, dt, func(n *kernels.Node) (*Kernel, error) {
		if err := kernels.CheckNode(op, dt, n); err != nil {
			return nil, err
		}
		return b(n)
	})
}

// WorkgroupSize is the number of threads of a one-dimensional workgroup.
const WorkgroupSize = 256

// MaxGroups is the most workgroups a dispatch has along one dimension
// (WebGPU's maxComputeWorkgroupsPerDimension default).
const MaxGroups = 65535

// Grid returns the workgroup counts that cover n threads in workgroups of
// WorkgroupSize, spilling into a second dimension past MaxGroups, and the
// WGSL expression of the flat thread index (from the builtin gid).
func Grid(n int) ([3]uint32, string) {
	g := (n + WorkgroupSize - 1) / WorkgroupSize
	if g <= MaxGroups {
		return [3]uint32{uint32(max(g, 1)), 1, 1}, "gid.x"
	}
	y := (g + MaxGroups - 1) / MaxGroups
	return [3]uint32{MaxGroups, uint32(y), 1}, fmt.Sprintf("(gid.x + gid.y * %du)", MaxGroups*WorkgroupSize)
}

// Groups2 returns workgroup counts for n workgroups indexed by one flat
// number, spilling into the second dimension past MaxGroups, and the WGSL
// expression of that number (from the builtin wid).
func Groups2(n int) ([3]uint32, string) {
	if n <= MaxGroups {
		return [3]uint32{uint32(max(n, 1)), 1, 1}, "wid.x"
	}
	y := (n + MaxGroups - 1) / MaxGroups
	return [3]uint32{MaxGroups, uint32(y), 1}, fmt.Sprintf("(wid.x + wid.y * %du)", MaxGroups)
}

// ValueType returns the WGSL type a kernel computes dt in: f32, i32 (i32
// and i64) or bool. f64 has none.
func ValueType(dt ir.DType) (string, error) {
	switch dt {
	case ir.F32:
		return "f32", nil
	case ir.I32, ir.I64:
		return "i32", nil
	case ir.Bool:
		return "bool", nil
	}
	return "", fmt.Errorf("the GPU has no %s type (WGSL has no f64)", dt)
}

// Decl returns the declaration of binding i, called name, holding dt
// elements, and its loader fn ld_NAME(i: u32) -> ValueType(dt). Status
// bindings are declared with StatusDecl.
func Decl(i int, name string, dt ir.DType) string {
	var b strings.Builder
	switch dt {
	case ir.F32:
		fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read_write> %s: array<f32>;\n", i, name)
		fmt.Fprintf(&b, "fn ld_%s(i: u32) -> f32 { return %s[i]; }\n", name, name)
	case ir.I32:
		fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read_write> %s: array<i32>;\n", i, name)
		fmt.Fprintf(&b, "fn ld_%s(i: u32) -> i32 { return %s[i]; }\n", name, name)
	case ir.I64:
		fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read_write> %s: array<u32>;\n", i, name)
		fmt.Fprintf(&b, "fn ld_%s(i: u32) -> i32 { return bitcast<i32>(%s[2u * i]); }\n", name, name)
		fmt.Fprintf(&b, "fn hi_%s(i: u32) -> i32 { return bitcast<i32>(%s[2u * i + 1u]); }\n", name, name)
	case ir.Bool:
		fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read_write> %s: array<u32>;\n", i, name)
		fmt.Fprintf(&b, "fn ld_%s(i: u32) -> bool { return ((%s[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu) != 0u; }\n", name, name)
	default:
		panic(fmt.Sprintf("wgsl: no declaration for %s", dt)) // builders refuse f64 first
	}
	return b.String()
}

// StatusDecl returns the declaration of binding i as the step's status
// words, called status.
func StatusDecl(i int) string {
	return fmt.Sprintf("@group(0) @binding(%d) var<storage, read_write> status: array<atomic<u32>>;\n", i)
}

// StepDecl returns the declaration of binding i as the executor's count of
// completed steps since its last Reset, called step_count: two u32 words,
// the low and the high half of the 64-bit count, which the executor writes
// before every step (dropout's mask depends on it, as on the CPU).
func StepDecl(i int) string {
	return fmt.Sprintf("@group(0) @binding(%d) var<storage, read_write> step_count: array<u32>;\n", i)
}

// F32 returns the WGSL literal of v rounded to f32, exactly (by its bits),
// so that an immediate means the same number on every device.
func F32(v float64) string {
	f := float32(v)
	if f == 0 && !math.Signbit(float64(f)) {
		return "0.0"
	}
	return fmt.Sprintf("bitcast<f32>(0x%08xu)", math.Float32bits(f))
}

// checkDTypes refuses a node with an f64 (or other non-GPU) operand.
func checkDTypes(n *kernels.Node) error {
	for _, t := range append([]ir.Type{n.Out}, n.Args...) {
		if _, err := ValueType(t.DType); err != nil {
			return err
		}
	}
	return nil
}

// broadcastStrides returns, for each axis of out, the stride of in along it
// (0 where in is broadcast), with in aligned to out's trailing axes.
func broadcastStrides(in, out ir.Shape) []int {
	st := in.Strides()
	r := make([]int, len(out))
	off := len(out) - len(in)
	for i := range out {
		j := i - off
		if j >= 0 && in[j] != 1 {
			r[i] = st[j]
		}
	}
	return r
}

// offsetExpr returns the WGSL expression of the element offset in a tensor
// with strides st (one per axis of shape) of the flat index idx over shape,
// by decomposing idx into coordinates. It returns idx itself when the
// strides are shape's own, and "0u" when they are all 0.
func offsetExpr(idx string, shape ir.Shape, st []int) string {
	own := shape.Strides()
	same, zero := true, true
	for i := range shape {
		if shape[i] != 1 && st[i] != own[i] {
			same = false
		}
		if shape[i] != 1 && st[i] != 0 {
			zero = false
		}
	}
	switch {
	case zero:
		return "0u"
	case same:
		return idx
	}
	var terms []string
	for i := range shape {
		if shape[i] == 1 || st[i] == 0 {
			continue
		}
		c := idx
		if own[i] != 1 {
			c = fmt.Sprintf("(%s / %du)", c, own[i])
		}
		if i > 0 {
			c = fmt.Sprintf("(%s %% %du)", c, shape[i])
		}
		if st[i] != 1 {
			c = fmt.Sprintf("%s * %du", c, st[i])
		}
		terms = append(terms, c)
	}
	return "(" + strings.Join(terms, " + ") + ")"
}

// header is the entry point line of a kernel on one-dimensional workgroups.
func header(wg int) string {
	return fmt.Sprintf("@compute @workgroup_size(%d)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {\n", wg)
}
