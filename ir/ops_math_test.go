package ir_test

import (
	"testing"
)

// TestMathParseErrors checks the errors of the math family's inference:
// pow's two forms, clip's bounds and the float-only ops on integers.
func TestMathParseErrors(t *testing.T) {
	const head = "graph g\ninput %x: f32[2,3]\ninput %i: i32[3]\n"
	tests := []parseErrorCase{
		{"pow both", head + "%y = pow %x, %x {exponent=2}\n", "t.kir:4:6: pow: takes either an exponent argument b or the attribute exponent, not both"},
		{"pow neither", head + "%y = pow %x\n", "t.kir:4:6: pow: needs an exponent: a second argument b or the attribute exponent"},
		{"pow arity", head + "%y = pow %x, %x, %x\n", "t.kir:4:6: pow takes 1 to 2 arguments (a, b; the last 1 optional), found 3"},
		{"pow ints", head + "%y = pow %i, %i\n", "t.kir:4:6: pow: expected float operands (f32 or f64), found i32[3]"},
		{"pow exponent ints", head + "%y = pow %i {exponent=2}\n", "t.kir:4:6: pow: expected a float operand (f32 or f64), found i32[3]"},
		{"pow exponent kind", head + "%y = pow %x {exponent=\"two\"}\n", `t.kir:4:6: pow attribute exponent: expected float, found string "two"`},
		{"clip no bounds", head + "%y = clip %x\n", "t.kir:4:6: clip: needs min, max or both"},
		{"clip crossed", head + "%y = clip %x {min=1, max=0.5}\n", "t.kir:4:6: clip: min 1.0 is greater than max 0.5"},
		{"clip nan", head + "%y = clip %x {min=nan}\n", "t.kir:4:6: clip: min is NaN"},
		{"clip int fraction", head + "%y = clip %i {max=2.5}\n", "t.kir:4:6: clip: max for i32[3]: value 2.5 is not an i32"},
		{"clip int range", head + "%y = clip %i {min=-3e9}\n", "t.kir:4:6: clip: min for i32[3]: value -3e+09 is not an i32"},
		{"clip bool", "graph g\ninput %b: bool[2]\n%y = clip %b {min=0}\n", "t.kir:3:6: clip: expected a numeric operand, found bool[2]"},
		{"floor of int", head + "%y = floor %i\n", "t.kir:4:6: floor: expected a float operand (f32 or f64), found i32[3]"},
		{"maximum dtypes", head + "%y = maximum %x, %i\n", "t.kir:4:6: maximum: dtype mismatch: f32[2,3] and i32[3]"},
		{"mod shapes", head + "input %z: f32[2]\n%y = mod %x, %z\n", "t.kir:5:6: mod: incompatible shapes f32[2,3] and f32[2] (they do not broadcast)"},
	}
	checkParseErrors(t, tests)
}
