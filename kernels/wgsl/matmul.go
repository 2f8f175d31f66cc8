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
	ta, tb         bool // a is stored [K,M], b [N,K] (transpose_a, transpose_b)
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

// mmConfig is a matmul tiling: a workgroup of 16×16 threads computes a
// tile×tile block of the product, each thread a t×t block (t/4 vec4
// accumulators per row), stepping through k in slices of kt staged in
// workgroup memory (transposed, so that a thread reads its t rows of A and
// t columns of B as vec4s). Each product element is one fma chain over k
// in increasing order, so the result does not depend on the tiling.
type mmConfig struct {
	tile, kt, t int
}

var (
	// mmSmall: 64×64 tiles, 4×4 per thread, k slices of 16 (8 KiB of
	// workgroup memory); enough workgroups for small products.
	mmSmall = mmConfig{tile: 64, kt: 16, t: 4}
	// mmLarge: 128×128 tiles, 8×8 per thread, k slices of 8 (8 KiB): four
	// times the arithmetic per workgroup-memory read of mmSmall.
	mmLarge = mmConfig{tile: 128, kt: 8, t: 8}
)

// mmLargeMin is the smallest M and N that take mmLarge: below, 128×128
// tiles would leave a device's cores idle and waste work on padding.
const mmLargeMin = 512

// matmulConfig returns the tiling of a product.
func matmulConfig(s matmulShape) mmConfig {
	if s.m >= mmLargeMin && s.n >= mmLargeMin {
		return mmLarge
	}
	return mmSmall
}

// matmulSource returns the shader of a (fused) matmul: bindings a, b, the
// epilogue's extra inputs, out.
func matmulSource(n *kernels.Node, s matmulShape, epilogue ir.EwProgram, cfg mmConfig) (string, []Operand, error) {
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
	// The element (m0+r, k0+kk) of A and (k0+kb, n0+c) of B, read from
	// operands stored transposed where transpose_a and transpose_b say so.
	aIndex, bIndex := "(m0 + r) * K + k0 + kk", "(k0 + kb) * N + n0 + c"
	if s.ta {
		aIndex = "(k0 + kk) * M + m0 + r"
	}
	if s.tb {
		bIndex = "(n0 + c) * K + k0 + kb"
	}
	t, h := cfg.t, cfg.t/4
	var acc, fmas, stores strings.Builder
	for i := range t {
		for j := range h {
			fmt.Fprintf(&acc, "  var c%d_%d = vec4<f32>(0.0);\n", i, j)
		}
	}
	for j := range h {
		fmt.Fprintf(&fmas, "      let a%d = As[kk * TILE4 + ra4 + %du];\n      let b%d = Bs[kk * TILE4 + rb4 + %du];\n", j, j, j, j)
	}
	for i := range t {
		for j := range h {
			fmt.Fprintf(&fmas, "      c%d_%d = fma(vec4<f32>(a%d[%d]), b%d, c%d_%d);\n", i, j, i/4, i%4, j, i, j)
		}
	}
	for i := range t {
		fmt.Fprintf(&stores, "  if (m0 + ra + %du < M) {\n", i)
		for j := range h {
			fmt.Fprintf(&stores, "    store(m0 + ra + %du, n0 + rb + %du, c%d_%d);\n", i, 4*j, i, j)
		}
		stores.WriteString("  }\n")
	}
	fmt.Fprintf(&b, `const M = %du;
const N = %du;
const K = %du;
const TILE = %du;
const TILE4 = %du;
const KT = %du;
var<workgroup> As: array<vec4<f32>, %d>;
var<workgroup> Bs: array<vec4<f32>, %d>;
fn store(m: u32, n: u32, row: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) {
    let nn = n + j;
    if (nn >= N) { return; }
    let p = bz_g * M * N + m * N + nn;
    let v = row[j];
    %s
  }
}
var<private> bz_g: u32;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let bz = wid.z;
  bz_g = bz;
  let aoff = %s;
  let boff = %s;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let tid = lid.y * 16u + lid.x;
  let ra = lid.y * %du;
  let rb = lid.x * %du;
  let ra4 = ra / 4u;
  let rb4 = rb / 4u;
%s  for (var k0 = 0u; k0 < K; k0 += KT) {
    for (var l = 0u; l < %du; l++) {
      let e = tid + l * 256u;
      let r = e / KT;
      let kk = e %% KT;
      var av = 0.0;
      if (m0 + r < M && k0 + kk < K) { av = a[aoff + %s]; }
      As[kk * TILE4 + r / 4u][r %% 4u] = av;
      let kb = e / TILE;
      let c = e %% TILE;
      var bv = 0.0;
      if (k0 + kb < K && n0 + c < N) { bv = b[boff + %s]; }
      Bs[kb * TILE4 + c / 4u][c %% 4u] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < KT; kk++) {
%s    }
    workgroupBarrier();
  }
%s}
`, s.m, s.n, s.k, cfg.tile, cfg.tile/4, cfg.kt, cfg.tile*cfg.kt/4, cfg.tile*cfg.kt/4, store,
		offsetExpr("bz", s.batch, s.aBatch), offsetExpr("bz", s.batch, s.bBatch), t, t,
		acc.String(), cfg.tile*cfg.kt/256, aIndex, bIndex, fmas.String(), stores.String())
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
	a, b, err := ir.MatmulOperands(n.Args[0].Shape, n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	s, err := newMatmulShape(a, b)
	if err != nil {
		return nil, err
	}
	s.ta, s.tb = ir.MatmulTransposes(n.Attrs)
	nb := s.batch.NumElements()
	if nb > MaxGroups {
		return nil, fmt.Errorf("a batch of %d products: at most %d", nb, MaxGroups)
	}
	cfg := matmulConfig(s)
	src, bind, err := matmulSource(n, s, epilogue, cfg)
	if err != nil {
		return nil, err
	}
	if s.m == 0 || s.n == 0 || nb == 0 {
		return &Kernel{}, nil
	}
	groups := [3]uint32{uint32((s.n + cfg.tile - 1) / cfg.tile), uint32((s.m + cfg.tile - 1) / cfg.tile), uint32(nb)}
	if groups[0] > MaxGroups || groups[1] > MaxGroups {
		return nil, fmt.Errorf("a %d×%d product needs more than %d workgroups along a dimension", s.m, s.n, MaxGroups)
	}
	return &Kernel{Dispatches: []Dispatch{{Source: src, Groups: groups, Bind: bind}}}, nil
}

func init() {
	register(ir.OpMatmul, ir.F32, buildMatmul)
	register(ir.OpFusedMatmul, ir.F32, buildMatmul)
}
