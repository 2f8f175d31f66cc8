// dispatch 0: workgroups [6 1 1], bindings [{0 0} {1 0}]
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
fn ld_x(i: u32) -> f32 { return x[i]; }
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
fn ld_out(i: u32) -> f32 { return out[i]; }
var<workgroup> red: array<f32, 256>;
fn idx(s: u32, j: u32) -> u32 { return (s * 300u + j); }
fn k_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn k_log(x: f32) -> f32 {
  if (x == 0.0) { return bitcast<f32>(0xff800000u); }
  if (x < 0.0 || k_isnan(x)) { return bitcast<f32>(0x7fc00000u); }
  return log(x);
}
fn k_maxnan(a: f32, b: f32) -> f32 {
  if (k_isnan(a)) { return a; }
  if (k_isnan(b)) { return b; }
  return max(a, b);
}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let s = wid.x;
  let t = lid.x;
  if (s >= 6u) { return; }
  var mx = bitcast<f32>(0xff800000u);
  for (var j = t; j < 300u; j += 256u) { mx = k_maxnan(mx, ld_x(idx(s, j))); }
  red[t] = mx;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w = w >> 1u) {
    if (t < w) { red[t] = k_maxnan(red[t], red[t + w]); }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();
  var se = 0.0;
  for (var j = t; j < 300u; j += 256u) { se = se + exp(ld_x(idx(s, j)) - m); }
  red[t] = se;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w = w >> 1u) {
    if (t < w) { red[t] = red[t] + red[t + w]; }
    workgroupBarrier();
  }
  let e = red[0];
  workgroupBarrier();
  for (var j = t; j < 300u; j += 256u) { let v = ld_x(idx(s, j)); out[idx(s, j)] = exp(v - m) / e; }
}
