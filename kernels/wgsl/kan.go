package wgsl

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kolmogorov-Arnold and logic-gate layers: bspline and logic_gate. Their
// gradients are composite (ir/ops_kan.go): bspline's is a bspline of the
// next derivative, logic_gate's sums, products and a softmax gradient.

// bsplineMaxOrder bounds the degree of a bspline on the GPU: each thread
// keeps order+1 values in private memory.
const bsplineMaxOrder = 32

// buildBspline builds bspline {grid_min, grid_max, grid_size, order,
// derivative}: one thread per basis of one element. Basis j of degree
// order depends on the degree-0 indicators j .. j+order only, so the
// thread runs efficient-kan's Cox–de Boor sweep (the CPU's kanBsplineFull,
// the same operations in the same order) on that triangle: the recursion
// up to degree order - derivative, then the derivative formula for the
// remaining degrees. The knots are the CPU's (kanKnots: each operation
// rounded to f32), uploaded as a table; a non-finite x has NaN
// derivatives.
func buildBspline(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	g, err := ir.BsplineGridOf(n.Attrs)
	if err != nil {
		return nil, err
	}
	if g.Order > bsplineMaxOrder {
		return nil, fmt.Errorf("order %d: the GPU computes B-splines of order at most %d", g.Order, bsplineMaxOrder)
	}
	knots := make([]byte, 4*(g.Intervals()+1))
	h, lo := float32(g.H), float32(g.Min)
	for j := 0; j <= g.Intervals(); j++ {
		binary.LittleEndian.PutUint32(knots[4*j:], math.Float32bits(float32(float32(j-g.Order)*h)+lo))
	}
	var d strings.Builder
	d.WriteString(Decl(0, "x", ir.F32))
	d.WriteString(Decl(1, "out", ir.F32))
	d.WriteString(Decl(2, "t", ir.F32))
	d.WriteString(iconsts("ORDER", g.Order, "Q", g.Order-g.Deriv, "NB", g.Bases()))
	body := fmt.Sprintf(`  let j = p %% NB;
  let v = x[p / NB];
  var b: array<f32, %d>;
  for (var k = 0; k <= ORDER; k++) { b[k] = select(0.0, 1.0, v >= t[j + k] && v < t[j + k + 1]); }
  for (var deg = 1; deg <= Q; deg++) {
    for (var k = 0; k <= ORDER - deg; k++) {
      let i = j + k;
      let left = (v - t[i]) / (t[i + deg] - t[i]);
      let right = (t[i + deg + 1] - v) / (t[i + deg + 1] - t[i + 1]);
      b[k] = left * b[k] + right * b[k + 1];
    }
  }
`, g.Order+1)
	if g.Deriv > 0 {
		body += `  if ((bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u) { out[p] = bitcast<f32>(0x7fc00000u); return; }
  for (var deg = Q + 1; deg <= ORDER; deg++) {
    for (var k = 0; k <= ORDER - deg; k++) {
      let i = j + k;
      b[k] = f32(deg) * (b[k] / (t[i + deg] - t[i]) - b[k + 1] / (t[i + deg + 1] - t[i + 1]));
    }
  }
`
	}
	body += "  out[p] = b[0];\n"
	k := perElement(d.String(), body, n.Out.Shape.NumElements(), []Operand{{Arg, 0}, {Out, 0}, {Data, 0}})
	if len(k.Dispatches) > 0 {
		k.Data = [][]byte{knots}
	}
	return k, nil
}

// buildLogicGate builds logic_gate(a, b, logits [G,16]) in two dispatches:
// one thread per gate computes [A,B,C,D] = softmax(logits[g]) @ coeff (the
// products with the table's small integers added in index order) into a
// scratch table, then one thread per output element computes
// ((A + B·a) + C·b) + D·(a·b) with a and b broadcast.
func buildLogicGate(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	shape := n.Out.Shape
	gates := shape[len(shape)-1]
	count := shape.NumElements()
	if count == 0 {
		return &Kernel{}, nil
	}
	var c strings.Builder
	c.WriteString(Decl(0, "lg", ir.F32))
	c.WriteString(Decl(1, "coef", ir.F32))
	c.WriteString(helperSource(map[string]bool{"k_maxnan": true}))
	groups, idx := Grid(gates)
	c.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&c, "  let g = %s;\n  if (g >= %du) { return; }\n", idx, gates)
	c.WriteString(`  var e: array<f32, 16>;
  var m = lg[16u * g];
  for (var i = 1u; i < 16u; i++) { m = k_maxnan(m, lg[16u * g + i]); }
  var s = 0.0;
  for (var i = 0u; i < 16u; i++) { e[i] = exp(lg[16u * g + i] - m); s = s + e[i]; }
  for (var i = 0u; i < 16u; i++) { e[i] = e[i] / s; }
`)
	table := ir.LogicGateCoefficients()
	for k := 0; k < 4; k++ {
		terms := []string{"0.0"}
		for i, row := range table {
			switch row[k] {
			case 0:
			case 1:
				terms = append(terms, fmt.Sprintf("e[%d]", i))
			default:
				terms = append(terms, fmt.Sprintf("e[%d] * %s", i, F32(row[k])))
			}
		}
		fmt.Fprintf(&c, "  coef[4u * g + %du] = %s;\n", k, strings.Join(terms, " + "))
	}
	c.WriteString("}\n")
	k := &Kernel{Scratch: []int64{int64(16 * gates)}}
	k.Dispatches = append(k.Dispatches, Dispatch{Source: c.String(), Groups: groups, Bind: []Operand{{Arg, 2}, {Scratch, 0}}})

	var o strings.Builder
	o.WriteString(Decl(0, "a", ir.F32))
	o.WriteString(Decl(1, "b", ir.F32))
	o.WriteString(Decl(2, "coef", ir.F32))
	o.WriteString(Decl(3, "out", ir.F32))
	groups, idx = Grid(count)
	o.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&o, "  let p = %s;\n  if (p >= %du) { return; }\n  let g = p %% %du;\n", idx, count, gates)
	fmt.Fprintf(&o, "  let av = a[%s];\n  let bv = b[%s];\n",
		offsetExpr("p", shape, broadcastStrides(n.Args[0].Shape, shape)), offsetExpr("p", shape, broadcastStrides(n.Args[1].Shape, shape)))
	o.WriteString("  out[p] = ((coef[4u * g] + coef[4u * g + 1u] * av) + coef[4u * g + 2u] * bv) + coef[4u * g + 3u] * (av * bv);\n}\n")
	k.Dispatches = append(k.Dispatches, Dispatch{Source: o.String(), Groups: groups, Bind: []Operand{{Arg, 0}, {Arg, 1}, {Scratch, 0}, {Out, 0}}})
	return k, nil
}

func init() {
	register(ir.OpBspline, ir.F32, buildBspline)
	register(ir.OpLogicGate, ir.F32, buildLogicGate)
}
