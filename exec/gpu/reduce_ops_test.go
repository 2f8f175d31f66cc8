package gpu_test

import "testing"

// TestReduceKernelsMatchCPU checks the reductions beyond sum and mean, on
// short slices (a thread per output, folding in the CPU's order) and long
// ones (a workgroup per output, folding in another order: the atol of a
// sum of ~300 terms of size 3).
func TestReduceKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	runCases(t, []kernelCase{
		{name: "max min short", src: "input %a: f32[7,5,9]\n%y = max %a {axes=[1]}\n%z = min %a {axes=[0,2], keepdims=true}\noutput %y, %z"},
		{name: "max min long", src: "input %a: f32[3,301]\ninput %b: f32[300,5]\n%y = max %a {axes=[1]}\n%z = min %b {axes=[0]}\n%w = max %b\noutput %y, %z, %w"},
		{name: "max min i32", src: "input %a: i32[3,301]\ninput %b: i32[5,7]\n%y = max %a {axes=[1]}\n%z = min %b {axes=[0]}\noutput %y, %z", labels: 1000},
		{name: "prod", src: "input %a: f32[7,13]\ninput %b: f32[100,3]\n%y = prod %a {axes=[1]}\n%z = prod %b {axes=[0]}\noutput %y, %z", atol: 1e-30},
		{name: "prod i32", src: "input %a: i32[7,13]\n%y = prod %a {axes=[1]}\noutput %y", labels: 3},
		{name: "logsumexp", src: "input %a: f32[7,13]\ninput %b: f32[300,5]\n%y = logsumexp %a {axes=[1]}\n%z = logsumexp %b {axes=[0], keepdims=true}\noutput %y, %z", atol: 1e-5},
		{name: "var std", src: "input %a: f32[7,13]\ninput %b: f32[300,5]\n%y = var %a {axes=[1]}\n%z = std %b {axes=[0], correction=0.0}\n%w = var %a {axes=[0], correction=7.0}\n%v = std %a\noutput %y, %z, %w, %v", atol: 1e-5},
		{name: "argmax argmin", src: "input %a: f32[7,13]\ninput %b: f32[300,5]\ninput %c: i32[3,100]\n%y = argmax %a {axes=[1]}\n%z = argmin %b {axes=[0]}\n%w = argmax %c {axes=[1]}\n%v = argmin %c {axes=[1], keepdims=true}\n%u = argmax %b\noutput %y, %z, %w, %v, %u", labels: 7},
		{name: "prod_exclusive", src: "input %a: f32[7,13]\ninput %d: f32[7,13]\n%y = prod_exclusive %a {axes=[1]}\n%z = prod_exclusive %a {axes=[0]}\n%w = prod_exclusive_grad %d, %a {axes=[1]}\n%v = prod_exclusive_grad %d, %a {axes=[0]}\noutput %y, %z, %w, %v", atol: 1e-30},
		{name: "max_grad", src: "input %a: f32[7,13]\ninput %b: f32[100,3]\ninput %d: f32[7]\ninput %e: f32[]\n%r = round %a\n%y = max %r {axes=[1]}\n%g = max_grad %d, %r, %y {axes=[1]}\n%m = min %b {axes=[0], keepdims=true}\n%h = max_grad %e, %b, %m {axes=[0], keepdims=true, min=true}\noutput %g, %h"},
	})
}
