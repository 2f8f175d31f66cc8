package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildPrelu builds prelu(x, weight): x where x > 0, else weight[c]·x, c
// the index along axis 1 (rank >= 2 and a weight of C elements) or the
// one weight; one thread per element, the product in f32 as the CPU takes
// it.
func buildPrelu(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	xs := n.Args[0].Shape
	count := xs.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	c, inner := 1, 1
	if n.Args[1].Shape.NumElements() != 1 {
		c = ir.PReLUChannels(xs)
		inner = xs[2:].NumElements()
	}
	var b strings.Builder
	b.WriteString(Decl(0, "x", ir.F32))
	b.WriteString(Decl(1, "w", ir.F32))
	b.WriteString(Decl(2, "out", ir.F32))
	groups, idx := Grid(count)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, "  let p = %s;\n  if (p >= %du) { return; }\n  let v = x[p];\n", idx, count)
	fmt.Fprintf(&b, "  out[p] = select(w[(p / %du) %% %du] * v, v, v > 0.0);\n}\n", inner, c)
	return &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Out, 0}}}}}, nil
}

func init() {
	register(ir.OpPrelu, ir.F32, buildPrelu)
}
