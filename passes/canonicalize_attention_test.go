package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestCanonicalizeAttention runs Canonicalize on the forms of attention
// the builder and the ONNX importer write and on near misses, checking
// whether an attention op appears, with which attributes and arguments.
func TestCanonicalizeAttention(t *testing.T) {
	const head = `graph a
input %q: f32[2,3,5,4]
input %k: f32[2,3,5,4]
input %v: f32[2,3,5,6]
input %m: f32[2,1,1,5]
input %c: bool[1,1,5,5]
param %w: f32[2,1,1,5]
%c8 = const {dtype="f32", value=8.0}
%half = const {dtype="f32", value=0.5}
%ninf = const {dtype="f32", value=-inf}
%kt = transpose %k {perm=[0,1,3,2]}
`
	causal := `%tri = const {dtype="f32", shape=[5,5], value=[0,-inf,-inf,-inf,-inf, 0,0,-inf,-inf,-inf, 0,0,0,-inf,-inf, 0,0,0,0,-inf, 0,0,0,0,0]}
`
	for _, c := range []struct {
		name, body string
		want       string // the attention line's op, attributes and argument names; "" for none
	}{
		{"builder form", `%s = matmul %q, %kt
%x = mul %s, %half
%p = softmax %x {axis=-1}
%y = matmul %p, %v
output %y`, "attention %q, %k, %v {causal=false, scale=0.5}"},
		{"transpose_b, div, mask added first", `%s = matmul %q, %k {transpose_b=true}
%x = div %s, %c8
%xm = add %m, %x
%p = softmax %xm {axis=3}
%y = matmul %p, %v
output %y`, "attention %q, %k, %v, %m {causal=false, scale=0.125}"},
		{"causal const and padding", causal + `%s = matmul %q, %kt
%x = mul %half, %s
%x1 = add %x, %tri
%x2 = add %x1, %m
%p = softmax %x2
%y = matmul %p, %v
output %y`, "attention %q, %k, %v, %m {causal=true, scale=0.5}"},
		{"masked_fill", `%s = matmul %q, %kt
%x = where %c, %ninf, %s
%p = softmax %x
%y = matmul %p, %v
output %y`, "attention %q, %k, %v, %"},
		{"probabilities also an output", `%s = matmul %q, %kt
%p = softmax %s
%y = matmul %p, %v
output %y, %p`, ""},
		{"scores used twice", `%s = matmul %q, %kt
%p = softmax %s
%y = matmul %p, %v
%z = sum %s
output %y, %z`, ""},
		{"mask from a param", `%s = matmul %q, %kt
%x = add %s, %w
%p = softmax %x
%y = matmul %p, %v
output %y`, ""},
		{"softmax over another axis", `%s = matmul %q, %kt
%p = softmax %s {axis=2}
%y = matmul %p, %v
output %y`, ""},
		{"scale below the mask", `%s = matmul %q, %kt
%x = add %s, %m
%x2 = mul %x, %half
%p = softmax %x2
%y = matmul %p, %v
output %y`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := ir.Parse("a.kir", []byte(head+c.body+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if err := passes.Canonicalize(g); err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("%v\n%s", err, g.Format())
			}
			got := ""
			for _, line := range strings.Split(g.Format(), "\n") {
				if i := strings.Index(line, "= attention "); i >= 0 {
					got = line[i+2:]
				}
			}
			if c.want == "" && got != "" || c.want != "" && !strings.HasPrefix(got, c.want) {
				t.Errorf("got %q, want %q:\n%s", got, c.want, g.Format())
			}
			if c.want != "" && strings.Contains(g.Format(), "softmax") {
				t.Errorf("softmax left after fusion:\n%s", g.Format())
			}
		})
	}
}
