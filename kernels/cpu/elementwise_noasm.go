//go:build !amd64 || purego

package cpu

import "github.com/kilnml/kiln/ir"

// Without the SSE2 loops of elementwise_amd64.s, vecVec, vecScalar and
// scalarVec run their Go loops.

// ewVecVecAsm reports false: the Go loop of vecVec runs.
func ewVecVecAsm[T number](ir.Op, []T, []T, []T) bool { return false }

// ewVecScalarAsm reports false: the Go loop of vecScalar runs.
func ewVecScalarAsm[T number](ir.Op, []T, []T, T) bool { return false }

// ewScalarVecAsm reports false: the Go loop of scalarVec runs.
func ewScalarVecAsm[T number](ir.Op, []T, T, []T) bool { return false }
