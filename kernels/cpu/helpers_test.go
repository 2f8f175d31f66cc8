package cpu

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Tolerances against a float64 reference, where arithmetic is not exact.
const (
	relF32 = 1e-6
	relF64 = 1e-12
)

var allDTypes = []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64, ir.Bool}

// exercised records every (op, result dtype) a test built and ran through
// run, so that TestMain can check that every registered kernel was tested.
var exercised = struct {
	sync.Mutex
	m map[kernels.Key]bool
}{m: map[kernels.Key]bool{}}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 && fullRun(func(name string) string { return flag.Lookup(name).Value.String() }) {
		var missing []string
		for _, op := range ir.Ops() {
			for _, dt := range allDTypes {
				if Kernels.Has(op, dt) && !exercised.m[kernels.Key{Op: op, DType: dt}] {
					missing = append(missing, fmt.Sprintf("%s/%s", op, dt))
				}
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			fmt.Fprintf(os.Stderr, "FAIL: registered kernels no test ran: %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}

// fullRun reports whether the test flags (read through value, by name) ask
// for every test to run, the only kind of run that can judge which kernels
// went untested: not a -run or -skip selection, not -list (which runs
// nothing), not -fuzz.
func fullRun(value func(name string) string) bool {
	for _, name := range []string{"test.run", "test.skip", "test.list", "test.fuzz"} {
		if value(name) != "" {
			return false
		}
	}
	return true
}

// tensorOf returns a tensor of the given shape holding vals (or zeros when
// vals is nil), copied in through kernels.View.
func tensorOf[T kernels.Elem](shape []int, vals []T) kernels.Tensor {
	ty := ir.Type{DType: kernels.DTypeOf[T](), Shape: ir.Shape(shape).Clone()}
	t := kernels.Tensor{Type: ty, Data: make([]byte, ty.Bytes())}
	if vals != nil {
		if len(vals) != ty.Shape.NumElements() {
			panic(fmt.Sprintf("tensorOf: %d values for %s", len(vals), ty))
		}
		copy(kernels.View[T](t), vals)
	}
	return t
}

// emptyOf returns a zeroed tensor of type ty.
func emptyOf(ty ir.Type) kernels.Tensor {
	return kernels.Tensor{Type: ty, Data: make([]byte, ty.Bytes())}
}

// node returns the node of op applied to arguments of types args, with attrs
// made canonical and the result type inferred as the graph would.
func node(t testing.TB, op ir.Op, attrs ir.Attrs, args ...ir.Type) *kernels.Node {
	t.Helper()
	canon, err := ir.Canonical(op, attrs)
	if err != nil {
		t.Fatalf("%s%s: %v", op, attrs, err)
	}
	out, err := op.Info().Infer(args, canon)
	if err != nil {
		t.Fatalf("%s%s on %v: %v", op, attrs, args, err)
	}
	return &kernels.Node{Op: op, Attrs: canon, Args: args, Out: out}
}

// typesOf returns the types of args.
func typesOf(args []kernels.Tensor) []ir.Type {
	ts := make([]ir.Type, len(args))
	for i, a := range args {
		ts[i] = a.Type
	}
	return ts
}

// run builds op for args and runs it once, returning the result and the
// Func's error. The result buffer starts filled with garbage so that a
// kernel which forgets to write an element is caught.
func run(t testing.TB, op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) (kernels.Tensor, error) {
	t.Helper()
	return runNode(t, node(t, op, attrs, typesOf(args)...), args...)
}

// runNode is run for the node n, built by node (and completed by the
// caller: a communicator, a pool).
func runNode(t testing.TB, n *kernels.Node, args ...kernels.Tensor) (kernels.Tensor, error) {
	t.Helper()
	f, err := Kernels.Build(n)
	if err != nil {
		t.Fatalf("build %s%s on %v: %v", n.Op, n.Attrs, n.Args, err)
	}
	exercised.Lock()
	exercised.m[kernels.Key{Op: n.Op, DType: n.Out.DType}] = true
	exercised.Unlock()
	out := emptyOf(n.Out)
	for i := range out.Data {
		out.Data[i] = 0x7f
	}
	if n.Out.DType == ir.Bool {
		clear(out.Data) // only 0 and 1 are valid bools
	}
	return out, f(out, args)
}

// mustRun is run for a Func that must not fail.
func mustRun(t testing.TB, op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) kernels.Tensor {
	t.Helper()
	out, err := run(t, op, attrs, args...)
	if err != nil {
		t.Fatalf("%s%s on %v: %v", op, attrs, typesOf(args), err)
	}
	return out
}

// rel returns the tolerance for comparing T results with a float64
// reference: 0 (exact) for integers.
func rel[T number]() float64 {
	var z T
	switch any(z).(type) {
	case float32:
		return relF32
	case float64:
		return relF64
	}
	return 0
}

// near reports whether got is within rel·|want| of want; NaNs match and
// infinities must be equal.
func near(got, want, rel float64) bool {
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case math.IsInf(want, 0) || math.IsInf(got, 0):
		return got == want
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// checkNear fails unless every got[i] is near want[i] within rel·|want| +
// abs.
func checkNear[T number](t testing.TB, what string, got []T, want []float64, rel, abs float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i, g := range got {
		w := want[i]
		ok := near(float64(g), w, rel)
		if !ok && abs > 0 && !math.IsNaN(w) && !math.IsInf(w, 0) {
			ok = math.Abs(float64(g)-w) <= rel*math.Abs(w)+abs
		}
		if !ok {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v (rel %g, abs %g)", what, i, g, w, rel, abs)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements wrong", what, bad)
	}
}

// checkEqual fails unless got equals want element by element (bitwise
// equality for floats, except that NaNs match).
func checkEqual[T kernels.Elem](t testing.TB, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] && (got[i] == got[i] || want[i] == want[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements wrong", what, bad)
	}
}

// conv converts float64 values to T.
func conv[T number](v []float64) []T {
	out := make([]T, len(v))
	for i, f := range v {
		out[i] = T(f)
	}
	return out
}

// f64s converts T values to float64.
func f64s[T number](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// newRand returns a deterministic source for a test.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6b696c6e)) }

// randVals returns n random values: integers in [-9,9] for integer T and
// for floats when ints is set (so that sums and products are exact),
// otherwise uniform in [-2,2).
func randVals[T number](r *rand.Rand, n int, ints bool) []T {
	out := make([]T, n)
	var z T
	_, isInt := any(z).(int32)
	if _, ok := any(z).(int64); ok {
		isInt = true
	}
	for i := range out {
		if ints || isInt {
			out[i] = T(r.IntN(19) - 9)
		} else {
			out[i] = T(r.Float64()*4 - 2)
		}
	}
	return out
}

// unravel returns the multi-index of flat index i in shape s.
func unravel(s ir.Shape, i int) []int {
	idx := make([]int, len(s))
	for k := len(s) - 1; k >= 0; k-- {
		if s[k] > 0 {
			idx[k] = i % s[k]
			i /= s[k]
		}
	}
	return idx
}

// bcastIndex returns the flat index in a tensor of shape in of the element
// that NumPy broadcasting puts at multi-index idx of the broadcast shape.
func bcastIndex(in ir.Shape, idx []int) int {
	off := len(idx) - len(in)
	flat := 0
	for k, d := range in {
		j := idx[off+k]
		if d == 1 {
			j = 0
		}
		flat = flat*d + j
	}
	return flat
}

// allocCase is one kernel run whose Func must not allocate.
type allocCase struct {
	op    ir.Op
	attrs ir.Attrs
	args  []kernels.Tensor
}

// checkNoAllocs builds each case's kernel and checks that calling its Func
// allocates nothing.
func checkNoAllocs(t *testing.T, cases []allocCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.op.String(), func(t *testing.T) {
			n := node(t, tc.op, tc.attrs, typesOf(tc.args)...)
			f, err := Kernels.Build(n)
			if err != nil {
				t.Fatal(err)
			}
			out := emptyOf(n.Out)
			allocs := testing.AllocsPerRun(20, func() {
				if err := f(out, tc.args); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s allocates %v times per call", n.Op, allocs)
			}
		})
	}
}

// TestFullRun checks which flag settings make TestMain judge kernel
// coverage: `go test -list Fuzz.*` once failed here, listing every kernel
// as untested.
func TestFullRun(t *testing.T) {
	for _, tc := range []struct {
		flags map[string]string
		want  bool
	}{
		{map[string]string{}, true},
		{map[string]string{"test.run": "TestAdd"}, false},
		{map[string]string{"test.skip": "TestAdd"}, false},
		{map[string]string{"test.list": "Fuzz.*"}, false},
		{map[string]string{"test.list": "."}, false},
		{map[string]string{"test.fuzz": "FuzzConv"}, false},
		{map[string]string{"test.bench": "."}, true},
	} {
		if got := fullRun(func(name string) string { return tc.flags[name] }); got != tc.want {
			t.Errorf("fullRun(%v) = %v, want %v", tc.flags, got, tc.want)
		}
	}
}
