package ir

// Cost returns the floating-point operations of one computation of op on
// arguments of types args with result out: the op's Cost when its table row
// has one, else one per element of its largest operand or result (the
// price of elementwise ops, reductions, data movement and constants).
// Leaves cost nothing. The checkpoint solver prices recomputation with it
// and kiln bench counts a plan's FLOPs.
func Cost(op Op, args []Type, out Type, attrs Attrs) float64 {
	info := op.Info()
	if info.Class == ClassLeaf {
		return 0
	}
	if info.Cost != nil {
		return info.Cost(args, out, attrs)
	}
	return largestElems(args, out)
}

// largestElems returns the element count of the largest of args and out.
func largestElems(args []Type, out Type) float64 {
	n := float64(out.Shape.NumElements())
	for _, a := range args {
		n = max(n, float64(a.Shape.NumElements()))
	}
	return n
}

// costPerElement prices an op at k operations per element of its largest
// operand or result: softmax-like normalizations and losses 4, layer and
// batch norm 8.
func costPerElement(k float64) func([]Type, Type, Attrs) float64 {
	return func(args []Type, out Type, _ Attrs) float64 { return k * largestElems(args, out) }
}

// costMatmul is 2·M·N·K per batch element of a matmul: two per
// multiply-add, K the inner dimension as the product reads it.
func costMatmul(args []Type, out Type, attrs Attrs) float64 {
	return 2 * float64(out.Shape.NumElements()) * float64(matmulInner(args, attrs))
}

// matmulInner returns the inner dimension of a matmul of args (1 when the
// operands do not form a product).
func matmulInner(args []Type, attrs Attrs) int {
	if len(args) < 2 {
		return 1
	}
	a, _, err := MatmulOperands(args[0].Shape, args[1].Shape, attrs)
	if err != nil || len(a) == 0 {
		return 1
	}
	return a[len(a)-1]
}

// programLength returns the instructions of a fused op's program (at
// least 1).
func programLength(attrs Attrs) float64 {
	if p, ok := attrs.Get(ProgramAttr); ok && p.Kind == AttrList {
		return float64(max(len(p.L), 1))
	}
	return 1
}

// perOutputChannel returns the elements of a convolution weight w per
// output channel: C_in/groups times the kernel size.
func perOutputChannel(w Shape) float64 {
	return float64(w.NumElements()) / float64(max(w[0], 1))
}
