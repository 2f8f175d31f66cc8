package cpu

import "github.com/kilnml/kiln/kernels"

// Sums of every element of a tensor into one value.
//
// A sum or mean whose result has one element, a fused_reduce whose result
// has one element, and the fused patterns whose sum covers a whole tensor
// (softmax_grad and log_softmax_grad of a tensor that is one slice,
// softmax_ce_grad's target sum over a batch of one) add the elements in
// blocks of sumAllBlock in index order: each block's sum from zero in
// index order, then the block sums from zero in block order. Up to
// sumAllBlock elements that is the plain sequential sum every other
// reduction does. Beyond it the blocks are independent: they split across
// the executor's workers by whole blocks, and each part sums four blocks
// side by side (sumAllBlocks), so that four chains of dependent adds
// overlap. The order depends on the element count alone, so the bits are
// the same for any number of workers, and fused and unfused graphs share
// them.

// sumAllBlock is the number of elements of one block of a sum of a whole
// tensor: 16 KiB of f32, so that four blocks of a fused_reduce's program
// result stay in a core's L2 cache.
const sumAllBlock = 4096

// sumAllBlocks sets sums[k] to the sum of block k of x (blocks of
// sumAllBlock elements, the last one possibly shorter; len(sums) is their
// number), each from zero in index order. Four whole blocks are summed
// together, one chain of adds each.
func sumAllBlocks[T number](sums, x []T) {
	const b = sumAllBlock
	k := 0
	for ; (k+4)*b <= len(x); k += 4 {
		x0 := x[k*b : (k+1)*b]
		x1, x2, x3 := x[(k+1)*b:(k+2)*b], x[(k+2)*b:(k+3)*b], x[(k+3)*b:(k+4)*b]
		x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)]
		var s0, s1, s2, s3 T
		for i, v := range x0 {
			s0 += v
			s1 += x1[i]
			s2 += x2[i]
			s3 += x3[i]
		}
		sums[k], sums[k+1], sums[k+2], sums[k+3] = s0, s1, s2, s3
	}
	for ; k*b < len(x); k++ {
		var s T
		for _, v := range x[k*b : min((k+1)*b, len(x))] {
			s += v
		}
		sums[k] = s
	}
}

// sumAll returns the sum of x in sumAllBlock blocks (one goroutine, no
// scratch): the order of every sum of a whole tensor.
func sumAll[T number](x []T) T {
	var s T
	for lo := 0; lo < len(x); lo += sumAllBlock {
		var bs T
		for _, v := range x[lo:min(lo+sumAllBlock, len(x))] {
			bs += v
		}
		s += bs
	}
	return s
}

// sumAllProducts returns the sum of a[i]*b[i] (each product rounded to T)
// in sumAllBlock blocks, as a fused_reduce of mul computes it.
func sumAllProducts[T float](a, b []T) T {
	b = b[:len(a)]
	var s T
	for lo := 0; lo < len(a); lo += sumAllBlock {
		var bs T
		hi := min(lo+sumAllBlock, len(a))
		for i, v := range a[lo:hi] {
			bs += T(v * b[lo+i])
		}
		s += bs
	}
	return s
}

// sumAllParts returns how many parts the blocks of a sum of count
// elements, of cost units of work each, split into on par's workers.
func sumAllParts(par kernels.Parallel, count, cost int) int {
	return parParts(par, (count+sumAllBlock-1)/sumAllBlock, sumAllBlock*cost)
}

// sumAllFunc returns the Func of a sum of count elements into its one
// output element: parts (sumAllParts) ranges of whole blocks run on par's
// workers, part p's blockSums setting sums[k] for its blocks k in [k0,
// k1) (sumAllBlocks' sums); the calling goroutine then adds the block sums
// in order, and divides by div for mean.
func sumAllFunc[T number](par kernels.Parallel, parts, count int, mean bool, div T, blockSums func(p int, sums []T, args []kernels.Tensor, k0, k1 int)) kernels.Func {
	sums := make([]T, (count+sumAllBlock-1)/sumAllBlock)
	f := parRows(par, parts, len(sums), 1, func(p int, _ kernels.Tensor, args []kernels.Tensor, k0, k1 int) error {
		if k0 < k1 {
			blockSums(p, sums, args, k0, k1)
		}
		return nil
	})
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		if err := f(out, args); err != nil {
			return err
		}
		var s T
		for _, v := range sums {
			s += v
		}
		if mean {
			s /= div
		}
		kernels.View[T](out)[0] = s
		return nil
	}
}

// buildSumAll returns the Func of sum or mean of the count elements of
// its argument into one element, in sumAllBlock blocks.
func buildSumAll[T number](n *kernels.Node, count int, mean bool, div T) kernels.Func {
	parts := sumAllParts(n.Par, count, 1)
	return sumAllFunc(n.Par, parts, count, mean, div, func(_ int, sums []T, args []kernels.Tensor, k0, k1 int) {
		x := kernels.View[T](args[0])
		sumAllBlocks(sums[k0:k1], x[k0*sumAllBlock:min(k1*sumAllBlock, count)])
	})
}
