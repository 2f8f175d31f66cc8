package ir_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/ir"
)

// Parse a .kir file and print it back in canonical form: comments go, every
// value gets its inferred type, and attributes are spelled out in full.
func ExampleParse() {
	src := []byte(`# a linear layer with a softmax
graph layer
input %x: f32[8,4]   # a batch of 8 rows
param %w: f32[4,3]
%z = matmul %x, %w
%p = softmax %z {axis=1}
%s = sum %p {axes=[1]}
output %p, %s
`)
	g, err := ir.Parse("layer.kir", src)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(g.Format())
	// Output:
	// graph layer
	// input %x: f32[8,4]
	// param %w: f32[4,3]
	// %z: f32[8,3] = matmul %x, %w
	// %p: f32[8,3] = softmax %z {axis=1}
	// %s: f32[8] = sum %p {axes=[1], keepdims=false}
	// output %p, %s
}

// Parse errors carry the file, line and column.
func ExampleParse_error() {
	_, err := ir.Parse("bad.kir", []byte("graph bad\ninput %x: f32[2]\n%y = relu %z\n"))
	fmt.Println(err)
	// Output:
	// bad.kir:3:11: undefined value %z
}
