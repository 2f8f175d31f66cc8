package ir

import (
	"fmt"
	"sort"
	"strings"
)

// Op is an operation: a small integer into the op table, which says
// everything the rest of the compiler needs to know about it.
type Op uint16

// The ops. Leaf ops declare values; the rest compute them. The order is the
// order of the table; the text format uses the names, never the numbers.
const (
	OpInvalid Op = iota

	// Declarations.
	OpInput
	OpParam
	OpState

	// Elementwise binary, NumPy broadcasting.
	OpAdd
	OpSub
	OpMul
	OpDiv

	// Elementwise unary.
	OpNeg
	OpExp
	OpLog
	OpSqrt
	OpTanh
	OpSigmoid
	OpRelu
	OpReluGrad

	// Linear algebra and data movement.
	OpMatmul
	OpTranspose
	OpReshape
	OpBroadcastTo

	// Reductions.
	OpSum
	OpMean

	// Normalizations.
	OpSoftmax
	OpLogSoftmax

	// Constants.
	OpConst
	OpOneHot

	// Elementwise math (ops_math.go).
	OpAbs
	OpSign
	OpRsqrt
	OpSquare
	OpReciprocal
	OpLog2
	OpLog10
	OpLog1p
	OpExpm1
	OpSin
	OpCos
	OpErf
	OpFloor
	OpCeil
	OpRound
	OpClip
	OpPow
	OpMaximum
	OpMinimum
	OpFloorDiv
	OpMod
	OpWhere
	OpGreater
	OpGreaterEqual
	OpLess
	OpLessEqual
	OpEqual
	OpNotEqual
	OpLogicalAnd
	OpLogicalOr
	OpLogicalNot

	// Activations (ops_activation.go).
	OpLeakyRelu
	OpPrelu
	OpElu
	OpGelu
	OpSilu
	OpSoftplus
	OpGeluGrad

	// Losses (ops_loss.go).
	OpSoftmaxCrossEntropy
	OpMSELoss
	OpL1Loss
	OpHuberLoss
	OpBCELoss
	OpBCEWithLogits
	OpNLLLoss

	// Reductions (ops_reduce.go).
	OpMax
	OpMin
	OpProd
	OpLogSumExp
	OpVar
	OpStd
	OpArgmax
	OpArgmin
	OpProdExclusive
	OpProdExclusiveGrad

	// Shape and data movement (ops_movement.go).
	OpSqueeze
	OpUnsqueeze
	OpConcat
	OpSlice
	OpPad
	OpGather
	OpIndexSelect
	OpEmbedding
	OpStack
	OpFlip
	OpScatterAdd
	OpIndexAdd

	// Neural-network layers (ops_nn.go).
	OpConv1d
	OpConv2d
	OpConvInputGrad
	OpConvWeightGrad
	OpMaxPool2d
	OpMaxPool2dGrad
	OpMaxPool2dSelect
	OpAvgPool2d
	OpAvgPool2dGrad
	OpLayerNorm
	OpLayerNormGrad
	OpBatchNorm
	OpDropout

	// Kolmogorov-Arnold and logic-gate layers (ops_kan.go).
	OpBspline
	OpLogicGate

	// Fused patterns (ops_fused_patterns.go).
	OpSoftmaxGrad
	OpLogSoftmaxGrad
	OpMaxGrad
	OpSoftmaxCEGrad

	// Fused elementwise chains, epilogues and prologues
	// (ops_fused_elementwise.go).
	OpFusedElementwise
	OpFusedMatmul
	OpFusedReduce

	// Array ops that ONNX models use (ops_array.go).
	OpCast
	OpCumsum
	OpTrilu

	// Fused attention (ops_attention.go).
	OpAttention
	OpAttentionGrad

	// More activations (ops_activation.go).
	OpSoftsign

	// Collectives of data-parallel training (ops_dist.go).
	OpAllReduce
	OpReduceScatter
	OpAllGather
	OpShard

	// Softmax with an elementwise prologue, its gradient with an
	// elementwise epilogue (ops_fused_softmax.go).
	OpFusedSoftmax
	OpFusedSoftmaxGrad

	numOps
)

// OpClass says how an op maps its inputs to its output; passes and kernels
// use it to treat whole families alike.
type OpClass uint8

// The op classes.
const (
	ClassOther       OpClass = iota
	ClassLeaf                // declares an input, param or state
	ClassElementwise         // out[i] depends on the broadcast args at i only
	ClassReduction           // sums or averages over axes
)

// IndexArg is an argument an op reads as indices: Arg's elements must be in
// [0, N).
type IndexArg struct{ Arg, N int }

// AttrSpec describes one attribute an op takes.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Default  *AttrValue // filled in when absent; nil means optional without a default, or Required
	Required bool
	Doc      string
}

// OpInfo is one row of the op table.
type OpInfo struct {
	Name string
	// Args names the arguments in order. The last Optional of them may be
	// left out; with Variadic the last one repeats (one or more times).
	Args     []string
	Optional int
	Variadic bool
	Attrs    []AttrSpec
	Class    OpClass
	Doc      string

	// Infer returns the result type for the argument types and the
	// (defaults-filled) attributes, or an error saying what was expected
	// and what was found.
	Infer func(args []Type, attrs Attrs) (Type, error)

	// Grad appends to the graph the gradient of the loss with respect to
	// each argument of value y, given dy, the gradient with respect to y.
	// It returns one id per argument; NoID means no gradient flows there.
	// A nil Grad means the op is not differentiable: no gradient flows
	// through it (comparisons, argmax, integer results).
	Grad func(e *Emitter, y, dy ID) []ID

	// NoGrad, when set on an op with a nil Grad, says why its derivative
	// is not available (a gradient op whose own gradient is not written);
	// autodiff then refuses to differentiate through it instead of
	// treating it as constant.
	NoGrad string

	// NoInPlace, when set on an elementwise op, says why its kernels may
	// not write their result over an argument of the same type; the
	// planner then never gives the result an argument's memory (see
	// Op.InPlace).
	NoInPlace string

	// Cost, when set, returns the floating-point operations of one
	// computation from the static types (see the package function Cost,
	// which prices an op without one at one per element of its largest
	// operand or result).
	Cost func(args []Type, out Type, attrs Attrs) float64

	// Indices, when set, names the integer arguments the op uses as
	// indices or labels and the number of valid values of each, from the
	// static types: random test inputs stay in range.
	Indices func(args []Type, attrs Attrs) []IndexArg

	// ElementwiseKernel marks an op outside ClassElementwise whose kernel
	// still computes element i of the result from element i of each
	// (broadcast) argument, reading before writing, so that it may run in
	// place like an elementwise op (fused_elementwise).
	ElementwiseKernel bool

	// InPlaceFrom, when set on an op of another class, is the first of
	// the arguments that its kernels read as an elementwise kernel reads
	// its arguments: element i before they write element i of the result,
	// and never after. The result may take the memory of such an argument
	// of its type (see Op.InPlaceArg): the inputs of fused_softmax_grad's
	// epilogue. Zero, the default, names none.
	InPlaceFrom int
}

// Info returns the op's table row.
func (op Op) Info() *OpInfo {
	if op <= 0 || op >= numOps {
		return &opTable[OpInvalid]
	}
	return &opTable[op]
}

// String returns the op's name.
func (op Op) String() string {
	if op <= 0 || op >= numOps {
		return fmt.Sprintf("op(%d)", uint16(op))
	}
	return opTable[op].Name
}

// IsLeaf reports whether op declares a value rather than computing one.
func (op Op) IsLeaf() bool { return op.Info().Class == ClassLeaf }

// InPlace reports whether op's result may take the memory of an argument of
// the same type (dtype and shape) whose last use is op: op is elementwise
// and its kernels read element i of every argument before they write
// element i of the result, and of no other element after that. A test in
// exec/cpu runs every such op with the result over each argument it may
// take.
func (op Op) InPlace() bool {
	info := op.Info()
	return (info.Class == ClassElementwise || info.ElementwiseKernel) && info.NoInPlace == ""
}

// InPlaceArg reports whether op's result may take the memory of its
// argument i, of the same type, when i's last use is op: every argument of
// an op that may run in place (InPlace), or one from OpInfo.InPlaceFrom on.
// A test in exec/cpu runs every such op with the result over each
// argument it may take.
func (op Op) InPlaceArg(i int) bool {
	from := op.Info().InPlaceFrom
	return op.InPlace() || from > 0 && i >= from
}

// Differentiable reports whether gradients flow through op.
func (op Op) Differentiable() bool { return op.Info().Grad != nil }

// Ops returns every op in table order.
func Ops() []Op {
	ops := make([]Op, 0, numOps-1)
	for op := Op(1); op < numOps; op++ {
		ops = append(ops, op)
	}
	return ops
}

// LookupOp returns the op named name.
func LookupOp(name string) (Op, bool) {
	for op := Op(1); op < numOps; op++ {
		if opTable[op].Name == name {
			return op, true
		}
	}
	return OpInvalid, false
}

// NearestOp returns the known op name closest to name in edit distance, for
// "did you mean" hints, or "" if none is close.
func NearestOp(name string) string {
	names := make([]string, 0, numOps)
	for op := Op(1); op < numOps; op++ {
		names = append(names, opTable[op].Name)
	}
	return nearest(name, names)
}

func nearest(name string, candidates []string) string {
	best, bestD := "", len(name)/2+2
	for _, c := range candidates {
		// The distance is at least the difference in length; skipping
		// those keeps a huge name from costing its length times each
		// candidate's.
		if len(name)-len(c) >= bestD || len(c)-len(name) >= bestD {
			continue
		}
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CheckArity reports whether op takes n arguments, saying what it takes
// when it does not.
func CheckArity(op Op, n int) error {
	info := op.Info()
	lo, hi := len(info.Args)-info.Optional, len(info.Args)
	switch {
	case info.Variadic && n >= lo:
		return nil
	case info.Variadic:
		return fmt.Errorf("%s takes at least %d argument(s) (%s...), found %d", op, lo, strings.Join(info.Args, ", "), n)
	case n >= lo && n <= hi:
		return nil
	case lo == hi:
		return fmt.Errorf("%s takes %d argument(s) (%s), found %d", op, hi, strings.Join(info.Args, ", "), n)
	}
	return fmt.Errorf("%s takes %d to %d arguments (%s; the last %d optional), found %d", op, lo, hi, strings.Join(info.Args, ", "), info.Optional, n)
}

// checkAttrs verifies attrs against the op's schema: known keys, right kinds,
// required keys present.
func checkAttrs(op Op, attrs Attrs) error {
	info := op.Info()
	for _, at := range attrs {
		spec := info.attrSpec(at.Key)
		if spec == nil {
			known := make([]string, len(info.Attrs))
			for i, s := range info.Attrs {
				known[i] = s.Name
			}
			if len(known) == 0 {
				return fmt.Errorf("%s takes no attributes, found %q", op, Excerpt(at.Key))
			}
			msg := fmt.Sprintf("%s has no attribute %q (known: %s)", op, Excerpt(at.Key), strings.Join(known, ", "))
			if n := nearest(at.Key, known); n != "" {
				msg += fmt.Sprintf("; did you mean %q?", n)
			}
			return fmt.Errorf("%s", msg)
		}
		if !kindFits(spec.Kind, at.Value) {
			return fmt.Errorf("%s attribute %s: expected %s, found %s", op, at.Key, spec.Kind, at.Value.describe())
		}
	}
	for _, s := range info.Attrs {
		if s.Required {
			if _, ok := attrs.Get(s.Name); !ok {
				return fmt.Errorf("%s needs attribute %s (%s)", op, s.Name, s.Kind)
			}
		}
	}
	if !sort.SliceIsSorted(attrs, func(i, j int) bool { return attrs[i].Key < attrs[j].Key }) {
		return fmt.Errorf("%s: attributes are not sorted by key", op)
	}
	return nil
}

func kindFits(k AttrKind, v AttrValue) bool {
	switch k {
	case AttrFloat:
		return v.Kind == AttrFloat || v.Kind == AttrInt
	case AttrList:
		return v.Kind == AttrList
	case attrNumbers:
		_, ok := v.AsFloats()
		return ok
	case attrInts:
		_, ok := v.AsInts()
		return ok && v.Kind == AttrList
	}
	return v.Kind == k
}

func (info *OpInfo) attrSpec(name string) *AttrSpec {
	for i := range info.Attrs {
		if info.Attrs[i].Name == name {
			return &info.Attrs[i]
		}
	}
	return nil
}

// Canonical returns attrs with every defaulted attribute filled in and ints
// given where floats are expected turned into floats, after checking them
// against the schema. The graph stores canonical attributes, so every
// consumer reads one spelling.
func Canonical(op Op, attrs Attrs) (Attrs, error) {
	if err := checkAttrs(op, attrs); err != nil {
		return nil, err
	}
	out := append(Attrs(nil), attrs...)
	for _, s := range op.Info().Attrs {
		v, ok := out.Get(s.Name)
		switch {
		case !ok && s.Default != nil:
			out = out.With(s.Name, *s.Default)
		case ok && s.Kind == AttrFloat && v.Kind == AttrInt:
			out = out.With(s.Name, Float(float64(v.I)))
		}
	}
	return out, nil
}

func defInt(v int) *AttrValue       { a := Int(v); return &a }
func defFloat(v float64) *AttrValue { a := Float(v); return &a }
func defBool(v bool) *AttrValue     { a := BoolAttr(v); return &a }
func defString(v string) *AttrValue { a := String(v); return &a }

var axesAttrs = []AttrSpec{
	{Name: "axes", Kind: attrInts, Doc: "axes to reduce (negative counts from the end); absent means all axes"},
	{Name: "keepdims", Kind: AttrBool, Default: defBool(false), Doc: "keep reduced axes with size 1"},
}

// opTable is the op table: one row per op. The rows are written next to the
// code of their family (coreOps below, mathOps in ops_math.go, ...) and
// gathered here once. It is filled in init because gradient rules reach
// back into the table through the graph they extend.
var opTable [numOps]OpInfo

// opRow is one row of the table with its op.
type opRow struct {
	op   Op
	info OpInfo
}

func init() {
	families := [][]opRow{coreOps(), mathOps(), activationOps(), lossOps(), reduceOps(), movementOps(), nnOps(), kanOps(), fusedPatternOps(), fusedElementwiseOps(), arrayOps(), attentionOps(), distOps(), fusedSoftmaxOps()}
	for _, rows := range families {
		for _, r := range rows {
			if opTable[r.op].Name != "" {
				panic(fmt.Sprintf("ir: op %d has two rows (%s and %s)", r.op, opTable[r.op].Name, r.info.Name))
			}
			opTable[r.op] = r.info
		}
	}
	opTable[OpInvalid] = OpInfo{Name: "invalid"}
}

func coreOps() []opRow {
	table := [numOps]OpInfo{

		OpInput: {Name: "input", Class: ClassLeaf, Doc: "a tensor fed at every step"},
		OpParam: {Name: "param", Class: ClassLeaf, Doc: "a trainable tensor; gradients are taken for every param not frozen",
			Attrs: []AttrSpec{
				{Name: "frozen", Kind: AttrBool, Doc: "true: the param keeps its initial value: no gradient, no optimizer state, no update"},
				{Name: "init", Kind: AttrString, Doc: `initializer: "zeros", "ones", "normal", "uniform" or "glorot"; absent: glorot for rank >= 2, zeros otherwise`},
				{Name: "scale", Kind: AttrFloat, Doc: `standard deviation for "normal", half-width for "uniform"`},
			}},
		OpState: {Name: "state", Class: ClassLeaf, Doc: "a persistent tensor that is not trained (optimizer state)",
			Attrs: []AttrSpec{
				{Name: "init", Kind: AttrFloat, Default: defFloat(0), Doc: "initial value of every element"},
				{Name: "period", Kind: AttrInt, Doc: "set on the counter of gradient accumulation: the steps of one update, which a trainer reads"},
			}},

		OpAdd: {Name: "add", Args: []string{"a", "b"}, Class: ClassElementwise, Doc: "a + b", Infer: inferBroadcast, Grad: gradAdd},
		OpSub: {Name: "sub", Args: []string{"a", "b"}, Class: ClassElementwise, Doc: "a - b", Infer: inferBroadcast, Grad: gradSub},
		OpMul: {Name: "mul", Args: []string{"a", "b"}, Class: ClassElementwise, Doc: "a * b", Infer: inferBroadcast, Grad: gradMul},
		OpDiv: {Name: "div", Args: []string{"a", "b"}, Class: ClassElementwise, Doc: "a / b (true division; floats only)", Infer: inferBroadcastFloat, Grad: gradDiv},

		OpNeg:      {Name: "neg", Args: []string{"x"}, Class: ClassElementwise, Doc: "-x", Infer: inferUnaryNumeric, Grad: gradNeg},
		OpExp:      {Name: "exp", Args: []string{"x"}, Class: ClassElementwise, Doc: "e^x", Infer: inferUnaryFloat, Grad: gradExp},
		OpLog:      {Name: "log", Args: []string{"x"}, Class: ClassElementwise, Doc: "natural logarithm", Infer: inferUnaryFloat, Grad: gradLog},
		OpSqrt:     {Name: "sqrt", Args: []string{"x"}, Class: ClassElementwise, Doc: "square root", Infer: inferUnaryFloat, Grad: gradSqrt},
		OpTanh:     {Name: "tanh", Args: []string{"x"}, Class: ClassElementwise, Doc: "hyperbolic tangent", Infer: inferUnaryFloat, Grad: gradTanh},
		OpSigmoid:  {Name: "sigmoid", Args: []string{"x"}, Class: ClassElementwise, Doc: "1 / (1 + e^-x)", Infer: inferUnaryFloat, Grad: gradSigmoid},
		OpRelu:     {Name: "relu", Args: []string{"x"}, Class: ClassElementwise, Doc: "max(x, 0), NaN for NaN (torch relu); gradient 0 at 0", Infer: inferUnaryFloat, Grad: gradRelu},
		OpReluGrad: {Name: "relu_grad", Args: []string{"dy", "x"}, Class: ClassElementwise, Doc: "0 where x <= 0, else dy, so dy where x is NaN (the gradient of relu; torch threshold_backward)", Infer: inferSameFloat, Grad: gradReluGrad},

		OpMatmul: {Name: "matmul", Args: []string{"a", "b"}, Doc: "matrix product with NumPy semantics: 1-D promotion, batched with broadcast batch dims; either operand may be read transposed (its last two axes swapped) without being copied", Infer: inferMatmul, Grad: gradMatmul,
			Attrs: matmulAttrs, Cost: costMatmul},
		OpTranspose: {Name: "transpose", Args: []string{"x"}, Doc: "permutes axes", Infer: inferTranspose, Grad: gradTranspose,
			Attrs: []AttrSpec{{Name: "perm", Kind: attrInts, Doc: "the new order of the axes; absent reverses them"}}},
		OpReshape: {Name: "reshape", Args: []string{"x"}, Doc: "same elements in row-major order, new shape", Infer: inferReshape, Grad: gradReshape,
			Attrs: []AttrSpec{{Name: "shape", Kind: attrInts, Required: true, Doc: "the new shape; one dimension may be -1"}}},
		OpBroadcastTo: {Name: "broadcast_to", Args: []string{"x"}, Doc: "repeats x along broadcast axes (NumPy rules)", Infer: inferBroadcastTo, Grad: gradBroadcastTo,
			Attrs: []AttrSpec{{Name: "shape", Kind: attrInts, Required: true, Doc: "the target shape"}}},

		OpSum:  {Name: "sum", Args: []string{"x"}, Class: ClassReduction, Attrs: axesAttrs, Doc: "sum over axes", Infer: inferReduce, Grad: gradSum},
		OpMean: {Name: "mean", Args: []string{"x"}, Class: ClassReduction, Attrs: axesAttrs, Doc: "mean over axes", Infer: inferReduceFloat, Grad: gradMean},

		OpSoftmax: {Name: "softmax", Args: []string{"x"}, Doc: "exp(x - max) / sum(exp(x - max)) along axis", Infer: inferAxisFloat, Grad: gradSoftmax, Cost: costPerElement(4),
			Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: defInt(-1), Doc: "the normalized axis"}}},
		OpLogSoftmax: {Name: "log_softmax", Args: []string{"x"}, Doc: "x - max - log(sum(exp(x - max))) along axis", Infer: inferAxisFloat, Grad: gradLogSoftmax, Cost: costPerElement(4),
			Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: defInt(-1), Doc: "the normalized axis"}}},

		OpConst: {Name: "const", Doc: "a constant tensor", Infer: inferConst,
			Attrs: []AttrSpec{
				{Name: "dtype", Kind: AttrString, Default: defString("f32"), Doc: "element type"},
				{Name: "shape", Kind: attrInts, Doc: "shape; absent: [] for a single value, [n] for a list of n"},
				{Name: "value", Kind: attrNumbers, Required: true, Doc: "one value (filled) or a row-major list of every element"},
			}},
		OpOneHot: {Name: "one_hot", Args: []string{"labels"}, Doc: "out[..., c] = 1 where labels[...] == c, else 0", Infer: inferOneHot, Indices: oneHotClasses,
			Attrs: []AttrSpec{
				{Name: "classes", Kind: AttrInt, Required: true, Doc: "number of classes"},
				{Name: "dtype", Kind: AttrString, Default: defString("f32"), Doc: "element type of the result"},
			}},
	}
	var rows []opRow
	for op, info := range table {
		if info.Name != "" {
			rows = append(rows, opRow{Op(op), info})
		}
	}
	return rows
}

// Schema-only kinds: an attribute's value is still an int, float or list,
// but the schema asks for more.
const (
	attrNumbers AttrKind = AttrList + 1 + iota // one number or a list of numbers
	attrInts                                   // a list of ints
)
