package ir_test

import (
	"testing"
)

// TestParseReduceErrors checks the errors of the reductions, comparisons,
// where and logical ops: each says what was expected and what was found,
// with the types.
func TestParseReduceErrors(t *testing.T) {
	const head = "graph g\ninput %x: f32[2,3]\ninput %e: f32[2,0]\ninput %b: bool[3]\ninput %i: i32[2,3]\n"
	tests := []parseErrorCase{
		{"max of nothing", head + "%y = max %e {axes=[1]}\n", "t.kir:6:6: max: expected reduced axes of nonzero size (the extreme of no elements is undefined), found axis 1 of size 0 in f32[2,0]"},
		{"argmin of nothing", head + "%y = argmin %e\n", "t.kir:6:6: argmin: expected reduced axes of nonzero size (the extreme of no elements is undefined), found axis 1 of size 0 in f32[2,0]"},
		{"max of bool", head + "%y = max %b\n", "t.kir:6:6: max: expected a numeric operand, found bool[3]"},
		{"axis range", head + "%y = prod %x {axes=[2]}\n", "t.kir:6:6: prod: axis 2 out of range for rank 2 (input f32[2,3])"},
		{"logsumexp of int", head + "%y = logsumexp %i\n", "t.kir:6:6: logsumexp: expected a float operand (f32 or f64), found i32[2,3]"},
		{"var correction kind", head + "%y = var %x {correction=\"one\"}\n", `t.kir:6:6: var attribute correction: expected float, found string "one"`},
		{"std of int", head + "%y = std %i {axes=[0]}\n", "t.kir:6:6: std: expected a float operand (f32 or f64), found i32[2,3]"},
		{"prod_exclusive_grad types", head + "input %z: f32[3,2]\n%y = prod_exclusive_grad %z, %x\n", "t.kir:7:6: prod_exclusive_grad: expected dy of the type of x, found f32[3,2] and f32[2,3]"},
		{"compare dtypes", head + "%y = greater %x, %i\n", "t.kir:6:6: greater: expected operands of one dtype (kiln does not promote), found f32[2,3] and i32[2,3]"},
		{"order bools", head + "%y = less %b, %b\n", "t.kir:6:6: less: expected numeric operands (f32, f64, i32 or i64), found bool[3] and bool[3]"},
		{"compare shapes", head + "%y = equal %x, %e\n", "t.kir:6:6: equal: incompatible shapes f32[2,3] and f32[2,0] (they do not broadcast)"},
		{"where cond", head + "%y = where %x, %x, %x\n", "t.kir:6:6: where: expected a bool cond, found f32[2,3]"},
		{"where dtypes", head + "%y = where %b, %x, %i\n", "t.kir:6:6: where: expected a and b of one dtype (kiln does not promote), found f32[2,3] and i32[2,3]"},
		{"where shapes", head + "%y = where %b, %x, %e\n", "t.kir:6:6: where: incompatible shapes: cond bool[3], a f32[2,3] and b f32[2,0] do not broadcast"},
		{"where arity", head + "%y = where %b, %x\n", "t.kir:6:6: where takes 3 argument(s) (cond, a, b), found 2"},
		{"logical of float", head + "%y = logical_or %b, %x\n", "t.kir:6:6: logical_or: expected bool operands, found bool[3] and f32[2,3]"},
		{"not of int", head + "%y = logical_not %i\n", "t.kir:6:6: logical_not: expected a bool operand, found i32[2,3]"},
	}
	checkParseErrors(t, tests)
}
