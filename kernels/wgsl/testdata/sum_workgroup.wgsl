// dispatch 0: workgroups [7 1 1], bindings [{0 0} {1 0}]
@group(0) @binding(0) var<storage, read_write> a0: array<f32>;
fn ld_a0(i: u32) -> f32 { return a0[i]; }
fn value(p: u32) -> f32 { return ld_a0(p); }
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
fn ld_out(i: u32) -> f32 { return out[i]; }
fn index(o: u32, r: u32) -> u32 { return (o + (r * 7u)); }
fn fold1(a: f32, b: f32) -> f32 { return a + b; }
var<workgroup> wg1: array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let o = wid.x;
  let t = lid.x;
  var s_a: f32 = 0.0;
  if (o < 7u) {
    for (var r = t; r < 300u; r += 256u) { let q = index(o, r); s_a = fold1(s_a, value(q)); }
  }
  wg1[t] = s_a;
  workgroupBarrier();
  for (var w = 128u; w > 0u; w = w >> 1u) {
    if (t < w) { wg1[t] = fold1(wg1[t], wg1[t + w]); }
    workgroupBarrier();
  }
  let s = wg1[0];
  workgroupBarrier();
  if (t == 0u && o < 7u) {
  out[o] = s;
  }
}
