package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// dropout's mask is a pure function of (seed, step, element index), built
// from 32-bit integer operations only so that a GPU kernel (WGSL has no
// 64-bit integers) can reproduce it bit for bit:
//
//	pcg(v)   = the PCG hash of Jarzynski and Olano, "Hash Functions for GPU
//	           Rendering" (JCGT 2020), below
//	key      = pcg(hi(step) ^ pcg(lo(step) ^ pcg(hi(seed) ^ pcg(lo(seed)))))
//	bits(i)  = pcg(hi(i) ^ pcg(lo(i) ^ key))
//	keep(i)  = bits(i) >> 8 >= ceil(p · 2^24)
//
// where lo and hi are the low and high 32 bits of the 64-bit two's
// complement value. An element is kept with probability 1 - p (to 2^-24);
// p = 0 keeps every element and p = 1 none.

// dropoutPCG is the PCG hash (pcg_hash): one LCG step and an output
// permutation of the PCG family, a bijection on 32-bit words.
func dropoutPCG(v uint32) uint32 {
	state := v*747796405 + 2891336453
	word := ((state >> ((state >> 28) + 4)) ^ state) * 277803737
	return (word >> 22) ^ word
}

// dropoutKey returns the hash key of (seed, step).
func dropoutKey(seed, step uint64) uint32 {
	k := dropoutPCG(uint32(seed))
	k = dropoutPCG(uint32(seed>>32) ^ k)
	k = dropoutPCG(uint32(step) ^ k)
	return dropoutPCG(uint32(step>>32) ^ k)
}

// dropoutBits returns the 24 random bits of element i under key.
func dropoutBits(key uint32, i uint64) uint32 {
	return dropoutPCG(uint32(i>>32)^dropoutPCG(uint32(i)^key)) >> 8
}

// dropoutThreshold returns ceil(p · 2^24): elements whose bits are below it
// are dropped.
func dropoutThreshold(p float64) uint32 {
	return uint32(math.Ceil(p * (1 << 24)))
}

func init() {
	register(ir.OpDropout, ir.F32, buildDropout[float32])
	register(ir.OpDropout, ir.F64, buildDropout[float64])
}

// buildDropout builds dropout {p, seed}: y = x · scale where the mask keeps
// the element and y = x · 0 where it drops it (so NaN and ±Inf stay NaN, as
// PyTorch's input * noise), with scale = 1/(1-p) computed in T as PyTorch's
// noise.div_(1 - p). The step is read from n.Step on every call; p = 0 is
// the identity.
func buildDropout[T float](n *kernels.Node) (kernels.Func, error) {
	p := n.Attrs.Float("p", 0.5)
	seed := uint64(n.Attrs.Int("seed", 0))
	thr := dropoutThreshold(p)
	scale := T(1) / T(1-p)
	stepPtr := n.Step
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		y, x := kernels.View[T](out), kernels.View[T](args[0])
		if thr == 0 {
			copy(y, x)
			return nil
		}
		var step int64
		if stepPtr != nil {
			step = *stepPtr
		}
		key := dropoutKey(seed, uint64(step))
		for i, v := range x {
			if dropoutBits(key, uint64(i)) >= thr {
				y[i] = v * scale
			} else {
				y[i] = v * 0
			}
		}
		return nil
	}, nil
}
