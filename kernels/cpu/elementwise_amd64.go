//go:build !purego

package cpu

import "github.com/kilnml/kiln/ir"

// The SSE2 loops of elementwise_amd64.s. Each is the loop of vecVec,
// vecScalar or scalarVec for one op and one float type, four (f32) or two
// (f64) elements per instruction with the same IEEE 754 operation per
// element, so the results are bitwise those of the Go loops (which the
// purego build and the other architectures run).

//go:noescape
func ewVVAddF32(out, a, b []float32)

//go:noescape
func ewVSAddF32(out, a []float32, s float32)

//go:noescape
func ewSVAddF32(out []float32, s float32, b []float32)

//go:noescape
func ewVVSubF32(out, a, b []float32)

//go:noescape
func ewVSSubF32(out, a []float32, s float32)

//go:noescape
func ewSVSubF32(out []float32, s float32, b []float32)

//go:noescape
func ewVVMulF32(out, a, b []float32)

//go:noescape
func ewVSMulF32(out, a []float32, s float32)

//go:noescape
func ewSVMulF32(out []float32, s float32, b []float32)

//go:noescape
func ewVVDivF32(out, a, b []float32)

//go:noescape
func ewVSDivF32(out, a []float32, s float32)

//go:noescape
func ewSVDivF32(out []float32, s float32, b []float32)

//go:noescape
func ewVVAddF64(out, a, b []float64)

//go:noescape
func ewVSAddF64(out, a []float64, s float64)

//go:noescape
func ewSVAddF64(out []float64, s float64, b []float64)

//go:noescape
func ewVVSubF64(out, a, b []float64)

//go:noescape
func ewVSSubF64(out, a []float64, s float64)

//go:noescape
func ewSVSubF64(out []float64, s float64, b []float64)

//go:noescape
func ewVVMulF64(out, a, b []float64)

//go:noescape
func ewVSMulF64(out, a []float64, s float64)

//go:noescape
func ewSVMulF64(out []float64, s float64, b []float64)

//go:noescape
func ewVVDivF64(out, a, b []float64)

//go:noescape
func ewVSDivF64(out, a []float64, s float64)

//go:noescape
func ewSVDivF64(out []float64, s float64, b []float64)

// ewVecVecAsm computes out[i] = a[i] op b[i] (a and b as long as out) with
// the SSE2 loops for f32 and f64 add, sub, mul and div, and reports whether
// it did; other types and ops are left to the Go loop.
func ewVecVecAsm[T number](op ir.Op, out, a, b []T) bool {
	switch o := any(out).(type) {
	case []float32:
		a, b := any(a).([]float32), any(b).([]float32)
		switch op {
		case ir.OpAdd:
			ewVVAddF32(o, a, b)
		case ir.OpSub:
			ewVVSubF32(o, a, b)
		case ir.OpMul:
			ewVVMulF32(o, a, b)
		case ir.OpDiv:
			ewVVDivF32(o, a, b)
		default:
			return false
		}
		return true
	case []float64:
		a, b := any(a).([]float64), any(b).([]float64)
		switch op {
		case ir.OpAdd:
			ewVVAddF64(o, a, b)
		case ir.OpSub:
			ewVVSubF64(o, a, b)
		case ir.OpMul:
			ewVVMulF64(o, a, b)
		case ir.OpDiv:
			ewVVDivF64(o, a, b)
		default:
			return false
		}
		return true
	}
	return false
}

// ewVecScalarAsm computes out[i] = a[i] op s like ewVecVecAsm.
func ewVecScalarAsm[T number](op ir.Op, out, a []T, s T) bool {
	switch o := any(out).(type) {
	case []float32:
		a, s := any(a).([]float32), any(s).(float32)
		switch op {
		case ir.OpAdd:
			ewVSAddF32(o, a, s)
		case ir.OpSub:
			ewVSSubF32(o, a, s)
		case ir.OpMul:
			ewVSMulF32(o, a, s)
		case ir.OpDiv:
			ewVSDivF32(o, a, s)
		default:
			return false
		}
		return true
	case []float64:
		a, s := any(a).([]float64), any(s).(float64)
		switch op {
		case ir.OpAdd:
			ewVSAddF64(o, a, s)
		case ir.OpSub:
			ewVSSubF64(o, a, s)
		case ir.OpMul:
			ewVSMulF64(o, a, s)
		case ir.OpDiv:
			ewVSDivF64(o, a, s)
		default:
			return false
		}
		return true
	}
	return false
}

// ewScalarVecAsm computes out[i] = s op b[i] like ewVecVecAsm.
func ewScalarVecAsm[T number](op ir.Op, out []T, s T, b []T) bool {
	switch o := any(out).(type) {
	case []float32:
		s, b := any(s).(float32), any(b).([]float32)
		switch op {
		case ir.OpAdd:
			ewSVAddF32(o, s, b)
		case ir.OpSub:
			ewSVSubF32(o, s, b)
		case ir.OpMul:
			ewSVMulF32(o, s, b)
		case ir.OpDiv:
			ewSVDivF32(o, s, b)
		default:
			return false
		}
		return true
	case []float64:
		s, b := any(s).(float64), any(b).([]float64)
		switch op {
		case ir.OpAdd:
			ewSVAddF64(o, s, b)
		case ir.OpSub:
			ewSVSubF64(o, s, b)
		case ir.OpMul:
			ewSVMulF64(o, s, b)
		case ir.OpDiv:
			ewSVDivF64(o, s, b)
		default:
			return false
		}
		return true
	}
	return false
}
