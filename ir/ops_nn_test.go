package ir_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestNNInferErrors checks that the layer ops reject what PyTorch rejects,
// saying what was expected and what was found.
func TestNNInferErrors(t *testing.T) {
	const head = "graph g\ninput %x: f32[2,4,8,8]\ninput %s: f32[2,3,10]\ninput %i: i32[2,3,10]\n"
	tests := []struct{ name, src, want string }{
		{"conv rank", "input %w: f32[2,4,3]\n%y = conv2d %x, %w", "(input f32[2,4,8,8], weight f32[2,4,3])"},
		{"conv1d on 4-D", "input %w: f32[2,4,3,3]\n%y = conv1d %x, %w", "expected a batched input of rank 3, found f32[2,4,8,8]"},
		{"conv ints", "input %w: i32[2,3,3]\n%y = conv1d %i, %w", "expected a float input (f32 or f64), found i32[2,3,10]"},
		{"conv dtypes", "input %w: f64[2,3,3]\n%y = conv1d %s, %w", "dtype mismatch: f32[2,3,10] and f64[2,3,3]"},
		{"conv channels", "input %w: f32[2,2,3]\n%y = conv1d %s, %w", "expected weight [2,3,...]"},
		{"conv groups", "input %w: f32[3,2,3,3]\n%y = conv2d %x, %w {groups=3}", "groups 3 must divide C_in and C_out"},
		{"conv negative padding", "input %w: f32[2,3,3]\n%y = conv1d %s, %w {padding=[-1]}", "padding [-1]: every entry must be at least 0"},
		{"conv too small", "input %w: f32[2,3,11]\n%y = conv1d %s, %w", "output size is too small"},
		{"conv dilation too large", "input %w: f32[2,3,3]\n%y = conv1d %s, %w {dilation=[5]}", "output size is too small"},
		{"conv bias", "input %w: f32[2,3,3]\ninput %b: f32[3]\n%y = conv1d %s, %w, %b", "expected bias [2] (C_out of weight f32[2,3,3]), found f32[3]"},
		{"conv arity", "%y = conv1d %s", "conv1d takes 2 to 3 arguments"},
		{"conv_weight_grad dy", "input %dy: f32[2,2,7]\n%y = conv_weight_grad %s, %dy {weight_shape=[2,3,3]}", "expected dy [2,2,8]"},
		{"conv_input_grad shape", "input %dy: f32[2,2,8]\ninput %w: f32[2,3,3]\n%y = conv_input_grad %dy, %w", "needs attribute input_shape"},
		{"pool kernel", "%y = max_pool2d %x", "needs attribute kernel"},
		{"pool padding", "%y = max_pool2d %x {kernel=[3], padding=[2]}", "padding [2,2] must be at most half the kernel [3,3]"},
		{"pool rank", "input %v: f32[4,4]\n%y = avg_pool2d %v {kernel=[2]}", "expected an input [N,C,H,W] or [C,H,W], found shape [4,4] (input f32[4,4])"},
		{"pool too small", "%y = max_pool2d %x {kernel=[3], dilation=[4]}", "output size is too small"},
		{"pool kernel list", "%y = max_pool2d %x {kernel=[1,2,3]}", "kernel [1,2,3] has 3 entries, expected 1 or 2"},
		{"pool grad dy", "input %dy: f32[2,4,4,3]\n%y = max_pool2d_grad %dy, %x {kernel=[2]}", "expected dy [2,4,4,4] (the pooling of [2,4,8,8]), found f32[2,4,4,3]"},
		{"avg dilation", "%y = avg_pool2d %x {kernel=[2], dilation=[2]}", "avg_pool2d has no attribute \"dilation\""},
		{"layer_norm axes", "%y = layer_norm %x {axes=[1,3]}", "axes [1,3] must be the last 2 axes of a rank-4 input"},
		{"layer_norm bias", "input %w: f32[8]\ninput %b: f32[4]\n%y = layer_norm %x, %w, %b", "expected bias [8] (the normalized shape of f32[2,4,8,8]), found f32[4]"},
		{"layer_norm empty axes", "%y = layer_norm %x {axes=[]}", "axes must name at least one axis"},
		{"batch_norm weight", "input %w: f32[3]\n%y = batch_norm %x, %w, %w", "expected weight [4] (the channels of f32[2,4,8,8]), found f32[3]"},
		{"batch_norm one value", "input %v: f32[1,3]\ninput %w: f32[3]\n%y = batch_norm %v, %w, %w", "expected more than 1 value per channel, found input f32[1,3]"},
		{"batch_norm arity", "input %w: f32[4]\n%y = batch_norm %x, %w", "batch_norm takes 3 argument(s)"},
		{"dropout p", "%y = dropout %x {p=-0.1}", "p must be between 0 and 1, found -0.1"},
		{"dropout ints", "%y = dropout %i", "expected a float input (f32 or f64), found i32[2,3,10]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ir.Parse("t.kir", []byte(head+tc.src+"\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
