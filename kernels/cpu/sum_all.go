package cpu

import "github.com/kilnml/kiln/kernels"

// Sums of every element of a tensor into one value.
//
// A sum or mean whose result has one element, a fused_reduce whose result
// has one element, and the fused patterns whose sum covers a whole tensor
// (softmax_grad and log_softmax_grad of a tensor that is one slice,
// softmax_ce_grad's target sum over a batch of one) add the elements in
// rowSum's order (rowsum.go): blocks of sumAllBlock, each summed in lanes
// from zero, then the block sums from zero in block order. Beyond one
// block the blocks are independent: they split across the executor's
// workers by whole blocks. The order depends on the element count alone,
// so the bits are the same for any number of workers, and fused and
// unfused graphs share them.

// sumAllBlock is the number of elements of one block of a sum along a run
// (rowsum.go): 16 KiB of f32, so that four blocks of a fused_reduce's
// program result stay in a core's L2 cache.
const sumAllBlock = 4096

// sumAllBlocks sets sums[k] to the sum of block k of x (blocks of
// sumAllBlock elements, the last one possibly shorter; len(sums) is their
// number), each rowSum's block sum.
func sumAllBlocks[T number](sums, x []T) {
	for k := range sums {
		sums[k] = rowSum(x[k*sumAllBlock : min((k+1)*sumAllBlock, len(x))])
	}
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
