package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// gemmFunc computes c = op(a)·op(b) for row-major a (m×k, or k×m when tA,
// with row stride lda), b (k×n, or n×k when tB, ldb) and c (m×n, ldc),
// overwriting c; op(x) is xᵀ when tX.
type gemmFunc[T float] func(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int)

var (
	sgemm = func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		if !gemmFinite(false, false, m, n, k, a, lda, b, ldb) {
			gemmPlain(false, false, m, n, k, a, lda, b, ldb, 0, c, ldc)
			return
		}
		blas32.Implementation().Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
	dgemm = func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
		if !gemmFinite(false, false, m, n, k, a, lda, b, ldb) {
			gemmPlain(false, false, m, n, k, a, lda, b, ldb, 0, c, ldc)
			return
		}
		blas64.Implementation().Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
)

// gemmFinite reports whether every element of the operands of c =
// op(a)·op(b) is finite. gonum's gemm skips the products of a zero element
// (it adds nothing for it), which drops a NaN or ±Inf of the other operand
// where IEEE and PyTorch give NaN (0*NaN, 0*Inf); gonum runs only when
// this holds, and gemmPlain otherwise. The scan costs O(mk + kn) against
// the product's O(mnk).
func gemmFinite[T float](tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int) bool {
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	return matFinite(a, ar, ac, lda) && matFinite(b, br, bc, ldb)
}

// matFinite reports whether the r×c matrix x (row stride ld) holds no NaN
// or ±Inf.
func matFinite[T float](x []T, r, c, ld int) bool {
	for i := range r {
		for _, v := range x[i*ld : i*ld+c] {
			if v-v != 0 { // NaN for NaN and ±Inf
				return false
			}
		}
	}
	return true
}

// gemmPlain computes c = op(a)·op(b) + beta·c (beta 0 overwrites c) with
// every product taken, zeros included, each element summed in increasing
// index of the inner dimension: the gemm for operands that hold NaN or
// ±Inf where gonum's would skip.
func gemmPlain[T float](tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	for i := range m {
		crow := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(crow)
		case 1:
		default:
			for j := range crow {
				crow[j] *= beta
			}
		}
		for l := range k {
			var av T
			if tA {
				av = a[l*lda+i]
			} else {
				av = a[i*lda+l]
			}
			for j := range crow {
				var bv T
				if tB {
					bv = b[j*ldb+l]
				} else {
					bv = b[l*ldb+j]
				}
				crow[j] += av * bv
			}
		}
	}
}

// gemmOf returns the gemm for T for products of at most m×k by k×n: the
// blocked gemm with the AVX2+FMA micro-kernels (gemm.go) when the CPU has
// them, with its packing buffers allocated here, and gonum's BLAS otherwise
// (purego builds, other architectures, CPUs without AVX2 or FMA).
func gemmOf[T float](m, n, k int) gemmFunc[T] {
	if gemmAsm {
		w := newGemmWork[T](m, n, k)
		return func(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
			w.gemm(tA, tB, m, n, k, a, lda, b, ldb, 0, c, ldc)
		}
	}
	return gonumGemmOf[T]()
}

// gonumGemmOf returns gonum's BLAS gemm for T. A transposed operand is
// first copied, transposed, into a buffer the returned func keeps (so one
// func must not run on two goroutines at once), and gonum multiplies
// untransposed operands: its kernels for transposed operands add in
// another order, and a product read transposed must give the bits of the
// same product of a transpose op's result.
func gonumGemmOf[T float]() gemmFunc[T] {
	var z T
	var plain func(m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int)
	if _, ok := any(z).(float32); ok {
		plain = any(sgemm).(func(m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int))
	} else {
		plain = any(dgemm).(func(m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int))
	}
	var at, bt []T
	return func(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
		if tA {
			at = transposeInto(at, a, lda, k, m)
			a, lda = at, k
		}
		if tB {
			bt = transposeInto(bt, b, ldb, n, k)
			b, ldb = bt, n
		}
		plain(m, n, k, a, lda, b, ldb, c, ldc)
	}
}

// transposeInto writes the transpose of the r×c matrix x (row stride ld)
// into dst, grown to r·c elements if needed, as a c×r matrix, and returns
// it.
func transposeInto[T float](dst, x []T, ld, r, c int) []T {
	if cap(dst) < r*c {
		dst = make([]T, r*c)
	}
	dst = dst[:r*c]
	for i := range r {
		for j, v := range x[i*ld : i*ld+c] {
			dst[j*r+i] = v
		}
	}
	return dst
}

// buildMatmul builds matmul with NumPy semantics: a 1-D a is a row vector
// [1,k] and a 1-D b a column vector [k,1] (the promoted axis is absent from
// the result); the batch dims before the last two broadcast. The result's
// batch elements are contiguous m×n matrices, so the Func makes one gemm
// call per batch element with operand offsets precomputed here. An operand
// read transposed (transpose_a, transpose_b) is packed by the gemm as it
// is, never copied; each element of the result is added in the same order
// as for the transposed copy, so the bits are the same.
//
// gonum's gemm splits large products (more than a few 64×64 blocks of
// output) across goroutines, which allocates inside gonum; each output
// block is still summed in one fixed order, so results are deterministic.
func buildMatmul[T float](n *kernels.Node) (kernels.Func, error) {
	mp, err := newMatmulPlan[T](n.Args[0].Shape, n.Args[1].Shape, n.Attrs, n.Par)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		mp.run(kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), nil)
		return nil
	}, nil
}

// matmulSplitMACs is the size (multiply-adds) from which a matmul splits
// across the executor's workers: below it, handing parts to other
// goroutines costs more than it saves.
var matmulSplitMACs = 1 << 19 // a variable for the tests

// matmulPlan is buildMatmul's plan for given operand shapes: the product's
// sizes, the offsets of each batch element's operands, and the gemm; and,
// when the product is split across workers, the parts.
type matmulPlan[T float] struct {
	m, n, k    int
	tA, tB     bool // the operands are read transposed
	lda, ldb   int  // their row strides
	aOff, bOff []int
	gemm       gemmFunc[T]

	// A split product: part p computes the rows [bounds[p], bounds[p+1])
	// of the result's batch elements stacked (batch element i's row r is
	// row i*m + r), or with cols the columns [bounds[p], bounds[p+1]) of
	// every batch element, each with its own gemmWork. The bounds depend
	// on the number of parts, but every element's arithmetic does not
	// (gemm.go), so the result is the same for any split. Each part packs
	// the whole of the operand the split does not cut (B when cutting
	// rows, A when cutting columns), so a single product with fewer rows
	// than columns (a layer's forward over a batch) is cut by columns.
	par     kernels.Parallel
	cols    bool
	bounds  []int
	works   []*gemmWork[T]
	body    func(part int) // mp.part, made once
	c, a, b []T            // the operands of the call in progress
	after   func(part, lo, hi int)
}

// newMatmulPlan plans matmul(a, b) {attrs} for a of shape as and b of
// shape bs, split across par's workers when the product is large enough.
func newMatmulPlan[T float](as, bs ir.Shape, attrs ir.Attrs, par kernels.Parallel) (*matmulPlan[T], error) {
	as, bs, err := ir.MatmulOperands(as, bs, attrs)
	if err != nil {
		return nil, err
	}
	tA, tB := ir.MatmulTransposes(attrs)
	a2, b2 := as, bs
	if len(as) == 1 {
		a2 = ir.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		b2 = ir.Shape{bs[0], 1}
	}
	m, k := a2[len(a2)-2], a2[len(a2)-1]
	nn := b2[len(b2)-1]
	aBatch, bBatch := a2[:len(a2)-2], b2[:len(b2)-2]
	batch, _ := ir.BroadcastShapes(aBatch, bBatch) // checked by inference
	aOff := offsets(batch, broadcastStrides(aBatch, batch))
	bOff := offsets(batch, broadcastStrides(bBatch, batch))
	for i := range aOff {
		aOff[i] *= m * k
		bOff[i] *= k * nn
	}
	mp := &matmulPlan[T]{m: m, n: nn, k: k, tA: tA, tB: tB, lda: k, ldb: nn, aOff: aOff, bOff: bOff}
	if tA {
		mp.lda = m
	}
	if tB {
		mp.ldb = k
	}
	rows := len(aOff) * m
	if w := kernels.Workers(par); gemmAsm && w > 1 && k > 0 && nn > 0 && rows*nn*k >= matmulSplitMACs {
		_, mr, nr := gemmMicro[T]()
		if parts := min(w, (nn+nr-1)/nr); len(aOff) == 1 && m < nn && parts > 1 {
			mp.par, mp.cols = par, true
			mp.bounds = parBounds(nn, parts, nr)
			for p := range parts {
				mp.works = append(mp.works, newGemmWork[T](m, mp.bounds[p+1]-mp.bounds[p], k))
			}
			mp.body = mp.part
			return mp, nil
		}
		parts := min(w, (rows+mr-1)/mr)
		if parts > 1 {
			mp.par = par
			mp.bounds = parBounds(rows, parts, mr)
			for p := range parts {
				mp.works = append(mp.works, newGemmWork[T](min(m, mp.bounds[p+1]-mp.bounds[p]), nn, k))
			}
			mp.body = mp.part
			return mp, nil
		}
	}
	mp.gemm = gemmOf[T](m, nn, k)
	return mp, nil
}

// parts returns how many parts each call runs: 1 unless split.
func (mp *matmulPlan[T]) parts() int { return max(len(mp.works), 1) }

// run computes the product of a and b into c with one gemm per batch
// element, or with its parts on the workers when split. after, when not
// nil, is called with the part and the range of c each gemm (or, for k = 0,
// the clearing of c) has just written; the parts call it side by side.
func (mp *matmulPlan[T]) run(c, a, b []T, after func(part, lo, hi int)) {
	m, nn, k := mp.m, mp.n, mp.k
	mk, kn, mn := m*k, k*nn, m*nn
	if mn == 0 || len(mp.aOff) == 0 {
		return
	}
	if k == 0 {
		clear(c) // an empty sum; BLAS rejects k = 0 with these strides
		if after != nil {
			after(0, 0, len(c))
		}
		return
	}
	if mp.works != nil {
		mp.c, mp.a, mp.b, mp.after = c, a, b, after
		mp.par.Run(len(mp.works), mp.body)
		mp.c, mp.a, mp.b, mp.after = nil, nil, nil, nil
		return
	}
	for i, ao := range mp.aOff {
		bo := mp.bOff[i]
		mp.gemm(mp.tA, mp.tB, m, nn, k, a[ao:ao+mk], mp.lda, b[bo:bo+kn], mp.ldb, c[i*mn:(i+1)*mn], nn)
		if after != nil {
			after(0, i*mn, (i+1)*mn)
		}
	}
}

// part computes part p of a split product: its rows, batch element by
// batch element, or its columns of every batch element.
func (mp *matmulPlan[T]) part(p int) {
	m, nn, k := mp.m, mp.n, mp.k
	mk, kn, mn := m*k, k*nn, m*nn
	w := mp.works[p]
	if mp.cols {
		j0, j1 := mp.bounds[p], mp.bounds[p+1]
		bj := j0 // the first column of op(b) in b
		if mp.tB {
			bj = j0 * mp.ldb
		}
		for i, ao := range mp.aOff {
			bo, co := mp.bOff[i]+bj, i*mn+j0
			w.gemm(mp.tA, mp.tB, m, j1-j0, k, mp.a[ao:ao+mk], mp.lda, mp.b[bo:mp.bOff[i]+kn], mp.ldb, 0, mp.c[co:(i+1)*mn], nn)
			if mp.after != nil {
				for r := range m {
					mp.after(p, co+r*nn, co+r*nn+j1-j0)
				}
			}
		}
		return
	}
	for lo, hi := mp.bounds[p], mp.bounds[p+1]; lo < hi; {
		i, r0 := lo/m, lo%m
		r1 := min(m, r0+hi-lo)
		ao, bo := mp.aOff[i], mp.bOff[i]
		w.gemmRange(r0, r1, mp.tA, mp.tB, m, nn, k, mp.a[ao:ao+mk], mp.lda, mp.b[bo:bo+kn], mp.ldb, 0, mp.c[i*mn:(i+1)*mn], nn)
		if mp.after != nil {
			mp.after(p, i*mn+r0*nn, i*mn+r1*nn)
		}
		lo += r1 - r0
	}
}
