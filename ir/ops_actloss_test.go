package ir

import "testing"

// TestActLossInfer checks the result types of the activations and losses
// and that every refusal says what was expected and what was found.
func TestActLossInfer(t *testing.T) {
	f32 := func(d ...int) Type { return TensorOf(F32, d...) }
	f64 := func(d ...int) Type { return TensorOf(F64, d...) }
	i64 := func(d ...int) Type { return TensorOf(I64, d...) }
	red := func(r string) Attrs { return MakeAttrs("reduction", String(r)) }
	tests := []struct {
		name  string
		op    Op
		attrs Attrs
		args  []Type
		want  Type   // when err is ""
		err   string // the exact error
	}{
		{"leaky_relu", OpLeakyRelu, nil, []Type{f32(2, 3)}, f32(2, 3), ""},
		{"leaky_relu int", OpLeakyRelu, nil, []Type{i64(2)}, Type{}, "expected a float operand (f32 or f64), found i64[2]"},
		{"gelu tanh", OpGelu, MakeAttrs("approximate", String("tanh")), []Type{f64()}, f64(), ""},
		{"gelu bad approximate", OpGelu, MakeAttrs("approximate", String("sigmoid")), []Type{f64()}, Type{}, `approximate must be "none" or "tanh", found "sigmoid"`},
		{"gelu_grad types", OpGeluGrad, nil, []Type{f32(2), f32(3)}, Type{}, "expected operands of one type, found f32[2] and f32[3]"},
		{"prelu per channel", OpPrelu, nil, []Type{f32(2, 3, 4), f32(3)}, f32(2, 3, 4), ""},
		{"prelu shared", OpPrelu, nil, []Type{f32(2, 3, 4), f32(1)}, f32(2, 3, 4), ""},
		{"prelu scalar weight", OpPrelu, nil, []Type{f32(5), f32()}, f32(5), ""},
		{"prelu rank 1 channels", OpPrelu, nil, []Type{f32(5), f32(5)}, Type{}, "expected a weight of 1 element for input f32[5] (below rank 2 there is one channel), found f32[5]"},
		{"prelu wrong channels", OpPrelu, nil, []Type{f32(2, 3), f32(2)}, Type{}, "expected a weight of 1 or 3 elements (the channels, axis 1 of input f32[2,3]), found f32[2]"},
		{"prelu weight rank", OpPrelu, nil, []Type{f32(2, 3), f32(1, 3)}, Type{}, "expected a weight of rank 0 or 1, found f32[1,3]"},
		{"prelu weight dtype", OpPrelu, nil, []Type{f32(2, 3), f64(3)}, Type{}, "expected a f32 weight like the input f32[2,3], found f64[3]"},
		{"mse mean", OpMSELoss, nil, []Type{f32(2, 3), f32(3)}, f32(), ""},
		{"l1 none broadcast", OpL1Loss, red("none"), []Type{f32(2, 1), f32(3)}, f32(2, 3), ""},
		{"huber sum", OpHuberLoss, red("sum"), []Type{f64(4), f64(4)}, f64(), ""},
		{"huber delta", OpHuberLoss, MakeAttrs("delta", Float(-1)), []Type{f64(4), f64(4)}, Type{}, "delta must be positive, found -1.0"},
		{"l1 shapes", OpL1Loss, nil, []Type{f32(2), f32(3)}, Type{}, "incompatible shapes f32[2] and f32[3] (they do not broadcast)"},
		{"mse ints", OpMSELoss, nil, []Type{i64(2), i64(2)}, Type{}, "expected float operands (f32 or f64), found i64[2]"},
		{"bad reduction", OpMSELoss, red("avg"), []Type{f32(2), f32(2)}, Type{}, `reduction must be "mean", "sum" or "none", found "avg"`},
		{"bce none", OpBCELoss, red("none"), []Type{f32(2, 3), f32(2, 3)}, f32(2, 3), ""},
		{"bce shapes", OpBCELoss, nil, []Type{f32(2, 3), f32(3)}, Type{}, "expected a target of the input's type f32[2,3], found f32[3]"},
		{"bce_with_logits dtype", OpBCEWithLogits, nil, []Type{f32(2), f64(2)}, Type{}, "expected a target of the input's type f32[2], found f64[2]"},
		{"nll none", OpNLLLoss, red("none"), []Type{f32(4, 5), i64(4)}, f32(4), ""},
		{"nll rank", OpNLLLoss, nil, []Type{f32(4), i64(4)}, Type{}, "expected float log-probabilities [N,C], found f32[4]"},
		{"nll labels", OpNLLLoss, nil, []Type{f32(4, 5), i64(3)}, Type{}, "expected integer labels [4] for log-probabilities f32[4,5], found i64[3]"},
		{"ce labels none", OpSoftmaxCrossEntropy, red("none"), []Type{f64(4, 5), i64(4)}, f64(4), ""},
		{"ce probabilities", OpSoftmaxCrossEntropy, nil, []Type{f64(4, 5), f64(4, 5)}, f64(), ""},
		{"ce probabilities none", OpSoftmaxCrossEntropy, red("none"), []Type{f32(4, 5), f32(4, 5)}, f32(4), ""},
		{"ce probabilities shape", OpSoftmaxCrossEntropy, nil, []Type{f32(4, 5), f32(4, 4)}, Type{}, "expected class probabilities f32[4,5] (or integer labels [4]) for logits f32[4,5], found f32[4,4]"},
		{"ce float labels", OpSoftmaxCrossEntropy, nil, []Type{f32(4, 5), f32(4)}, Type{}, "expected integer labels [4] for logits f32[4,5], found f32[4]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs, err := Canonical(tc.op, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.op.Info().Infer(tc.args, attrs)
			switch {
			case tc.err != "" && (err == nil || err.Error() != tc.err):
				t.Errorf("error %v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("error %v, want %s", err, tc.want)
			case tc.err == "" && !got.Equal(tc.want):
				t.Errorf("type %s, want %s", got, tc.want)
			}
		})
	}
}

// TestActLossDefaults pins PyTorch's attribute defaults.
func TestActLossDefaults(t *testing.T) {
	tests := []struct {
		op   Op
		want string
	}{
		{OpLeakyRelu, "{alpha=0.01}"},
		{OpElu, "{alpha=1.0}"},
		{OpGelu, `{approximate="none"}`},
		{OpSoftplus, "{beta=1.0, threshold=20.0}"},
		{OpHuberLoss, `{delta=1.0, reduction="mean"}`},
		{OpMSELoss, `{reduction="mean"}`},
		{OpSoftmaxCrossEntropy, `{reduction="mean"}`},
		{OpNLLLoss, `{reduction="mean"}`},
	}
	for _, tc := range tests {
		a, err := Canonical(tc.op, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != tc.want {
			t.Errorf("%s defaults %s, want %s", tc.op, a, tc.want)
		}
	}
}
