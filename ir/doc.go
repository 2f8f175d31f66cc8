// Package ir is kiln's intermediate representation: a static dataflow
// graph of typed tensor values, the one op table that says what every op
// is, and the .kir text format. Every other package of the compiler reads
// and rewrites these graphs; ir itself imports no other kiln package.
//
// # Graphs
//
// A Graph is in SSA form. Graph.Values is a slice and a value's ID is its
// index; each Value has a name, a static Type (a DType and a Shape, both
// known at compile time), an Op, argument IDs and attributes. Values are
// stored in definition order: every argument is defined before its user,
// so the slice is a topological order, the first schedule the planner
// starts from, and every walk over a graph is deterministic.
//
// Inputs, params and state are values too, made by the leaf ops input
// (fed at every step), param (trained; a param with frozen=true keeps its
// initial value) and state (persistent, not trained: optimizer moments,
// counters, batch-norm statistics). Three lists complete a graph:
// Outputs (the first is the loss of a training graph), Grads (a param and
// its gradient value, recorded by autodiff) and Updates (a param or state
// and the value it takes at the end of a step, recorded by the optimizer,
// and by an imported forward graph for the running statistics it keeps). Roots returns them all: the
// values every pass must keep and no step may overwrite before they are
// read. A graph is a training step when an update targets a param
// (UpdatesParams). Recompute holds the recompute marks a user set, which
// the remat pass realizes.
//
// Graph.Add appends a value, inferring its type from the table, and
// returns an error naming the op and the operand types; Graph.Leaf
// declares an input, param or state. Check verifies a whole graph (ops and
// arity, canonical attributes, definition before use, inferred types,
// unique names, the types of gradients and updates, recompute marks); it
// knows nothing of passes and runs after each one in tests and under
// KILN_DEBUG=check.
//
// # The op table
//
// An Op is a small integer into one table; Op.Info returns its row, an
// OpInfo. A row holds everything the rest of kiln needs to know about an
// op:
//
//   - Name, Doc, the argument names (Args, with Optional trailing and
//     Variadic repeated arguments) and the attribute schema (Attrs, with
//     kinds, defaults and docs);
//   - Class: leaf, elementwise (element i of the result depends on
//     element i of each broadcast argument), reduction or other, which
//     passes and kernels use to treat whole families alike;
//   - Infer, the result type from the argument types and attributes, or
//     an error saying what was expected and what was found;
//   - Grad, the gradient rule (see below); a nil Grad means no gradient
//     flows through the op (comparisons, argmax, integer results), unless
//     NoGrad says why the derivative is missing, and then autodiff refuses
//     to differentiate through it rather than treat it as constant;
//   - NoInPlace, why an elementwise op's kernels may not write the result
//     over an argument (Op.InPlace; ElementwiseKernel extends in-place
//     execution to fused_elementwise);
//   - Cost, the floating-point operations of one computation from the
//     static types, for the recompute solver and kiln bench (the package
//     function Cost prices an op without one at one per element);
//   - Indices, the integer arguments read as indices or labels and the
//     number of valid values of each, so random test inputs stay in range.
//
// The rows are written next to their family's inference and gradient code
// (op.go for the core, ops_math.go, ops_activation.go, ops_loss.go,
// ops_reduce.go, ops_movement.go, ops_nn.go, ops_kan.go, ops_array.go and
// the ops the fuse pass makes, ops_fused_patterns.go and
// ops_fused_elementwise.go) and gathered into the one table at init; two
// rows for one op panic there. The parser, the printer, Check, autodiff,
// the fuser, the recompute cost model, the kernels' registries, kiln's help
// and docs/OPS.md (Reference) all read this table; nothing keeps a second
// list of ops. Tests fail when an op lacks a complete row, a CPU kernel, a
// GPU kernel for f32 or a gradient test.
//
// # Attributes
//
// Attributes are stored canonical: sorted by key, every default filled in,
// ints widened to floats where the schema says float (Canonical). Check
// insists on it, so every consumer reads one spelling, equal values hash
// alike for common-subexpression elimination, and the text a graph prints
// is unique. A fused op's "from" attribute (FromAttr, made by Provenance)
// keeps the .kir lines of the values it replaced; fused_elementwise,
// fused_matmul and fused_reduce carry their element-wise program in the
// "program" attribute (EwProgram).
//
// # Text
//
// Graph.Format prints the canonical .kir text (docs/KIR.md): every value
// with its type and canonical attributes, so Parse(Format(g)) gives back
// g. The same text is the dump format, the golden-test oracle, what plan
// files carry, and input to Parse, whose errors read file:line:col: what
// was expected, what was found.
//
// # Limits
//
// Sizes are checked in one place, the type: Type.BytesChecked and
// Shape.NumElementsChecked refuse a rank over MaxRank and any dimension,
// element or byte count over MaxTensorBytes, and the parser, Graph.Leaf,
// Graph.Infer, Check and ParseType call them, so every type in a graph has
// exact NumElements and Bytes and no later stage guards against overflow.
// MaxNameLength bounds the names a user gives, MaxAttrDepth the nesting
// of attribute lists, and MaxQuoted (with Excerpt) the input an error
// quotes.
//
// # Gradient rules
//
// A gradient rule is a function in the op's row. Given the value y and dy,
// the gradient of the loss with respect to y, it appends ordinary ops for
// the gradient with respect to each argument through an Emitter, which
// keeps the first error and turns later calls into no-ops, so rules read as
// straight-line code and are checked once. A broadcast operand gets its
// gradient summed back to its shape with Emitter.SumTo. Since the backward
// is ordinary ops, differentiating twice works wherever the ops a rule
// emits have rules of their own (relu's gradient is the op relu_grad, which
// has one). Where PyTorch takes a one-sided slope at a kink, rules pick it
// with where and PyTorch's own comparison, so NaN and ±Inf come out as in
// PyTorch.
package ir
