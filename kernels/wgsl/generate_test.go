package wgsl

import (
	"fmt"
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/kernels/wgsl/wgsltest"
)

// caseNodes returns the kernel node of every non-input value of every
// shared device case (wgsltest.Cases) and of nnGraph, each with the name
// of the case it comes from.
func caseNodes(t *testing.T) ([]*kernels.Node, []string) {
	t.Helper()
	var ns []*kernels.Node
	var from []string
	for _, c := range wgsltest.Cases() {
		for _, n := range nnNodes(t, "graph k\n"+c.Src) {
			ns, from = append(ns, n), append(from, c.Name)
		}
	}
	for _, n := range nnNodes(t, nnGraph) {
		ns, from = append(ns, n), append(from, "nnGraph")
	}
	return ns, from
}

// checkKernel checks what the device tests cannot see in k, n's kernel:
// at least one dispatch unless the result is empty, each with an entry
// point, balanced delimiters, at most 8 bindings (WebGPU's default per
// stage), every binding declared once in order, only operands the node
// and the kernel have, and the step count bound by dropout alone.
func checkKernel(t *testing.T, what string, n *kernels.Node, k *Kernel) {
	t.Helper()
	if len(k.Dispatches) == 0 && n.Out.Shape.NumElements() > 0 {
		t.Errorf("%s: no dispatch", what)
	}
	steps := 0
	for di, d := range k.Dispatches {
		if !strings.Contains(d.Source, "fn main(") || !strings.Contains(d.Source, "@compute @workgroup_size(") {
			t.Errorf("%s dispatch %d: no compute entry point main in\n%s", what, di, d.Source)
		}
		for _, p := range []string{"()", "{}", "[]"} {
			if o, c := strings.Count(d.Source, p[:1]), strings.Count(d.Source, p[1:]); o != c {
				t.Errorf("%s dispatch %d: %d %q but %d %q in\n%s", what, di, o, p[:1], c, p[1:], d.Source)
			}
		}
		if len(d.Bind) > 8 {
			t.Errorf("%s dispatch %d binds %d buffers", what, di, len(d.Bind))
		}
		for i, o := range d.Bind {
			if got := strings.Count(d.Source, fmt.Sprintf("@binding(%d)", i)); got != 1 {
				t.Errorf("%s dispatch %d declares binding %d %d times", what, di, i, got)
			}
			switch {
			case o.Kind == Arg && o.Index >= len(n.Args),
				o.Kind == Scratch && o.Index >= len(k.Scratch),
				o.Kind == Data && o.Index >= len(k.Data):
				t.Errorf("%s binds %v, which it does not have", what, o)
			case o.Kind == StepNo:
				steps++
			}
		}
		if strings.Contains(d.Source, fmt.Sprintf("@binding(%d)", len(d.Bind))) {
			t.Errorf("%s dispatch %d declares more bindings than its %d", what, di, len(d.Bind))
		}
		for g, c := range d.Groups {
			if c == 0 || c > MaxGroups {
				t.Errorf("%s dispatch %d: %d workgroups along dimension %d", what, di, c, g)
			}
		}
	}
	if want := map[bool]int{true: 1, false: 0}[n.Op == ir.OpDropout]; steps != want {
		t.Errorf("%s binds the step count %d times, want %d", what, steps, want)
	}
}

// TestEveryBuilderGenerates builds every node of the shared device cases
// and nnGraph, checks each kernel (checkKernel), and checks that together
// they reach every (op, dtype) registered in Kernels, so that no builder
// goes without a generation test here and a device test in exec/gpu.
func TestEveryBuilderGenerates(t *testing.T) {
	ns, from := caseNodes(t)
	seen := map[kernels.Key]bool{}
	for i, n := range ns {
		what := fmt.Sprintf("%s/%s (case %q)", n.Op, n.Out.DType, from[i])
		k, err := Build(n)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		checkKernel(t, what, n, k)
		seen[kernels.Key{Op: n.Op, DType: n.Out.DType}] = true
	}
	for _, key := range Kernels.Keys() {
		if !seen[key] {
			t.Errorf("no case builds the %s kernel for %s: add one to wgsltest.Cases (or nnGraph)", key.Op, key.DType)
		}
	}
}

// TestEwRulesCoverElementwiseOps: every elementwise op of ir's table has
// a WGSL expression in ewRules, and with it a registered kernel for its
// result dtype (bool for comparisons and logical ops, f32 otherwise).
func TestEwRulesCoverElementwiseOps(t *testing.T) {
	n := 0
	for _, op := range ir.Ops() {
		if op.Info().Class != ir.ClassElementwise {
			continue
		}
		n++
		if _, ok := ewRules[op]; !ok {
			t.Errorf("elementwise op %s has no WGSL expression in ewRules", op)
			continue
		}
		if !Kernels.Has(op, ir.F32) && !Kernels.Has(op, ir.Bool) {
			t.Errorf("elementwise op %s has a rule but no registered kernel", op)
		}
	}
	if n != len(ewRules) {
		t.Errorf("ewRules has %d ops, ir's table %d elementwise ops", len(ewRules), n)
	}
}

// TestFusedProgramMatchesOpKernel: fused_elementwise of the one-instruction
// program of each elementwise node of the cases with a float result
// generates exactly the op's own kernel (both go through program), every
// rule has such a node, and a longer program generates.
func TestFusedProgramMatchesOpKernel(t *testing.T) {
	ns, _ := caseNodes(t)
	ops := map[ir.Op]bool{}
	for _, n := range ns {
		if _, ok := ewRules[n.Op]; !ok {
			continue
		}
		ops[n.Op] = true
		if n.Out.DType != ir.F32 {
			continue // a comparison is inside a float-rooted program, never its root
		}
		own, err := Build(n)
		if err != nil {
			t.Fatalf("%s: %v", n.Op, err)
		}
		fn := &kernels.Node{Op: ir.OpFusedElementwise, Attrs: ir.MakeAttrs("program", singleOp(n).Attr()), Args: n.Args, Out: n.Out}
		fused, err := Build(fn)
		if err != nil {
			t.Fatalf("fused_elementwise of %s: %v", n.Op, err)
		}
		if len(own.Dispatches) != 1 || len(fused.Dispatches) != 1 || own.Dispatches[0].Source != fused.Dispatches[0].Source {
			t.Errorf("fused_elementwise [%s] generates another shader than %s's kernel", singleOp(n)[0].Op, n.Op)
		}
	}
	for op := range ewRules {
		if !ops[op] {
			t.Errorf("no case has a node of elementwise op %s", op)
		}
	}
	// A chain through float and bool values, broadcast operands and
	// immediates.
	n := nnNodes(t, `graph f
input %a: f32[65,3]
input %b: f32[3]
%y: f32[65,3] = fused_elementwise %a, %b {program=["t0 = mul i0, i1", "t1 = tanh t0", "t2 = add t1, 0.5", "t3 = greater t2, i1", "t4 = where t3, t2, i0", "t5 = clip t4 {min=-1.0}", "t6 = gelu t5 {approximate=\"tanh\"}"]}
output %y
`)
	for _, n := range n {
		k, err := Build(n)
		if err != nil {
			t.Fatalf("%s: %v", n.Out, err)
		}
		checkKernel(t, "fused_elementwise "+n.Out.String(), n, k)
		for _, fn := range []string{"k_tanh", "k_gelu_tanh"} {
			if !strings.Contains(k.Dispatches[0].Source, "fn "+fn) {
				t.Errorf("the program's shader lacks the helper %s:\n%s", fn, k.Dispatches[0].Source)
			}
		}
	}
}

// TestGoldenShaders compares the generated WGSL of a few kernels with
// testdata/NAME.wgsl (go test ./kernels/wgsl -update rewrites them): the
// tiled matmul with a fused epilogue, a workgroup reduction, a row-wise
// softmax and a fused elementwise chain. A change to a generator shows in
// review as a change to these files.
func TestGoldenShaders(t *testing.T) {
	for _, g := range []struct{ name, src string }{
		{"fused_matmul", "input %a: f32[31,20]\ninput %b: f32[20,67]\ninput %c: f32[67]\n%y: f32[31,67] = fused_matmul %a, %b, %c {program=[\"t0 = add i0, i1\", \"t1 = relu t0\"]}\noutput %y"},
		{"matmul_large", "input %a: f32[600,33]\ninput %b: f32[33,700]\n%y = matmul %a, %b\noutput %y"},
		{"matmul_batched", "input %a: f32[2,3,17,9]\ninput %b: f32[3,9,5]\n%y = matmul %a, %b\noutput %y"},
		{"sum_workgroup", "input %a: f32[300,7]\n%y = sum %a {axes=[0]}\noutput %y"},
		{"softmax", "input %a: f32[6,300]\n%y = softmax %a\noutput %y"},
		{"fused_elementwise", "input %a: f32[65,3]\ninput %b: f32[3]\n%y: f32[65,3] = fused_elementwise %a, %b {program=[\"t0 = mul i0, i1\", \"t1 = tanh t0\", \"t2 = add t1, 0.5\", \"t3 = greater t2, i1\", \"t4 = where t3, t2, i0\"]}\noutput %y"},
	} {
		t.Run(g.name, func(t *testing.T) {
			ns := nnNodes(t, "graph k\n"+g.src)
			k, err := Build(ns[len(ns)-1])
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, d := range k.Dispatches {
				fmt.Fprintf(&b, "// dispatch %d: workgroups %v, bindings %v\n%s", i, d.Groups, d.Bind, d.Source)
			}
			path := filepath.Join("testdata", g.name+".wgsl")
			if golden.Update() {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./kernels/wgsl -update writes it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("the shader of %s differs from %s (rerun with -update if the change is meant):\n%s", g.name, path, b.String())
			}
		})
	}
}
