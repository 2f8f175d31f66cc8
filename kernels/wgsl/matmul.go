package wgsl

import (
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// matmulShape is a matmul with NumPy semantics reduced to a batch of
// [M,K]·[K,N] products: batch is the broadcast batch shape, and each
// operand's batch strides (in elements, 0 where broadcast).
type matmulShape struct {
	m, k, n        int
	batch          ir.Shape
	aBatch, bBatch []int
}

func newMatmulShape(a, b ir.Shape) (matmulShape, error) {
	as, bs := append(ir.Shape(nil), a...), append(ir.Shape(nil), b...)
	if len(as) == 1 {
		as = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		bs = ir.Shape{bs[0], 1}
	}
	var s matmulShape
	s.m, s.k, s.n = as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	ab, bb := as[:len(as)-2], bs[:len(bs)-2]
	batch, ok := ir.BroadcastShapes(ab, bb)
	if !ok {
		return s, fmt.Errorf("batch shapes %v and %v do not broadcast", ab, bb)
	}
	s.batch = batch
	s.aBatch = broadcastStrides(ab, batch)
	s.bBatch = broadcastStrides(bb, batch)
	for i := range s.aBatch {
		s.aBatch[i] *= s.m * s.k
		s.bBatch[i] *= s.k * s.n
	}
	return s, nil
}

// Matmul tiling: a workgroup of 16×16 threads computes a 64×64 tile of
// the product, each thread a 4×4 block, stepping through k in slices of 16
// staged in workgroup memory. Each product element is one fma chain over
// k in increasing order, so the result does not depend on the tiling.
const (
	mmTile  = 64
	mmKTile = 16
	mmT     = 4
)

// matmulSource returns the shader of a (fused) matmul: bindings a, b, the
// epilogue's extra inputs, out.
func matmulSource(n *kernels.Node, s matmulShape, epilogue ir.EwProgram) (string, []Operand, error) {
	var b strings.Builder
	b.WriteString(Decl(0, "a", ir.F32))
	b.WriteString(Decl(1, "b", ir.F32))
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	ins := []ewInput{{"", n.Out}} // i0: the product, passed as x0
	for i := 2; i < len(n.Args); i++ {
		name := fmt.Sprintf("e%d", i-1)
		b.WriteString(Decl(i, name, n.Args[i].DType))
		bind = append(bind, Operand{Arg, i})
		ins = append(ins, ewInput{name, n.Args[i]})
	}
	b.WriteString(Decl(len(bind), "out", ir.F32))
	bind = append(bind, Operand{Out, 0})
	store := "out[p] = v;"
	if epilogue != nil {
		f, helpers, err := program("epilogue", n.Out.Shape, ins, epilogue, true)
		if err != nil {
			return "", nil, err
		}
		b.WriteString(helperSource(helpers))
		b.WriteString(f)
		store = "out[p] = epilogue(p, v);"
	}
	fmt.Fprintf(&b, `const M = %du;
const N = %du;
const K = %du;
const TILE = %du;
const KT = %du;
var<workgroup> As: array<f32, %d>;
var<workgroup> Bs: array<f32, %d>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let bz = wid.z;
  let aoff = %s;
  let boff = %s;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let tid = lid.y * 16u + lid.x;
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  let ra = lid.y * 4u;
  let rb = lid.x * 4u;
  for (var k0 = 0u; k0 < K; k0 += KT) {
    for (var l = 0u; l < 4u; l++) {
      let e = tid + l * 256u;
      let r = e / KT;
      let kk = e %% KT;
      var av = 0.0;
      if (m0 + r < M && k0 + kk < K) { av = a[aoff + (m0 + r) * K + k0 + kk]; }
      As[kk * TILE + r] = av;
      let kb = e / TILE;
      let c = e %% TILE;
      var bv = 0.0;
      if (k0 + kb < K && n0 + c < N) { bv = b[boff + (k0 + kb) * N + n0 + c]; }
      Bs[kb * TILE + c] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < KT; kk++) {
      let br = vec4<f32>(Bs[kk * TILE + rb], Bs[kk * TILE + rb + 1u], Bs[kk * TILE + rb + 2u], Bs[kk * TILE + rb + 3u]);
      c0 = fma(vec4<f32>(As[kk * TILE + ra]), br, c0);
      c1 = fma(vec4<f32>(As[kk * TILE + ra + 1u]), br, c1);
      c2 = fma(vec4<f32>(As[kk * TILE + ra + 2u]), br, c2);
      c3 = fma(vec4<f32>(As[kk * TILE + ra + 3u]), br, c3);
    }
    workgroupBarrier();
  }
  var rows = array<vec4<f32>, 4>(c0, c1, c2, c3);
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + ra + i;
    if (m >= M) { break; }
    let row = rows[i];
    for (var j = 0u; j < 4u; j++) {
      let nn = n0 + rb + j;
      if (nn >= N) { break; }
      let p = bz * M * N + m * N + nn;
      let v = row[j];
      %s
    }
  }
}
`, s.m, s.n, s.k, mmTile, mmKTile, mmTile*mmKTile, mmTile*mmKTile,
		offsetExpr("bz", s.batch, s.aBatch), offsetExpr("bz", s.batch, s.bBatch), store)
	return b.String(), bind, nil
}

func buildMatmul(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	var epilogue ir.EwProgram
	if n.Op == ir.OpFusedMatmul {
		p, err := ir.EwProgramOf(n.Attrs)
		if err != nil {
			return nil, err
		}
		if len(n.Args)+1 > 8 {
			return nil, fmt.Errorf("%d arguments: more storage buffers than a shader stage may bind by default (8)", len(n.Args))
		}
		epilogue = p
	}
	s, err := newMatmulShape(n.Args[0].Shape, n.Args[1].Shape)
	if err != nil {
		return nil, err
	}
	nb := s.batch.NumElements()
	if nb > MaxGroups {
		return nil, fmt.Errorf("a batch of %d products: at most %d", nb, MaxGroups)
	}
	src, bind, err := matmulSource(n, s, epilogue)
	if err != nil {
		return nil, err
	}
	if s.m == 0 || s.n == 0 || nb == 0 {
		return &Kernel{}, nil
	}
	groups := [3]uint32{uint32((s.n + mmTile - 1) / mmTile), uint32((s.m + mmTile - 1) / mmTile), uint32(nb)}
	if groups[0] > MaxGroups || groups[1] > MaxGroups {
		return nil, fmt.Errorf("a %d×%d product needs more than %d workgroups along a dimension", s.m, s.n, MaxGroups)
	}
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: bind}}}, nil
}

func init() {
	register(ir.OpMatmul, ir.F32, buildMatmul)
	register(ir.OpFusedMatmul, ir.F32, buildMatmul)
}
