package cpu

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// gemmFunc computes c = a·b for row-major a (m×k, row stride lda), b (k×n,
// ldb) and c (m×n, ldc), overwriting c.
type gemmFunc[T float] func(m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int)

var (
	sgemm gemmFunc[float32] = func(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
		blas32.Implementation().Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
	dgemm gemmFunc[float64] = func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
		blas64.Implementation().Dgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
	}
)

// gemmOf returns the gemm for T for products of at most m×k by k×n: the
// blocked gemm with the AVX2+FMA micro-kernels (gemm.go) when the CPU has
// them, with its packing buffers allocated here, and gonum's BLAS otherwise
// (purego builds, other architectures, CPUs without AVX2 or FMA).
func gemmOf[T float](m, n, k int) gemmFunc[T] {
	if gemmAsm {
		w := newGemmWork[T](m, n, k)
		return func(m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int) {
			w.gemm(false, false, m, n, k, a, lda, b, ldb, 0, c, ldc)
		}
	}
	return gonumGemmOf[T]()
}

// gonumGemmOf returns gonum's BLAS gemm for T.
func gonumGemmOf[T float]() gemmFunc[T] {
	var z T
	if _, ok := any(z).(float32); ok {
		return any(sgemm).(gemmFunc[T])
	}
	return any(dgemm).(gemmFunc[T])
}

// buildMatmul builds matmul with NumPy semantics: a 1-D a is a row vector
// [1,k] and a 1-D b a column vector [k,1] (the promoted axis is absent from
// the result); the batch dims before the last two broadcast. The result's
// batch elements are contiguous m×n matrices, so the Func makes one BLAS
// gemm call per batch element with operand offsets precomputed here.
//
// gonum's gemm splits large products (more than a few 64×64 blocks of
// output) across goroutines, which allocates inside gonum; each output
// block is still summed in one fixed order, so results are deterministic.
func buildMatmul[T float](n *kernels.Node) (kernels.Func, error) {
	mp := newMatmulPlan[T](n.Args[0].Shape, n.Args[1].Shape)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		mp.run(kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), nil)
		return nil
	}, nil
}

// matmulPlan is buildMatmul's plan for given operand shapes: the product's
// sizes, the offsets of each batch element's operands, and the gemm.
type matmulPlan[T float] struct {
	m, n, k    int
	aOff, bOff []int
	gemm       gemmFunc[T]
}

// newMatmulPlan plans matmul(a, b) for a of shape as and b of shape bs.
func newMatmulPlan[T float](as, bs ir.Shape) *matmulPlan[T] {
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
	return &matmulPlan[T]{m: m, n: nn, k: k, aOff: aOff, bOff: bOff, gemm: gemmOf[T](m, nn, k)}
}

// run computes the product of a and b into c with one gemm per batch
// element. after, when not nil, is called with the range of c each gemm
// (or, for k = 0, the clearing of c) has just written.
func (mp *matmulPlan[T]) run(c, a, b []T, after func(lo, hi int)) {
	m, nn, k := mp.m, mp.n, mp.k
	mk, kn, mn := m*k, k*nn, m*nn
	if mn == 0 || len(mp.aOff) == 0 {
		return
	}
	if k == 0 {
		clear(c) // an empty sum; BLAS rejects k = 0 with these strides
		if after != nil {
			after(0, len(c))
		}
		return
	}
	for i, ao := range mp.aOff {
		bo := mp.bOff[i]
		mp.gemm(m, nn, k, a[ao:ao+mk], k, b[bo:bo+kn], nn, c[i*mn:(i+1)*mn], nn)
		if after != nil {
			after(i*mn, (i+1)*mn)
		}
	}
}
