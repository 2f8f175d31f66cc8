package wgsltest

// attention: the fused attention op and its backward, on rows and keys
// that are not multiples of the workgroup size, causal or not, with an
// added mask and with a padding mask that masks a whole batch (rows of 0).
func attention() []Case {
	pad := `%m = const {dtype="f32", shape=[2,1,1,5], value=[0,0,0,-inf,-inf, -inf,-inf,-inf,-inf,-inf]}`
	return []Case{
		{Name: "attention", Atol: 1e-5, Src: `input %q: f32[2,3,37,8]
input %k: f32[2,3,29,8]
input %v: f32[2,3,29,5]
input %dy: f32[2,3,37,5]
%y = attention %q, %k, %v {scale=0.35}
%g = attention_grad %q, %k, %v, %y, %dy {scale=0.35}
output %y, %g`},
		{Name: "attention causal with an added mask", Atol: 1e-5, Src: `input %q: f32[3,33,4]
input %k: f32[3,33,4]
input %v: f32[3,33,4]
input %m: f32[33,33]
input %dy: f32[3,33,4]
%y = attention %q, %k, %v, %m {scale=0.5, causal=true}
%g = attention_grad %q, %k, %v, %y, %dy, %m {scale=0.5, causal=true}
output %y, %g`},
		{Name: "attention padding, a batch fully masked", Atol: 1e-5, Src: `input %q: f32[2,2,7,3]
input %k: f32[2,2,5,3]
input %v: f32[2,2,5,2]
input %dy: f32[2,2,7,2]
` + pad + `
%y = attention %q, %k, %v, %m
%g = attention_grad %q, %k, %v, %y, %dy, %m
output %y, %g`},
	}
}
