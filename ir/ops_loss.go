package ir

import "fmt"

// Losses. Each reduces to a scalar by default.

func lossOps() []opRow {
	return []opRow{
		{OpSoftmaxCrossEntropy, OpInfo{Name: "softmax_cross_entropy", Args: []string{"logits", "labels"}, Doc: "mean over N of -log softmax(logits)[n, labels[n]]; logits [N,C], integer labels [N]", Infer: inferSoftmaxCE, Grad: gradSoftmaxCE}},
		{OpMSELoss, OpInfo{Name: "mse_loss", Args: []string{"a", "b"}, Doc: "mean of (a - b)^2 over the broadcast shape", Infer: inferMSE, Grad: gradMSE}},
	}
}

func inferSoftmaxCE(args []Type, _ Attrs) (Type, error) {
	lg, lb := args[0], args[1]
	if !lg.DType.IsFloat() || len(lg.Shape) != 2 {
		return Type{}, fmt.Errorf("expected float logits [N,C], found %s", lg)
	}
	if !lb.DType.IsInt() || len(lb.Shape) != 1 || lb.Shape[0] != lg.Shape[0] {
		return Type{}, fmt.Errorf("expected integer labels [%d] for logits %s, found %s", lg.Shape[0], lg, lb)
	}
	return Type{lg.DType, Shape{}}, nil
}

func inferMSE(args []Type, a Attrs) (Type, error) {
	t, err := inferBroadcast(args, a)
	if err != nil {
		return t, err
	}
	if !t.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected float operands, found %s", args[0])
	}
	return Type{t.DType, Shape{}}, nil
}

func gradSoftmaxCE(e *Emitter, y, dy ID) []ID {
	// d logits = (softmax(logits) - onehot(labels)) * dy / N.
	logits, labels := e.args(y)[0], e.args(y)[1]
	t := e.Type(logits)
	n, c := t.Shape[0], t.Shape[1]
	p := e.Op(OpSoftmax, MakeAttrs("axis", Int(-1)), logits)
	oh := e.Op(OpOneHot, MakeAttrs("classes", Int(c), "dtype", String(t.DType.String())), labels)
	scale := e.mul(dy, e.Scalar(1/float64(max(n, 1)), t.DType))
	return []ID{e.mul(e.sub(p, oh), scale), NoID}
}

func gradMSE(e *Emitter, y, dy ID) []ID {
	// d a = 2 (a - b) dy / n, d b = -d a, each summed to its operand's shape.
	a, b := e.args(y)[0], e.args(y)[1]
	diff := e.sub(a, b)
	n := e.shape(diff).NumElements()
	scale := e.mul(dy, e.Scalar(2/float64(max(n, 1)), e.Type(y).DType))
	g := e.mul(diff, scale)
	return []ID{e.SumTo(g, e.shape(a)), e.SumTo(e.neg(g), e.shape(b))}
}
