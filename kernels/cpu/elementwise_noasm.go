//go:build !amd64 || purego

package cpu

import "github.com/kilnml/kiln/ir"

// Without the SSE2 loops of elementwise_sse2_amd64.s, vecVec, vecScalar and
// scalarVec run their Go loops.

// ewVecVecAsm reports false: the Go loop of vecVec runs.
func ewVecVecAsm[T number](ir.Op, []T, []T, []T) bool { return false }

// ewVecScalarAsm reports false: the Go loop of vecScalar runs.
func ewVecScalarAsm[T number](ir.Op, []T, []T, T) bool { return false }

// ewScalarVecAsm reports false: the Go loop of scalarVec runs.
func ewScalarVecAsm[T number](ir.Op, []T, T, []T) bool { return false }

// reluGradF32 does nothing and returns 0: reluGradRow's Go loop runs.
func reluGradF32(o, dy, x []float32) int { return 0 }

// ewAVX2 is false: there are no AVX2 loops.
const ewAVX2 = false

// ewAVX512 is false: there are no AVX-512 block runners (a variable, as on
// amd64, for the tests).
var ewAVX512 = false

// ewUseAVX2 does nothing: there are no loops to choose between.
func ewUseAVX2(bool) {}

// ewVecVecFunc returns nil: vecVec's Go loop runs.
func ewVecVecFunc[T number](ir.Op, bool) func(out, a, b []T) { return nil }

// ewVecScalarFunc returns nil: vecScalar's Go loop runs.
func ewVecScalarFunc[T number](ir.Op, bool) func(out, a []T, s T) { return nil }

// ewScalarVecFunc returns nil: scalarVec's Go loop runs.
func ewScalarVecFunc[T number](ir.Op, bool) func(out []T, s T, b []T) { return nil }

// storeFence does nothing: no loop here streams its stores.
func storeFence() {}

// fuseewArithFunc returns nil: there is no block runner, the fused
// elementwise steps run one by one.
func fuseewArithFunc[T float]() func(steps []fuseewArith, fs [][]T, m int) { return nil }
