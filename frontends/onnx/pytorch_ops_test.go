package onnx_test

// The fixtures of the array and normalization ops, written by
// tests/onnx/export_ops.py; TestPyTorchGrad, TestPyTorchGradGPU and
// TestPyTorchSGD run them with the models' fixtures.
func init() {
	fixtures = append(fixtures, "ops_norm", "ops_einsum", "ops_convt", "ops_pad", "ops_3d", "ops_act", "ops_resize")
}
