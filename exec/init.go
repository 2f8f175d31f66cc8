// Package exec holds what every executor shares: the initial values of
// params and state, which the plan determines and the executors only apply,
// and the index of the tensors a user may set or get by name. The executors
// themselves live in exec/cpu and exec/gpu.
package exec

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kilnml/kiln/ir"
)

// InitialValues returns the initial elements of param or state v. A state
// is filled with its init attribute. A param follows its init attribute:
// "zeros", "ones", "normal" (std = scale, default 0.01), "uniform" (in
// [-scale, scale], default 0.05) or "glorot" (uniform in ±sqrt(6/(fan_in+fan_out)));
// absent, rank >= 2 params are glorot and the rest zeros. The random stream
// depends only on seed and index (the param's position among the params), so
// the same plan and seed always start from the same values.
func InitialValues(v *ir.Value, seed uint64, index int) ([]float64, error) {
	n := v.Type.Shape.NumElements()
	out := make([]float64, n)
	switch v.Op {
	case ir.OpState:
		fill := v.Attrs.Float("init", 0)
		for i := range out {
			out[i] = fill
		}
		return out, nil
	case ir.OpParam:
	default:
		return nil, fmt.Errorf("%%%s is a %s; only params and state have initial values", v.Name, v.Op)
	}
	init := v.Attrs.Str("init", "")
	if init == "" {
		init = "zeros"
		if len(v.Type.Shape) >= 2 {
			init = "glorot"
		}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(index)+0x9e3779b97f4a7c15))
	scale, hasScale := v.Attrs.Get("scale")
	s, _ := scale.AsFloat()
	switch init {
	case "zeros":
	case "ones":
		for i := range out {
			out[i] = 1
		}
	case "normal":
		if !hasScale {
			s = 0.01
		}
		for i := range out {
			out[i] = rng.NormFloat64() * s
		}
	case "uniform", "glorot":
		if init == "glorot" {
			fanIn, fanOut := fans(v.Type.Shape)
			s = math.Sqrt(6 / float64(max(fanIn+fanOut, 1)))
		} else if !hasScale {
			s = 0.05
		}
		for i := range out {
			out[i] = (2*rng.Float64() - 1) * s
		}
	default:
		return nil, fmt.Errorf("%%%s: unknown init %q (expected zeros, ones, normal, uniform or glorot)", v.Name, init)
	}
	if !v.Type.DType.IsFloat() && init != "zeros" && init != "ones" {
		return nil, fmt.Errorf("%%%s: init %q needs a float param, found %s", v.Name, init, v.Type)
	}
	return out, nil
}

// fans returns fan-in and fan-out: for a matrix [in, out] (kiln multiplies
// x @ W), in and out; for higher ranks PyTorch's convention [out, in, k...].
func fans(s ir.Shape) (int, int) {
	switch len(s) {
	case 0:
		return 1, 1
	case 1:
		return s[0], s[0]
	case 2:
		return s[0], s[1]
	}
	rf := 1
	for _, d := range s[2:] {
		rf *= d
	}
	return s[1] * rf, s[0] * rf
}
