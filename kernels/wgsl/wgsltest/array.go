package wgsltest

// Array returns the cases of the array ops (ir/ops_array.go) and of the
// integer forms of the comparisons and where: every cast between f32, i32,
// i64 and bool (i64 values far outside i32, negative, saturated), integer
// comparisons with broadcasting, where over i32, i64 and bool, bool
// transpose and broadcast_to, cumsum in every direction, trilu in every
// dtype. Their results are exact on both
// sides (cumsum adds in the CPU's order).
func Array() []Case {
	return []Case{
		{Name: "cast", Labels: 1000, Src: `input %a: f32[7,37]
input %c: bool[7,37]
input %i: i32[7,37]
%s = const {dtype="f32", value=300000000000.0}
%big = mul %a, %s
%l = cast %big {dtype="i64"}
%lf = cast %l {dtype="f32"}
%li = cast %l {dtype="i32"}
%lb = cast %l {dtype="bool"}
%ll = cast %l {dtype="i64"}
%ai = cast %a {dtype="i32"}
%sat = cast %big {dtype="i32"}
%ab = cast %a {dtype="bool"}
%af = cast %a {dtype="f32"}
%ii = cast %i {dtype="i64"}
%if = cast %i {dtype="f32"}
%ib = cast %i {dtype="bool"}
%i2 = cast %i {dtype="i32"}
%cf = cast %c {dtype="f32"}
%ci = cast %c {dtype="i32"}
%cl = cast %c {dtype="i64"}
%cb = cast %c {dtype="bool"}
output %l, %lf, %li, %lb, %ll, %ai, %sat, %ab, %af, %ii, %if, %ib, %i2, %cf, %ci, %cl, %cb`},
		{Name: "integer comparisons and where", Labels: 5, Src: `input %a: f32[3,41]
input %s: f32[]
input %i: i32[3,41]
input %j: i32[41]
input %k: i64[41]
input %c: bool[3,41]
%l = cast %a {dtype="i64"}
%big = mul %a, %s
%m = cast %big {dtype="i64"}
%g = greater %i, %j
%ge = greater_equal %i, %j
%lt = less %i, %j
%le = less_equal %i, %j
%eq = equal %i, %j
%ne = not_equal %i, %j
%g6 = greater %m, %k
%ge6 = greater_equal %l, %k
%lt6 = less %m, %k
%le6 = less_equal %l, %k
%eq6 = equal %l, %k
%ne6 = not_equal %l, %k
%w = where %c, %i, %j
%w6 = where %g, %m, %k
%wb = where %c, %g, %eq6
%bt = transpose %c
%bb = broadcast_to %eq6 {shape=[2,3,41]}
output %g, %ge, %lt, %le, %eq, %ne, %g6, %ge6, %lt6, %le6, %eq6, %ne6, %w, %w6, %wb, %bt, %bb`},
		{Name: "cumsum", Labels: 100, Src: `input %a: f32[5,37,3]
input %i: i32[300,2]
%y = cumsum %a {axis=1}
%e = cumsum %a {axis=-1, exclusive=true}
%r = cumsum %a {axis=0, reverse=true}
%re = cumsum %a {axis=1, reverse=true, exclusive=true}
%n = cumsum %i {axis=0}
%m = cumsum %i {axis=1, reverse=true}
output %y, %e, %r, %re, %n, %m`},
		{Name: "trilu", Labels: 100, Src: `input %a: f32[3,7,5]
input %i: i32[5,3]
input %l: i64[2,4,4]
input %c: bool[3,9,7]
%u = trilu %a
%u1 = trilu %a {k=1}
%d = trilu %a {upper=false, k=-2}
%far = trilu %a {k=100000000000}
%ti = trilu %i {upper=false}
%tl = trilu %l {k=-1}
%tc = trilu %c {upper=false, k=2}
output %u, %u1, %d, %far, %ti, %tl, %tc`},
	}
}
