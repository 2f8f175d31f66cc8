//go:build !amd64 || purego

package cpu

import "github.com/kilnml/kiln/ir"

// Without the SSE2 loops of elementwise_amd64.s, vecVec, vecScalar and
// scalarVec run their Go loops.

func ewVecVecAsm[T number](ir.Op, []T, []T, []T) bool  { return false }
func ewVecScalarAsm[T number](ir.Op, []T, []T, T) bool { return false }
func ewScalarVecAsm[T number](ir.Op, []T, T, []T) bool { return false }
