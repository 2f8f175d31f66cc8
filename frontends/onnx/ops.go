package onnx

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// Rule translates one ONNX op type: Emit makes the kiln ops (or a folded
// constant) for a node; Doc states the attribute rules and opset differences.
type Rule struct {
	Emit func(im *importer, n *onnxpb.NodeProto) ([]*val, error)
	Doc  string
}

// Ops is the translation table from ONNX op type (default domain) to kiln
// ops. docs/ONNX.md's op table is checked against it by a test.
var Ops map[string]Rule

func init() {
	Ops = map[string]Rule{
		"Add":     {binaryOp(ir.OpAdd), "add, NumPy broadcasting; folded when both inputs are constants"},
		"Sub":     {binaryOp(ir.OpSub), "sub, NumPy broadcasting; folded when both inputs are constants"},
		"Mul":     {binaryOp(ir.OpMul), "mul, NumPy broadcasting; folded when both inputs are constants"},
		"Div":     {binaryOp(ir.OpDiv), "div, NumPy broadcasting; folded when both inputs are constants (integers truncate)"},
		"Relu":    {unary(ir.OpRelu), "relu"},
		"Sigmoid": {unary(ir.OpSigmoid), "sigmoid"},
		"Tanh":    {unary(ir.OpTanh), "tanh"},
		"Log":     {unary(ir.OpLog), "log"},
		"Exp":     {unary(ir.OpExp), "exp"},
		"Sqrt":    {unary(ir.OpSqrt), "sqrt"},
		"Neg":     {unary(ir.OpNeg), "neg; folded on constants"},
		"Identity": {func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
			v, err := im.in(n, 0)
			return []*val{v}, err
		}, "the input itself"},
		"MatMul":                    {emitMatMul, "matmul (NumPy semantics)"},
		"Gemm":                      {emitGemm, "matmul {transpose_a=transA, transpose_b=transB}, times alpha, plus beta*C broadcast"},
		"Softmax":                   {softmax(ir.OpSoftmax), "softmax {axis}; opset >= 13: along axis (default -1); before 13: over the flattened axes from axis on (default 1), through reshapes"},
		"LogSoftmax":                {softmax(ir.OpLogSoftmax), "log_softmax {axis}; axis semantics as Softmax"},
		"Flatten":                   {emitFlatten, "reshape to [prod(dims before axis), prod(dims from axis)]; axis default 1, negative counts from the end"},
		"Reshape":                   {emitReshape, "reshape to the constant shape input (opset >= 5; 0 copies the input's dim unless allowzero=1, -1 is inferred); folded on constants"},
		"Transpose":                 {emitTranspose, "transpose {perm}; perm default reverses the axes; folded on constants"},
		"Conv":                      {emitConv, "conv1d/conv2d {stride, padding, dilation, groups}; 3-D as conv2d per depth tap on the depth slices folded into the batch, added; pads or auto_pad (SAME_UPPER, SAME_LOWER, VALID), the part that differs at the two ends as a pad op before; kernel_shape checked against the weight; 3-D: symmetric pads"},
		"MaxPool":                   {pool(ir.OpMaxPool2d), "max_pool2d {kernel, stride, padding, dilation}; 1-D through [N,C,1,L]; 3-D as max_pool2d per depth tap, maximum of the taps; pads or auto_pad, and ceil_mode, beyond the symmetric half-kernel part as a pad op before with the dtype's lowest finite value; no Indices output; strides default 1 as in ONNX; 3-D: symmetric pads, ceil_mode 0"},
		"AveragePool":               {pool(ir.OpAvgPool2d), "avg_pool2d {kernel, stride, padding, count_include_pad}; 1-D through [N,C,1,L]; 3-D as the mean of avg_pool2d per depth tap (padded only with count_include_pad=1); pads or auto_pad beyond the symmetric half-kernel part as zeros before (counted with count_include_pad=1; else the window sums over the window counts of the input's own elements, which also gives ceil_mode); count_include_pad default 0 as in ONNX"},
		"GlobalAveragePool":         {globalPool(ir.OpMean), "mean over the spatial axes, keepdims"},
		"Pad":                       {emitPad, "pad {pads, value} in mode constant; modes reflect, edge and wrap as slices, flips, broadcasts and a concat per axis (exact gradients); pads (and constant_value) from constant inputs at opset >= 11, attributes before; no axes input"},
		"BatchNormalization":        {emitBatchNorm, "training_mode=1 (opset >= 14): batch_norm with the batch's statistics; running mean and variance initializers become state that each training step updates as PyTorch's module does, momentum*running + (1-momentum)*batch with the batch's unbiased variance (ONNX's spec says the population variance), and outputs 1 and 2 are the updated values; otherwise the inference form (x - mean) / sqrt(var + eps) * scale + B with the running statistics as constants"},
		"Dropout":                   {emitDropout, "the input when not training (training_mode input absent or false; from opset 7 to 11 always; before 7 when is_test is set) or when ratio is 0, with a mask output of all true; in training mode dropout {p=ratio} (kiln's own random stream, not PyTorch's), whose mask output is not computed"},
		"SoftmaxCrossEntropyLoss":   {emitSCE, "softmax_cross_entropy {reduction} on scores [N,C] and labels [N]; with class weights, scores [N,C,d1,...] or an ignore_index in [0, C): log_softmax, the entry at each label (gather) times its weight (0 where ignored), summed, or divided by the weights' sum for mean; otherwise an ignore_index outside [0, C) (PyTorch's -100) is not looked for: softmax_cross_entropy refuses a label outside [0, C) when the model runs; the log_prob output is log_softmax"},
		"NegativeLogLikelihoodLoss": {emitNLL, "nll_loss {reduction} on [N,C] and labels [N]; weights, [N,C,d1,...] and ignore_index as SoftmaxCrossEntropyLoss"},
		"Constant":                  {emitConstant, "folded: value (a tensor), value_float(s) or value_int(s)"},
		"Shape":                     {emitShape, "folded: the static shape as i64, with start/end (opset >= 15)"},
		"Gather":                    {emitGather, "folded on constants; on a kiln value, index_select {axis} of the flattened indices and a reshape (a scalar index drops the axis); constant indices count negatives from the end, computed ones (token ids) must lie in [0, size)"},
		"Unsqueeze":                 {emitUnsqueeze, "reshape (unsqueeze); axes an attribute before opset 13, a constant input from 13; folded on constants"},
		"Squeeze":                   {emitSqueeze, "reshape (squeeze); axes an attribute before opset 13, a constant input from 13 (absent: every axis of size 1); folded on constants"},
		"Concat":                    {emitConcat, "concat {axis}; folded when every input is a constant"},
		"ConstantOfShape":           {emitConstantOfShape, "folded: a constant of the constant shape input, filled with value (default f32 0)"},
		// recurrent ops, unrolled over time (ops_recurrent.go)
		"RNN":  {emitRecurrent(cellRNN), recurrentDoc(cellRNN)},
		"GRU":  {emitRecurrent(cellGRU), recurrentDoc(cellGRU)},
		"LSTM": {emitRecurrent(cellLSTM), recurrentDoc(cellLSTM)},

		// Array ops (ops_array.go).
		"CastLike":        {emitCastLike, "cast {dtype} to the second input's dtype, as Cast (opset 15)"},
		"CumSum":          {emitCumSum, "cumsum {axis, exclusive, reverse}; axis a constant input"},
		"Trilu":           {emitTrilu, "trilu {upper, k}; k an optional constant input (default 0)"},
		"GatherElements":  {emitGatherElements, "gather {axis} (torch.gather); negative constant indices count from the end, a computed index must lie in [0, size)"},
		"ArgMax":          {emitArg(ir.OpArgmax), "argmax {axes=[axis], keepdims} (default 1); the first largest, or with select_last_index=1 the last (size-1 minus argmax of the axis flipped); a NaN is larger than any number"},
		"ArgMin":          {emitArg(ir.OpArgmin), "argmin {axes=[axis], keepdims} (default 1); the first smallest, or with select_last_index=1 the last (size-1 minus argmin of the axis flipped); a NaN is smaller than any number"},
		"ReduceProd":      {reduce(ir.OpProd, 18), "prod {axes, keepdims}; axes as ReduceMean"},
		"ReduceLogSumExp": {reduce(ir.OpLogSumExp, 18), "logsumexp {axes, keepdims}; axes as ReduceMean"},
		"Einsum":          {emitEinsum, "lowered to transpose, reshape, sum and one batched matmul per pair of operands (left to right); ellipsis, implicit output and diagonals (a letter repeated in one term: reshape and a strided slice) supported; a dim of 1 broadcasts against the letter's size elsewhere"},
		"ConvTranspose":   {emitConvTranspose, "conv_input_grad {stride, padding, dilation, groups, input_shape} (the adjoint of a convolution: gradients conv and conv_weight_grad), plus B per channel; 1-D and 2-D, and 3-D as the 2-D one per depth tap, spread along depth by the stride and added; pads (or output_shape, or auto_pad SAME_UPPER/SAME_LOWER) as ONNX says, a slice where they differ by a stride or more, zeros past the full result"},
		// Compositions of kiln ops (compose.go).
		"HardSigmoid":               {composed(emitHardSigmoid), "clip(alpha*x + beta, 0, 1) (alpha 0.2, beta 0.5)"},
		"HardSwish":                 {composed(emitHardSigmoid), "x * clip(x/6 + 0.5, 0, 1)"},
		"Selu":                      {composed(emitSelu), "gamma * elu {alpha}"},
		"Celu":                      {composed(emitCelu), "alpha * elu(x / alpha)"},
		"Softsign":                  {composed(emitSoftsign), "x / (1 + abs(x))"},
		"Mish":                      {composed(emitMish), "x * tanh(softplus(x)) (softplus threshold 20)"},
		"ThresholdedRelu":           {composed(emitThresholdedRelu), "where(x > alpha, x, 0) (alpha 1)"},
		"Tan":                       {composed(emitTan), "sin / cos"},
		"IsNaN":                     {composed(emitIsNaN), "not_equal x, x"},
		"IsInf":                     {composed(emitIsInf), "abs(x) (or x, or -x, as detect_positive and detect_negative say) greater than the largest finite value"},
		"PRelu":                     {emitPRelu, "prelu with one slope or one per channel ([C, 1, ...]); another broadcast slope as relu(x) + slope * (x - relu(x))"},
		"Sum":                       {variadic(ir.OpAdd), "add, folded left over the inputs"},
		"Mean":                      {emitVariadicMean, "add folded left over the inputs, divided by their number"},
		"ReduceL1":                  {reduceComposite(ir.OpAbs, ir.OpSum, ir.OpInvalid), "sum of abs {axes, keepdims}; axes as ReduceMean"},
		"ReduceL2":                  {reduceComposite(ir.OpSquare, ir.OpSum, ir.OpSqrt), "sqrt of the sum of squares {axes, keepdims}; axes as ReduceMean"},
		"ReduceSumSquare":           {reduceComposite(ir.OpSquare, ir.OpSum, ir.OpInvalid), "sum of squares {axes, keepdims}; axes as ReduceMean"},
		"ReduceLogSum":              {reduceComposite(ir.OpInvalid, ir.OpSum, ir.OpLog), "log of the sum {axes, keepdims}; axes as ReduceMean"},
		"GlobalMaxPool":             {globalPool(ir.OpMax), "max over the spatial axes, keepdims"},
		"Tile":                      {emitTile, "reshape, broadcast_to and reshape by the constant repeats"},
		"DepthToSpace":              {emitDepthToSpace, "reshape, transpose, reshape (modes DCR and CRD)"},
		"SpaceToDepth":              {emitSpaceToDepth, "reshape, transpose, reshape"},
		"Mod":                       {emitMod, "mod (the remainder with the divisor's sign) for fmod=0; sign(a) * mod(|a|, |b|) for fmod=1"},
		"Resize":                    {emitResize, "one matmul per resized axis by a constant matrix of interpolation weights (exact gradients); modes nearest, linear and cubic (cubic_coeff_a, exclude_outside), every coordinate_transformation_mode but tf_crop_and_resize, every nearest_mode; constant scales or sizes, no axes attribute; opset 10: scales, asymmetric coordinates, nearest by floor"},
		"Upsample":                  {emitResize, "as Resize at opset 10 (scales an attribute before opset 9, an input from 9)"},
		"Sinh":                      {composed(emitSinh), "(exp(x) - exp(-x)) / 2"},
		"Cosh":                      {composed(emitCosh), "(exp(x) + exp(-x)) / 2"},
		"Asinh":                     {composed(emitAsinh), "log(x + sqrt(x^2 + 1))"},
		"Acosh":                     {composed(emitAcosh), "log(x + sqrt(x^2 - 1))"},
		"Atanh":                     {composed(emitAtanh), "log((1 + x) / (1 - x)) / 2"},
		"LpNormalization":           {composed(emitLpNormalization), "x divided by its p-norm along axis (p 1 or 2, default 2; axis default -1)"},
		"MeanVarianceNormalization": {composed(emitMeanVarianceNormalization), "(x - mean) / (sqrt(biased variance) + 1e-9) over axes (default [0, 2, 3]), ONNX's function"},
		"Hardmax":                   {composed(emitHardmax), "one_hot of argmax along axis (the first largest; opset 13 semantics, axis default -1)"},
		"OneHot":                    {emitOneHot, "one_hot {classes=depth} (float indices cast to i64), times on - off plus off, the class axis moved to axis; constant indices count negatives from the end, computed ones must lie in [0, depth)"},
		"ScatterElements":           {emitScatterElements, "reduction add: scatter_add {axis}; none (the default): where an index points, scatter_add of the updates into zeros, else the input (exact for unique indices, as ONNX needs); negative constant indices count from the end"},
		"Size":                      {emitSize, "folded: the number of elements as an i64 scalar"},
		"Xor":                       {emitXor, "(a or b) and not (a and b)"},
		"GatherND":                  {emitGatherND, "index_select of rows of the data seen as [prod(batch and addressed dims), rest] (batch_dims supported); row numbers computed at import for constant indices (negatives from the end), else by integer mul and sum (CPU)"},
		"ScatterND":                 {emitScatterND, "index_add of the updates at the rows the indices name (reduction add); none: where a row is named, the updates, else the data (exact for unique indices)"},
		"TopK":                      {emitTopK, "k picks along the axis (k constant, at most onnx.MaxTopK): argmax (argmin when largest=0) of what is left, the value read by gather (exact gradients), the position masked; ties to the lower index; sorted"},
		"GridSample":                {emitGridSample, "bilinear (linear) or nearest sampling of [N,C,H,W] at a grid [N,Ho,Wo,2]: per corner a gather of the clamped pixel times its weight (0 outside the image: zeros padding; border clips the coordinates; reflection reflects them at the edges, then clips); align_corners as ONNX; exact gradients to the input and, through the weights, the grid; 2-D only"},
		"EyeLike":                   {emitEyeLike, "folded: ones on diagonal k"},
		"Compress":                  {emitCompress, "index_select of the positions where the constant condition is true (along axis, or of the flattened input)"},
		"LRN":                       {emitLRN, "x * (bias + alpha/size * the channel window's sum of squares)^-beta, the window as padded channel slices added"},
		"Shrink":                    {composed(emitShrink), "where(x < -lambd, x + bias, where(x > lambd, x - bias, 0))"},
		"LayerNormalization":        {emitLayerNormalization, "layer_norm {axes=[axis..], eps=epsilon}, times Scale plus B broadcast; the Mean and InvStdDev outputs, when used, from mean and rsqrt of the biased variance"},
		"InstanceNormalization":     {emitInstanceNormalization, "layer_norm {axes=[2..], eps=epsilon} (each sample and channel over its spatial axes), times scale plus B per channel"},
		"GroupNormalization":        {emitGroupNormalization, "reshape to [N, num_groups, rest], layer_norm {axes=[2], eps=epsilon}, reshape back, times scale plus bias per channel (opset 21) or per group (opset 18's [G] scale)"},
	}
	for _, rows := range []map[string]Rule{moreOps(), shapeOps(), backendOps()} {
		for k, r := range rows {
			if _, dup := Ops[k]; dup {
				panic("onnx: two rules for " + k) // a merge gave an op two rows
			}
			Ops[k] = r
		}
	}
}

// MaxFolded is the largest number of elements of a constant that import
// computes (ConstantOfShape): shape arithmetic is small, and a larger
// constant belongs in an initializer.
const MaxFolded = 1 << 20

// attribute helpers

func attr(n *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range n.Attribute {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

func attrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	if a := attr(n, name); a != nil {
		return a.GetI()
	}
	return def
}

func attrFloat(n *onnxpb.NodeProto, name string, def float64) float64 {
	if a := attr(n, name); a != nil {
		return float64(a.GetF())
	}
	return def
}

func attrString(n *onnxpb.NodeProto, name, def string) string {
	if a := attr(n, name); a != nil {
		return string(a.GetS())
	}
	return def
}

func attrInts(n *onnxpb.NodeProto, name string) ([]int, bool) {
	a := attr(n, name)
	if a == nil {
		return nil, false
	}
	out := make([]int, len(a.Ints))
	for k, x := range a.Ints {
		if x < -ir.MaxTensorBytes || x > ir.MaxTensorBytes {
			return nil, false
		}
		out[k] = int(x)
	}
	return out, true
}

// input access

// in returns input k of n (an error when it is absent or unknown).
func (im *importer) in(n *onnxpb.NodeProto, k int) (*val, error) {
	if k >= len(n.Input) || n.Input[k] == "" {
		return nil, fmt.Errorf("input %d is missing", k)
	}
	v, ok := im.env[n.Input[k]]
	if !ok {
		return nil, fmt.Errorf("input %q is neither a graph input, an initializer nor an earlier node's output", ir.Excerpt(n.Input[k]))
	}
	if v.missing != "" {
		return nil, errors.New(v.missing)
	}
	return v, nil
}

// isConst reports whether v is a constant known at import that is not a
// param.
func isConst(v *val) bool { return v.c != nil && !v.param }

func has(n *onnxpb.NodeProto, k int) bool { return k < len(n.Input) && n.Input[k] != "" }

// id returns input k as a kiln value (a float initializer becomes a param).
func (im *importer) id(n *onnxpb.NodeProto, k int) (ir.ID, error) {
	v, err := im.in(n, k)
	if err != nil {
		return ir.NoID, err
	}
	return im.value(v, true)
}

// ids returns inputs 0 to count-1 as kiln values, as id does.
func (im *importer) ids(n *onnxpb.NodeProto, count int) ([]ir.ID, error) {
	out := make([]ir.ID, count)
	for k := range out {
		id, err := im.id(n, k)
		if err != nil {
			return nil, err
		}
		out[k] = id
	}
	return out, nil
}

// constIn returns input k, which must be known at import.
func (im *importer) constIn(n *onnxpb.NodeProto, k int) (*tensor, error) {
	v, err := im.in(n, k)
	if err != nil {
		return nil, err
	}
	if v.c == nil {
		return nil, fmt.Errorf("input %d (%q) must be a constant known at import (shape arithmetic on constants), but it is computed from graph inputs", k, ir.Excerpt(v.name))
	}
	return v.c, nil
}

func (im *importer) add(op ir.Op, attrs ir.Attrs, args ...ir.ID) (*val, error) {
	id, err := im.g.Add("", op, attrs, args...)
	if err != nil {
		return nil, err
	}
	return &val{id: id}, nil
}

func one(v *val, err error) ([]*val, error) {
	if err != nil {
		return nil, err
	}
	return []*val{v}, nil
}

func (im *importer) shapeOf(id ir.ID) []int { return []int(im.g.Type(id).Shape) }

// normAxis maps a possibly negative axis into [0, rank).
func normAxis(axis, rank int) (int, error) {
	if axis < -rank || axis >= rank {
		return 0, fmt.Errorf("axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += rank
	}
	return axis, nil
}

// emitters

func unary(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		if v, err := im.in(n, 0); err == nil && op == ir.OpNeg && v.c != nil && !v.param {
			return []*val{{id: ir.NoID, c: negConst(v.c)}}, nil // shape arithmetic
		}
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		return one(im.add(op, nil, x))
	}
}

// negConst negates a constant as the kernel would (integers wrap).
func negConst(c *tensor) *tensor {
	c.load()
	out := &tensor{dt: c.dt, shape: c.shape}
	for _, x := range c.f {
		if c.dt == ir.F32 {
			r, _ := ir.Arith(ir.OpNeg, float32(x), 0)
			out.f = append(out.f, float64(r))
		} else {
			out.f = append(out.f, -x)
		}
	}
	for _, x := range c.i {
		if c.dt == ir.I32 {
			out.i = append(out.i, int64(-int32(x)))
		} else {
			out.i = append(out.i, -x)
		}
	}
	return out
}

func binaryOp(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		a, err := im.in(n, 0)
		if err != nil {
			return nil, err
		}
		b, err := im.in(n, 1)
		if err != nil {
			return nil, err
		}
		if folds(op) && isConst(a) && isConst(b) {
			c, err := foldBinary(op, a.c, b.c)
			if err != nil {
				return nil, err
			}
			return []*val{{id: ir.NoID, c: c}}, nil
		}
		x, err := im.value(a, true)
		if err != nil {
			return nil, err
		}
		y, err := im.value(b, true)
		if err != nil {
			return nil, err
		}
		if y, err = im.legacyBroadcast(n, x, y); err != nil {
			return nil, err
		}
		return one(im.add(op, nil, x, y))
	}
}

// folds reports whether foldBinary computes op.
func folds(op ir.Op) bool {
	switch op {
	case ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv,
		ir.OpEqual, ir.OpLess, ir.OpLessEqual, ir.OpGreater, ir.OpGreaterEqual:
		return true
	}
	return false
}

// foldBinary computes a op b on constants of one dtype with NumPy
// broadcasting: add, sub, mul and div through ir.Arith (so an f32 constant
// is rounded as the kernel would; integer division truncates, as ONNX's
// does), and the comparisons, which give bools.
func foldBinary(op ir.Op, a, b *tensor) (*tensor, error) {
	a.load()
	b.load()
	if a.dt != b.dt {
		return nil, fmt.Errorf("operands of different dtypes %s and %s", a.dt, b.dt)
	}
	shape, ok := ir.BroadcastShapes(ir.Shape(a.shape), ir.Shape(b.shape))
	if !ok {
		return nil, fmt.Errorf("shapes %v and %v do not broadcast", a.shape, b.shape)
	}
	if shape.NumElements() > MaxFolded {
		return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", shape, shape.NumElements(), MaxFolded)
	}
	a, b = broadcastConst(a, shape), broadcastConst(b, shape)
	n := shape.NumElements()
	if cmp := foldCompare(op); cmp != nil {
		out := &tensor{dt: ir.Bool, shape: []int(shape), i: make([]int64, n)}
		for k := range n {
			var c int
			if a.dt.IsFloat() {
				x, y := a.f[k], b.f[k]
				if x != x || y != y { // NaN: every comparison but != is false
					continue
				}
				c = cmpFloat(x, y)
			} else {
				c = cmpInt(a.i[k], b.i[k])
			}
			if cmp(c) {
				out.i[k] = 1
			}
		}
		return out, nil
	}
	out := &tensor{dt: a.dt, shape: []int(shape)}
	if a.dt.IsFloat() {
		out.f = make([]float64, n)
		for k := range n {
			x, y := a.f[k], b.f[k]
			if a.dt == ir.F32 {
				r, _ := ir.Arith(op, float32(x), float32(y))
				out.f[k] = float64(r)
			} else {
				out.f[k], _ = ir.Arith(op, x, y)
			}
		}
		return out, nil
	}
	out.i = make([]int64, n)
	for k := range n {
		x, y := a.i[k], b.i[k]
		switch {
		case op != ir.OpDiv && a.dt == ir.I32:
			r, _ := ir.Arith(op, int32(x), int32(y))
			out.i[k] = int64(r)
		case op != ir.OpDiv:
			out.i[k], _ = ir.Arith(op, x, y)
		case y == 0:
			return nil, errors.New("integer division by zero in folded constants")
		default:
			out.i[k] = x / y // ONNX's integer Div truncates, as Go's does
		}
	}
	return out, nil
}

// foldCompare returns, for a comparison op, whether it holds given the
// sign of a - b; nil for other ops.
func foldCompare(op ir.Op) func(c int) bool {
	switch op {
	case ir.OpEqual:
		return func(c int) bool { return c == 0 }
	case ir.OpLess:
		return func(c int) bool { return c < 0 }
	case ir.OpLessEqual:
		return func(c int) bool { return c <= 0 }
	case ir.OpGreater:
		return func(c int) bool { return c > 0 }
	case ir.OpGreaterEqual:
		return func(c int) bool { return c >= 0 }
	}
	return nil
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func cmpInt(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func emitMatMul(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	a, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	b, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpMatmul, nil, a, b))
}

func (im *importer) scale(x ir.ID, s float64) (ir.ID, error) {
	if s == 1 {
		return x, nil
	}
	c, err := im.constOp(&tensor{dt: im.g.Type(x).DType, shape: []int{}, f: []float64{s}})
	if err != nil {
		return ir.NoID, err
	}
	return im.g.Add("", ir.OpMul, nil, x, c)
}

func emitGemm(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	a, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	b, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	attrs := ir.MakeAttrs("transpose_a", ir.BoolAttr(attrInt(n, "transA", 0) != 0), "transpose_b", ir.BoolAttr(attrInt(n, "transB", 0) != 0))
	y, err := im.g.Add("", ir.OpMatmul, attrs, a, b)
	if err != nil {
		return nil, err
	}
	if y, err = im.scale(y, attrFloat(n, "alpha", 1)); err != nil {
		return nil, err
	}
	if has(n, 2) {
		c, err := im.id(n, 2)
		if err != nil {
			return nil, err
		}
		if c, err = im.scale(c, attrFloat(n, "beta", 1)); err != nil {
			return nil, err
		}
		if y, err = im.g.Add("", ir.OpAdd, nil, y, c); err != nil {
			return nil, err
		}
	}
	return []*val{{id: y}}, nil
}

func prod(s []int) int {
	p := 1
	for _, d := range s {
		p *= d
	}
	return p
}

func softmax(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		shape := im.shapeOf(x)
		if im.opset >= 13 {
			axis, err := normAxis(int(attrInt(n, "axis", -1)), len(shape))
			if err != nil {
				return nil, err
			}
			return one(im.add(op, ir.MakeAttrs("axis", ir.Int(axis)), x))
		}
		axis, err := normAxis(int(attrInt(n, "axis", 1)), len(shape))
		if err != nil {
			return nil, err
		}
		flat, err := im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(shape[:axis]), prod(shape[axis:]))), x)
		if err != nil {
			return nil, err
		}
		y, err := im.g.Add("", op, ir.MakeAttrs("axis", ir.Int(1)), flat)
		if err != nil {
			return nil, err
		}
		return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), y))
	}
}

func emitFlatten(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOf(x)
	axis := int(attrInt(n, "axis", 1))
	if axis != len(shape) {
		if axis, err = normAxis(axis, len(shape)); err != nil {
			return nil, err
		}
	}
	return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(shape[:axis]), prod(shape[axis:]))), x))
}

func emitReshape(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	var want []int64
	if im.opset < 5 {
		s, _ := attrInts(n, "shape")
		for _, d := range s {
			want = append(want, int64(d))
		}
	} else {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		want = c.ints()
	}
	in := im.shapeOfVal(v)
	allowZero := attrInt(n, "allowzero", 0) != 0
	shape := make([]int, len(want))
	infer := -1
	for k, d := range want {
		switch {
		case d == 0 && !allowZero:
			if k >= len(in) {
				return nil, fmt.Errorf("shape %v copies dim %d, but the input has rank %d", want, k, len(in))
			}
			shape[k] = in[k]
		case d == -1 && infer < 0:
			infer = k
		case d < 0 || d > ir.MaxTensorBytes:
			return nil, fmt.Errorf("shape %v has an invalid dim %d", want, d)
		default:
			shape[k] = int(d)
		}
	}
	if infer >= 0 {
		shape[infer] = 1
		rest := prod(shape)
		if rest == 0 || prod(in)%rest != 0 {
			return nil, fmt.Errorf("cannot infer the -1 dim of shape %v for input shape %v", want, in)
		}
		shape[infer] = prod(in) / rest
	}
	if prod(shape) != prod(in) {
		return nil, fmt.Errorf("cannot reshape %v to %v", in, shape)
	}
	if isConst(v) {
		return []*val{{id: ir.NoID, c: reshapeConst(v.c, shape)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), x))
}

func emitTranspose(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	if v.c != nil && !v.param {
		return foldTranspose(n, v.c)
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	perm, ok := attrInts(n, "perm")
	if !ok {
		r := len(im.shapeOf(x))
		perm = make([]int, r)
		for k := range perm {
			perm[k] = r - 1 - k
		}
	}
	return one(im.add(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), x))
}

// spatial returns the kiln padding of ONNX pads [b1.., e1..] for d spatial
// axes, which must be equal at both ends.
func spatial(n *onnxpb.NodeProto, d int) ([]int, error) {
	if ap := attrString(n, "auto_pad", "NOTSET"); ap != "NOTSET" {
		return nil, fmt.Errorf("auto_pad %q is not supported (only NOTSET with explicit pads)", ir.Excerpt(ap))
	}
	pads, ok := attrInts(n, "pads")
	if !ok {
		return make([]int, d), nil
	}
	if len(pads) != 2*d {
		return nil, fmt.Errorf("expected %d pads, found %d", 2*d, len(pads))
	}
	for k := range d {
		if pads[k] != pads[k+d] {
			return nil, fmt.Errorf("pads %v differ at the two ends of axis %d; only symmetric padding is supported", pads, k)
		}
	}
	return pads[:d], nil
}

func intsOr(n *onnxpb.NodeProto, name string, d, def int) []int {
	if v, ok := attrInts(n, name); ok {
		return v
	}
	out := make([]int, d)
	for k := range out {
		out[k] = def
	}
	return out
}

func emitConv(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	w, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	ws := im.shapeOf(w)
	d := len(ws) - 2
	var op ir.Op
	switch d {
	case 1:
		op = ir.OpConv1d
	case 2:
		op = ir.OpConv2d
	case 3:
		return emitConv3d(im, n, x, w) // conv3d.go
	default:
		return nil, fmt.Errorf("%d-D convolution is not supported (1-D, 2-D and 3-D are)", d)
	}
	if ks, ok := attrInts(n, "kernel_shape"); ok && !ir.Shape(ks).Equal(ir.Shape(ws[2:])) {
		return nil, fmt.Errorf("kernel_shape %v does not match the weight's shape %v", ks, ws)
	}
	stride, dil := intsOr(n, "strides", d, 1), intsOr(n, "dilations", d, 1)
	if len(stride) != d || len(dil) != d {
		return nil, fmt.Errorf("expected %d strides and dilations, found %v and %v", d, stride, dil)
	}
	x, pad, _, err := im.windowPads(n, x, ws[2:], stride, dil, 0, false, true, false) // pads.go
	if err != nil {
		// auto_pad or pads that differ at the two ends: a pad op first.
		if x, pad, err = im.convPad(n, x, ws); err != nil {
			return nil, err
		}
	}
	attrs := ir.MakeAttrs("stride", ir.Ints(stride...), "padding", ir.Ints(pad...),
		"dilation", ir.Ints(dil...), "groups", ir.Int(int(attrInt(n, "group", 1))))
	args := []ir.ID{x, w}
	if has(n, 2) {
		b, err := im.id(n, 2)
		if err != nil {
			return nil, err
		}
		args = append(args, b)
	}
	return one(im.add(op, attrs, args...))
}

func pool(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		if out, ok, err := im.poolGeneral(op, n, x); ok {
			return out, err
		}
		if len(n.Output) > 1 && n.Output[1] != "" {
			return nil, errors.New("the Indices output is not supported")
		}
		kernel, ok := attrInts(n, "kernel_shape")
		if !ok || len(kernel) < 1 || len(kernel) > 3 {
			return nil, fmt.Errorf("expected a 1-D, 2-D or 3-D kernel_shape, found %v", kernel)
		}
		if len(kernel) == 1 {
			return pool1d(im, n, op, x) // pads.go
		}
		if len(kernel) == 3 {
			if attrInt(n, "ceil_mode", 0) != 0 {
				return nil, errors.New("ceil_mode 1 is not supported for 3-D pooling")
			}
			return pool3d(im, n, op, x, kernel) // conv3d.go
		}
		stride, dil := intsOr(n, "strides", 2, 1), intsOr(n, "dilations", 2, 1)
		if len(stride) != 2 || len(dil) != 2 {
			return nil, fmt.Errorf("expected 2 strides and dilations, found %v and %v", stride, dil)
		}
		include := attrInt(n, "count_include_pad", 0) != 0
		fill := 0.0
		if op == ir.OpMaxPool2d {
			fill = im.lowest(x)
		}
		orig := x
		x, pad, pre, err := im.windowPads(n, x, kernel, stride, dil, fill, true, true, op == ir.OpMaxPool2d || !include) // pads.go
		if err != nil {
			return nil, err
		}
		if op == ir.OpAvgPool2d && !include && pre != nil {
			return avgPoolCounted(im, orig, x, kernel, stride, pad, pre) // pads.go
		}
		attrs := ir.MakeAttrs("kernel", ir.Ints(kernel...), "stride", ir.Ints(stride...), "padding", ir.Ints(pad...))
		if op == ir.OpMaxPool2d {
			if attrInt(n, "storage_order", 0) != 0 {
				return nil, errors.New("storage_order 1 is not supported")
			}
			attrs = attrs.With("dilation", ir.Ints(dil...))
		} else {
			attrs = attrs.With("count_include_pad", ir.BoolAttr(attrInt(n, "count_include_pad", 0) != 0))
		}
		return one(im.add(op, attrs, x))
	}
}

// globalPool is GlobalAveragePool (op mean) or GlobalMaxPool (op max): op
// over the spatial axes, keeping them.
func globalPool(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		r := len(im.shapeOf(x))
		if r < 3 {
			return nil, fmt.Errorf("expected an input of rank >= 3, found rank %d", r)
		}
		axes := make([]int, 0, r-2)
		for k := 2; k < r; k++ {
			axes = append(axes, k)
		}
		return one(im.add(op, ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true)), x))
	}
}

func emitPad(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	mode := attrString(n, "mode", "constant")
	if mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap" {
		return nil, fmt.Errorf("mode %q is not supported (constant, reflect, edge, wrap)", ir.Excerpt(mode))
	}
	var pads []int
	value := 0.0
	if im.opset < 11 {
		if im.opset < 2 {
			pads, _ = attrInts(n, "paddings") // Pad-1's name
		} else {
			pads, _ = attrInts(n, "pads")
		}
		value = attrFloat(n, "value", 0)
	} else {
		if has(n, 3) {
			return nil, errors.New("the axes input is not supported")
		}
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		for _, p := range c.ints() {
			pads = append(pads, int(p))
		}
		if has(n, 2) {
			v, err := im.constIn(n, 2)
			if err != nil {
				return nil, err
			}
			if v.n() > 0 {
				value = v.floats()[0]
			}
		}
	}
	r := len(im.shapeOf(x))
	if len(pads) != 2*r {
		return nil, fmt.Errorf("expected %d pads for rank %d, found %d", 2*r, r, len(pads))
	}
	if mode != "constant" {
		return padMode(im, x, mode, pads)
	}
	// ONNX: [b_0 .. b_r-1, e_0 .. e_r-1]; kiln: pairs from the last axis.
	kp := make([]int, 0, 2*r)
	for k := r - 1; k >= 0; k-- {
		kp = append(kp, pads[k], pads[k+r])
	}
	return one(im.add(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(kp...), "value", ir.Float(value)), x))
}

func emitBatchNorm(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	eps := attrFloat(n, "epsilon", 1e-5)
	if im.opset < 9 && attrInt(n, "spatial", 1) == 0 {
		return nil, errors.New("spatial=0 (statistics per activation) is not supported")
	}
	training := im.opset >= 14 && attrInt(n, "training_mode", 0) != 0
	if training {
		w, err := im.id(n, 1)
		if err != nil {
			return nil, err
		}
		b, err := im.id(n, 2)
		if err != nil {
			return nil, err
		}
		y, err := im.add(ir.OpBatchNorm, ir.MakeAttrs("eps", ir.Float(eps)), x, w, b)
		if err != nil {
			return nil, err
		}
		mean, vr, err := im.runningStats(n, x)
		if err != nil {
			return nil, err
		}
		return []*val{y, mean, vr}, nil
	}
	r := len(im.shapeOf(x))
	if r < 2 {
		return nil, fmt.Errorf("expected an input of rank >= 2, found rank %d", r)
	}
	// Per-channel vectors broadcast as [C, 1, ..., 1].
	chan_ := func(k int, asParam bool) (ir.ID, error) {
		v, err := im.in(n, k)
		if err != nil {
			return ir.NoID, err
		}
		id, err := im.value(v, asParam)
		if err != nil {
			return ir.NoID, err
		}
		s := append([]int{im.shapeOf(id)[0]}, make([]int, r-2)...)
		for j := 1; j < len(s); j++ {
			s[j] = 1
		}
		return im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s...)), id)
	}
	scale, err := chan_(1, true)
	if err != nil {
		return nil, err
	}
	bias, err := chan_(2, true)
	if err != nil {
		return nil, err
	}
	mean, err := chan_(3, false)
	if err != nil {
		return nil, err
	}
	vr, err := chan_(4, false)
	if err != nil {
		return nil, err
	}
	epsC, err := im.constOp(&tensor{dt: im.g.Type(x).DType, shape: []int{}, f: []float64{eps}})
	if err != nil {
		return nil, err
	}
	d, err := im.g.Add("", ir.OpSub, nil, x, mean)
	if err != nil {
		return nil, err
	}
	ve, err := im.g.Add("", ir.OpAdd, nil, vr, epsC)
	if err != nil {
		return nil, err
	}
	rs, err := im.g.Add("", ir.OpRsqrt, nil, ve)
	if err != nil {
		return nil, err
	}
	if d, err = im.g.Add("", ir.OpMul, nil, d, rs); err != nil {
		return nil, err
	}
	if d, err = im.g.Add("", ir.OpMul, nil, d, scale); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpAdd, nil, d, bias))
}

// runningStats makes the running mean and variance (inputs 3 and 4) of a
// training-mode BatchNormalization state, updated by each step as
// PyTorch's BatchNorm updates them: running = momentum*running +
// (1-momentum)*batch, with the ONNX momentum attribute (PyTorch's 1 -
// momentum) and, for the variance, the batch's unbiased variance, as
// PyTorch (ONNX's spec says the population variance; kiln follows the
// exporter). It returns the updated values, the node's outputs 1 and 2.
// Statistics that are not initializers (graph inputs, computed values) are
// not updated: outputs 1 and 2 are then missing.
func (im *importer) runningStats(n *onnxpb.NodeProto, x ir.ID) (*val, *val, error) {
	if !has(n, 3) || !has(n, 4) {
		return nil, nil, nil
	}
	xt := im.g.Type(x)
	r := len(xt.Shape)
	if r < 2 {
		return nil, nil, fmt.Errorf("expected an input of rank >= 2, found rank %d", r)
	}
	axes := []int{0}
	for k := 2; k < r; k++ {
		axes = append(axes, k)
	}
	momentum := attrFloat(n, "momentum", 0.9)
	var outs [2]*val
	for k, op := range []ir.Op{ir.OpMean, ir.OpVar} {
		v, err := im.in(n, 3+k)
		if err != nil {
			return nil, nil, err
		}
		if v.id != ir.NoID && im.g.Value(v.id).Op == ir.OpState {
			return nil, nil, fmt.Errorf("running statistic %q is updated by two nodes", ir.Excerpt(v.name))
		}
		if v.id != ir.NoID || v.c == nil || !v.param {
			return nil, nil, nil // not an initializer: not updated
		}
		t := ir.Type{DType: v.c.dt, Shape: ir.Shape(v.c.shape).Clone()}
		if t.DType != xt.DType || len(t.Shape) != 1 || t.Shape[0] != xt.Shape[1] {
			return nil, nil, fmt.Errorf("running statistic %q is %s; expected %s[%d], the input's channels", ir.Excerpt(v.name), t, xt.DType, xt.Shape[1])
		}
		name := im.sanitize(v.name)
		st, err := im.g.Leaf(ir.OpState, name, t, ir.MakeAttrs("init", ir.Float(float64(k))))
		if err != nil {
			return nil, nil, err
		}
		im.states = append(im.states, safetensors.Tensor{Name: name, Type: t, Data: v.c.bytes()})
		v.id, v.param = st, false
		attrs := ir.MakeAttrs("axes", ir.Ints(axes...))
		if op == ir.OpVar {
			attrs = attrs.With("correction", ir.Float(1))
		}
		batch, err := im.g.Add("", op, attrs, x)
		if err != nil {
			return nil, nil, err
		}
		m, err := im.constOp(&tensor{dt: t.DType, shape: []int{}, f: []float64{momentum}})
		if err != nil {
			return nil, nil, err
		}
		m1, err := im.constOp(&tensor{dt: t.DType, shape: []int{}, f: []float64{1 - momentum}})
		if err != nil {
			return nil, nil, err
		}
		a, err := im.g.Add("", ir.OpMul, nil, st, m)
		if err != nil {
			return nil, nil, err
		}
		bm, err := im.g.Add("", ir.OpMul, nil, batch, m1)
		if err != nil {
			return nil, nil, err
		}
		next, err := im.g.Add("", ir.OpAdd, nil, a, bm)
		if err != nil {
			return nil, nil, err
		}
		im.g.Updates = append(im.g.Updates, ir.Update{Target: st, Value: next})
		outs[k] = &val{id: next}
	}
	return outs[0], outs[1], nil
}

func emitDropout(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	ratio := attrFloat(n, "ratio", 0.5)
	training := false
	if im.opset >= 12 {
		if has(n, 1) {
			c, err := im.constIn(n, 1)
			if err != nil {
				return nil, err
			}
			if c.n() > 0 {
				ratio = c.floats()[0]
			}
		}
		if has(n, 2) {
			c, err := im.constIn(n, 2)
			if err != nil {
				return nil, err
			}
			training = c.n() > 0 && c.floats()[0] != 0
		}
	}
	if im.opset < 7 {
		training = attrInt(n, "is_test", 0) == 0 // Dropout-1 and -6 train unless is_test
	}
	if !training || ratio == 0 {
		if len(n.Output) > 1 && n.Output[1] != "" {
			mask, err := keepAll(im.shapeOfVal(x))
			return []*val{x, mask}, err
		}
		return []*val{x}, nil
	}
	id, err := im.value(x, true)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpDropout, ir.MakeAttrs("p", ir.Float(ratio)), id))
}

func lossArgs(im *importer, n *onnxpb.NodeProto) (ir.ID, ir.ID, ir.Attrs, error) {
	if has(n, 2) {
		return ir.NoID, ir.NoID, nil, errors.New("class weights are not supported")
	}
	x, err := im.id(n, 0)
	if err != nil {
		return ir.NoID, ir.NoID, nil, err
	}
	l, err := im.id(n, 1)
	if err != nil {
		return ir.NoID, ir.NoID, nil, err
	}
	xs := im.shapeOf(x)
	if len(xs) != 2 {
		return ir.NoID, ir.NoID, nil, fmt.Errorf("expected scores of rank 2 [N,C], found %v", xs)
	}
	if a := attr(n, "ignore_index"); a != nil && a.GetI() >= 0 && a.GetI() < int64(xs[1]) {
		return ir.NoID, ir.NoID, nil, fmt.Errorf("ignore_index %d is a class (in [0, %d)); skipping labels is not supported", a.GetI(), xs[1])
	}
	red := attrString(n, "reduction", "mean")
	switch red {
	case "mean", "sum", "none":
	default:
		return ir.NoID, ir.NoID, nil, fmt.Errorf("unknown reduction %q", ir.Excerpt(red))
	}
	return x, l, ir.MakeAttrs("reduction", ir.String(red)), nil
}

func emitSCE(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if im.lossNeedsComposition(n) {
		return emitLossComposed(im, n, true) // losses.go
	}
	x, l, attrs, err := lossArgs(im, n)
	if err != nil {
		return nil, err
	}
	loss, err := im.add(ir.OpSoftmaxCrossEntropy, attrs, x, l)
	if err != nil {
		return nil, err
	}
	outs := []*val{loss}
	if len(n.Output) > 1 && n.Output[1] != "" {
		lp, err := im.add(ir.OpLogSoftmax, ir.MakeAttrs("axis", ir.Int(1)), x)
		if err != nil {
			return nil, err
		}
		outs = append(outs, lp)
	}
	return outs, nil
}

func emitNLL(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if im.lossNeedsComposition(n) {
		return emitLossComposed(im, n, false) // losses.go
	}
	x, l, attrs, err := lossArgs(im, n)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpNLLLoss, attrs, x, l))
}

func emitConstant(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if len(n.Attribute) != 1 {
		return nil, fmt.Errorf("expected exactly one value attribute, found %d", len(n.Attribute))
	}
	a := n.Attribute[0]
	var c *tensor
	switch a.GetName() {
	case "value":
		var err error
		if c, err = im.readTensor(a.GetT(), false); err != nil {
			return nil, err
		}
	case "value_float":
		c = &tensor{dt: ir.F32, shape: []int{}, f: []float64{float64(a.GetF())}}
	case "value_floats":
		c = &tensor{dt: ir.F32, shape: []int{len(a.Floats)}}
		for _, x := range a.Floats {
			c.f = append(c.f, float64(x))
		}
	case "value_int":
		c = &tensor{dt: ir.I64, shape: []int{}, i: []int64{a.GetI()}}
	case "value_ints":
		c = &tensor{dt: ir.I64, shape: []int{len(a.Ints)}, i: append([]int64(nil), a.Ints...)}
	default:
		return nil, fmt.Errorf("attribute %q is not supported", ir.Excerpt(a.GetName()))
	}
	return []*val{{id: ir.NoID, c: c}}, nil
}

// shapeOfVal returns the static shape of a value.
func (im *importer) shapeOfVal(v *val) []int {
	if v.id != ir.NoID {
		return im.shapeOf(v.id)
	}
	return v.c.shape
}

func emitShape(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOfVal(v)
	r := len(s)
	start, end := 0, r
	if im.opset >= 15 {
		clamp := func(x int64) int {
			if x < 0 {
				x += int64(r)
			}
			return int(min(max(x, 0), int64(r)))
		}
		start, end = clamp(attrInt(n, "start", 0)), clamp(attrInt(n, "end", int64(r)))
	}
	c := &tensor{dt: ir.I64, shape: []int{max(end-start, 0)}}
	for k := start; k < end; k++ {
		c.i = append(c.i, int64(s[k]))
	}
	return []*val{{id: ir.NoID, c: c}}, nil
}

func emitGather(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	data, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	iv, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOfVal(data)
	axis, err := normAxis(int(attrInt(n, "axis", 0)), len(shape))
	if err != nil {
		return nil, err
	}
	// The result has shape data[:axis] + indices.shape + data[axis+1:]:
	// index_select on the flattened indices, reshaped.
	ishape := im.shapeOfVal(iv)
	outShape := append(append(append([]int(nil), shape[:axis]...), ishape...), shape[axis+1:]...)
	gather := func(x, ix ir.ID) ([]*val, error) {
		if len(ishape) != 1 {
			var err error
			if ix, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(ishape))), ix); err != nil {
				return nil, err
			}
		}
		y, err := im.g.Add("", ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(axis)), x, ix)
		if err != nil || len(ishape) == 1 {
			return []*val{{id: y}}, err
		}
		return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(outShape...)), y))
	}
	if iv.c == nil {
		// Computed indices (token ids): they must lie in [0, size), which
		// index_select checks when the model runs.
		x, err := im.value(data, true)
		if err != nil {
			return nil, err
		}
		ix, err := im.value(iv, false)
		if err != nil {
			return nil, err
		}
		return gather(x, ix)
	}
	idx := iv.c
	ids := append([]int64(nil), idx.ints()...)
	for k, i := range ids {
		if i < 0 {
			i += int64(shape[axis])
		}
		if i < 0 || i >= int64(shape[axis]) {
			return nil, fmt.Errorf("index %d is out of range for axis %d of size %d", idx.ints()[k], axis, shape[axis])
		}
		ids[k] = i
	}
	if data.c != nil && !data.param {
		if k := prod(outShape); k > MaxFolded {
			return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", outShape, k, MaxFolded)
		}
		// Folded.
		data.c.load()
		outer, inner := prod(shape[:axis]), prod(shape[axis+1:])
		out := &tensor{dt: data.c.dt, shape: outShape}
		for o := range outer {
			for _, i := range ids {
				base := (o*shape[axis] + int(i)) * inner
				if out.dt.IsFloat() {
					out.f = append(out.f, data.c.f[base:base+inner]...)
				} else {
					out.i = append(out.i, data.c.i[base:base+inner]...)
				}
			}
		}
		return []*val{{id: ir.NoID, c: out}}, nil
	}
	x, err := im.value(data, true)
	if err != nil {
		return nil, err
	}
	ic, err := im.constOp(&tensor{dt: ir.I64, shape: append([]int{}, ishape...), i: ids})
	if err != nil {
		return nil, err
	}
	return gather(x, ic)
}

// axesIn returns the axes of Squeeze/Unsqueeze: an attribute before opset
// 13, the optional constant input 1 from 13.
func (im *importer) axesIn(n *onnxpb.NodeProto) ([]int, bool, error) {
	if im.opset < 13 {
		a, ok := attrInts(n, "axes")
		return a, ok, nil
	}
	if !has(n, 1) {
		return nil, false, nil
	}
	c, err := im.constIn(n, 1)
	if err != nil {
		return nil, false, err
	}
	out := make([]int, c.n())
	for k, x := range c.ints() {
		out[k] = int(x)
	}
	return out, true, nil
}

func reshapeConst(c *tensor, shape []int) *tensor {
	c.load()
	return &tensor{dt: c.dt, shape: shape, f: c.f, i: c.i}
}

func emitUnsqueeze(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	axes, ok, err := im.axesIn(n)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("axes are required")
	}
	s := im.shapeOfVal(v)
	r := len(s) + len(axes)
	out := make([]int, r)
	set := make([]bool, r)
	for _, a := range axes {
		a, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		if set[a] {
			return nil, fmt.Errorf("axis %d is repeated", a)
		}
		set[a], out[a] = true, 1
	}
	j := 0
	for k := range out {
		if !set[k] {
			out[k] = s[j]
			j++
		}
	}
	if v.c != nil && !v.param {
		return []*val{{id: ir.NoID, c: reshapeConst(v.c, out)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), x))
}

func emitSqueeze(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	axes, ok, err := im.axesIn(n)
	if err != nil {
		return nil, err
	}
	s := im.shapeOfVal(v)
	drop := make([]bool, len(s))
	if !ok {
		for k, d := range s {
			drop[k] = d == 1
		}
	}
	for _, a := range axes {
		a, err := normAxis(a, len(s))
		if err != nil {
			return nil, err
		}
		if s[a] != 1 {
			return nil, fmt.Errorf("axis %d has size %d, not 1", a, s[a])
		}
		drop[a] = true
	}
	out := []int{}
	for k, d := range s {
		if !drop[k] {
			out = append(out, d)
		}
	}
	if v.c != nil && !v.param {
		return []*val{{id: ir.NoID, c: reshapeConst(v.c, out)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), x))
}

func emitConcat(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	vs := make([]*val, len(n.Input))
	allConst := true
	for k := range n.Input {
		v, err := im.in(n, k)
		if err != nil {
			return nil, err
		}
		vs[k] = v
		allConst = allConst && v.c != nil && !v.param
	}
	if len(vs) == 0 {
		return nil, errors.New("no inputs")
	}
	s0 := im.shapeOfVal(vs[0])
	def := int64(0)
	if im.opset < 4 {
		def = 1 // Concat-1's default
	}
	axis, err := normAxis(int(attrInt(n, "axis", def)), len(s0))
	if err != nil {
		return nil, err
	}
	if allConst {
		out := &tensor{dt: vs[0].c.dt}
		outer := prod(s0[:axis])
		total := 0
		for _, v := range vs {
			v.c.load()
			s := v.c.shape
			if v.c.dt != out.dt || len(s) != len(s0) {
				return nil, errors.New("inputs of different dtypes or ranks")
			}
			total += s[axis]
		}
		for o := range outer {
			for _, v := range vs {
				chunk := prod(v.c.shape[axis:])
				if out.dt.IsFloat() {
					out.f = append(out.f, v.c.f[o*chunk:(o+1)*chunk]...)
				} else {
					out.i = append(out.i, v.c.i[o*chunk:(o+1)*chunk]...)
				}
			}
		}
		out.shape = append([]int(nil), s0...)
		out.shape[axis] = total
		if out.n() != prod(out.shape) {
			return nil, errors.New("inputs whose dims off the axis differ")
		}
		return []*val{{id: ir.NoID, c: out}}, nil
	}
	ids := make([]ir.ID, len(vs))
	for k, v := range vs {
		if ids[k], err = im.value(v, true); err != nil {
			return nil, err
		}
	}
	return one(im.add(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(axis)), ids...))
}

func emitConstantOfShape(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	c, err := im.constIn(n, 0)
	if err != nil {
		return nil, err
	}
	dims := c.ints()
	fill := &tensor{dt: ir.F32, shape: []int{1}, f: []float64{0}}
	if a := attr(n, "value"); a != nil {
		if fill, err = im.readTensor(a.GetT(), false); err != nil {
			return nil, err
		}
		if fill.n() != 1 {
			return nil, fmt.Errorf("value has %d elements, expected 1", fill.n())
		}
	}
	t, err := checkedType(int32(dtypeCode(fill.dt)), dims)
	if err != nil {
		return nil, err
	}
	out := &tensor{dt: fill.dt, shape: []int(t.Shape)}
	k := t.Shape.NumElements()
	if k > MaxFolded {
		return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", t.Shape, k, MaxFolded)
	}
	if out.dt.IsFloat() {
		out.f = make([]float64, k)
		for j := range out.f {
			out.f[j] = fill.f[0]
		}
	} else {
		out.i = make([]int64, k)
		for j := range out.i {
			out.i[j] = fill.i[0]
		}
	}
	return []*val{{id: ir.NoID, c: out}}, nil
}
