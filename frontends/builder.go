// Package frontends builds kiln graphs: the Go builder API here, the .kir
// text format through ir.Parse, ONNX import in the sub-package onnx, and
// data and tensor interchange in the sub-packages dataset, safetensors and
// npy.
package frontends

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/kilnml/kiln/ir"
)

// Builder builds a graph op by op. The first error (an op whose shapes do not
// fit, a duplicate name) is kept, with the Go file and line that made the
// call, and returned by Build; later calls do nothing, so model code reads
// straight through without error checks.
type Builder struct {
	g        *ir.Graph
	err      error
	logicIdx map[string]Value // LogicLayer's index constants, by their values
}

// Value is a value of the graph being built.
type Value struct {
	b  *Builder
	id ir.ID
}

// NewBuilder starts a graph called name.
func NewBuilder(name string) *Builder { return &Builder{g: ir.New(name)} }

// ID returns the value's id in the graph (ir.NoID after an error).
func (v Value) ID() ir.ID {
	if v.b == nil {
		return ir.NoID
	}
	return v.id
}

// Type returns the value's static type (the zero Type after an error).
func (v Value) Type() ir.Type {
	if v.b == nil || v.id == ir.NoID {
		return ir.Type{}
	}
	return v.b.g.Type(v.id)
}

// Name returns the value's name, without %.
func (v Value) Name() string {
	if v.b == nil || v.id == ir.NoID {
		return ""
	}
	return v.b.g.Value(v.id).Name
}

// Err returns the first error so far.
func (b *Builder) Err() error { return b.err }

// fail records err with the position of the user's call, depth frames up
// from fail's caller (1: the caller of the method that called fail).
func (b *Builder) fail(depth int, err error) Value {
	if b.err == nil {
		if _, file, line, ok := runtime.Caller(depth + 1); ok {
			err = fmt.Errorf("%s:%d: %w", filepath.Base(file), line, err)
		}
		b.err = err
	}
	return Value{b, ir.NoID}
}

func (b *Builder) leaf(op ir.Op, name string, dt ir.DType, shape []int, attrs ir.Attrs) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	id, err := b.g.Leaf(op, name, ir.TensorOf(dt, shape...), attrs)
	if err != nil {
		return b.fail(2, fmt.Errorf("%s %%%s: %w", op, ir.Excerpt(name), err))
	}
	return Value{b, id}
}

// Input declares a tensor fed at every step.
func (b *Builder) Input(name string, dt ir.DType, shape ...int) Value {
	return b.leaf(ir.OpInput, name, dt, shape, nil)
}

// Param declares a trainable tensor with the default initializer (glorot
// for rank >= 2, zeros otherwise).
func (b *Builder) Param(name string, dt ir.DType, shape ...int) Value {
	return b.leaf(ir.OpParam, name, dt, shape, nil)
}

// ParamInit declares a trainable tensor with initializer init ("zeros",
// "ones", "normal", "uniform", "glorot") and, for normal and uniform, scale.
func (b *Builder) ParamInit(name string, dt ir.DType, shape []int, init string, scale float64) Value {
	attrs := ir.MakeAttrs("init", ir.String(init))
	if init == "normal" || init == "uniform" {
		attrs = attrs.With("scale", ir.Float(scale))
	}
	return b.leaf(ir.OpParam, name, dt, shape, attrs)
}

// Op appends any op of the table with attrs; the named methods below are
// shorthands for it.
func (b *Builder) Op(op ir.Op, attrs ir.Attrs, args ...Value) Value { return b.op(op, attrs, args...) }

func (b *Builder) op(op ir.Op, attrs ir.Attrs, args ...Value) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	ids := make([]ir.ID, len(args))
	for i, a := range args {
		if a.b != b {
			return b.fail(2, fmt.Errorf("%s: argument %d belongs to another builder", op, i))
		}
		ids[i] = a.id
	}
	id, err := b.g.Add("", op, attrs, ids...)
	if err != nil {
		return b.fail(2, err)
	}
	return Value{b, id}
}

// Rename gives v the name name (without %) and returns it.
func (b *Builder) Rename(v Value, name string) Value {
	if b.err != nil {
		return v
	}
	if v.b != b || v.id == ir.NoID {
		return b.fail(1, fmt.Errorf("rename to %q: the value belongs to another builder", name))
	}
	if err := b.g.Rename(v.id, name); err != nil {
		return b.fail(1, err)
	}
	return v
}

// Output marks vs as outputs. The first output of a graph that is trained is
// the loss.
func (b *Builder) Output(vs ...Value) {
	for _, v := range vs {
		if b.err != nil {
			return
		}
		if v.b != b {
			b.fail(1, fmt.Errorf("output belongs to another builder"))
			return
		}
		b.g.Outputs = append(b.g.Outputs, v.id)
	}
}

// Build returns the graph, or the first error.
func (b *Builder) Build() (*ir.Graph, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := ir.Check(b.g); err != nil {
		return nil, err
	}
	return b.g, nil
}

// Add returns x + y with NumPy broadcasting.
func (b *Builder) Add(x, y Value) Value { return b.op(ir.OpAdd, nil, x, y) }

// Sub returns x - y with NumPy broadcasting.
func (b *Builder) Sub(x, y Value) Value { return b.op(ir.OpSub, nil, x, y) }

// Mul returns x * y with NumPy broadcasting.
func (b *Builder) Mul(x, y Value) Value { return b.op(ir.OpMul, nil, x, y) }

// Div returns x / y with NumPy broadcasting.
func (b *Builder) Div(x, y Value) Value { return b.op(ir.OpDiv, nil, x, y) }

// Neg returns -x.
func (b *Builder) Neg(x Value) Value { return b.op(ir.OpNeg, nil, x) }

// Exp returns e^x.
func (b *Builder) Exp(x Value) Value { return b.op(ir.OpExp, nil, x) }

// Log returns the natural logarithm of x.
func (b *Builder) Log(x Value) Value { return b.op(ir.OpLog, nil, x) }

// Sqrt returns the square root of x.
func (b *Builder) Sqrt(x Value) Value { return b.op(ir.OpSqrt, nil, x) }

// Tanh returns tanh(x).
func (b *Builder) Tanh(x Value) Value { return b.op(ir.OpTanh, nil, x) }

// Sigmoid returns 1 / (1 + e^-x).
func (b *Builder) Sigmoid(x Value) Value { return b.op(ir.OpSigmoid, nil, x) }

// Relu returns max(x, 0).
func (b *Builder) Relu(x Value) Value { return b.op(ir.OpRelu, nil, x) }

// Matmul returns the matrix product x @ y with NumPy semantics.
func (b *Builder) Matmul(x, y Value) Value { return b.op(ir.OpMatmul, nil, x, y) }

// Transpose permutes the axes of x; with no perm it reverses them.
func (b *Builder) Transpose(x Value, perm ...int) Value {
	var a ir.Attrs
	if perm != nil {
		a = ir.MakeAttrs("perm", ir.Ints(perm...))
	}
	return b.op(ir.OpTranspose, a, x)
}

// Reshape gives x a new shape with the same elements; one dimension may be -1.
func (b *Builder) Reshape(x Value, shape ...int) Value {
	return b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), x)
}

// BroadcastTo repeats x along broadcast axes to shape.
func (b *Builder) BroadcastTo(x Value, shape ...int) Value {
	return b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(shape...)), x)
}

func reduceAttrs(axes []int, keepdims bool) ir.Attrs {
	a := ir.MakeAttrs("keepdims", ir.BoolAttr(keepdims))
	if axes != nil {
		a = a.With("axes", ir.Ints(axes...))
	}
	return a
}

// Sum sums x over axes (nil: all axes).
func (b *Builder) Sum(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpSum, reduceAttrs(axes, keepdims), x)
}

// Mean averages x over axes (nil: all axes).
func (b *Builder) Mean(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpMean, reduceAttrs(axes, keepdims), x)
}

// Softmax normalizes x along axis.
func (b *Builder) Softmax(x Value, axis int) Value {
	return b.op(ir.OpSoftmax, ir.MakeAttrs("axis", ir.Int(axis)), x)
}

// LogSoftmax returns log(softmax(x)) along axis, computed stably.
func (b *Builder) LogSoftmax(x Value, axis int) Value {
	return b.op(ir.OpLogSoftmax, ir.MakeAttrs("axis", ir.Int(axis)), x)
}

// SoftmaxCrossEntropy returns the mean cross-entropy of logits [N,C] against
// integer labels [N].
func (b *Builder) SoftmaxCrossEntropy(logits, labels Value) Value {
	return b.op(ir.OpSoftmaxCrossEntropy, nil, logits, labels)
}

// MSELoss returns the mean of (x - y)^2.
func (b *Builder) MSELoss(x, y Value) Value { return b.op(ir.OpMSELoss, nil, x, y) }

// Scalar returns a scalar constant.
func (b *Builder) Scalar(v float64, dt ir.DType) Value {
	return b.op(ir.OpConst, ir.MakeAttrs("dtype", ir.String(dt.String()), "value", ir.Float(v)))
}

// Const returns a constant of the given shape from row-major values (one
// value fills every element).
func (b *Builder) Const(dt ir.DType, shape []int, values ...float64) Value {
	return b.op(ir.OpConst, ir.MakeAttrs("dtype", ir.String(dt.String()), "shape", ir.Ints(shape...), "value", ir.Floats(values...)))
}

// OneHot returns labels as one-hot rows of the given number of classes.
func (b *Builder) OneHot(labels Value, classes int, dt ir.DType) Value {
	return b.op(ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(classes), "dtype", ir.String(dt.String())), labels)
}
