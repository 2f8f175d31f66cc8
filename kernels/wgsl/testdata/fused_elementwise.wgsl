// dispatch 0: workgroups [1 1 1], bindings [{0 0} {0 1} {1 0}]
@group(0) @binding(0) var<storage, read_write> a0: array<f32>;
fn ld_a0(i: u32) -> f32 { return a0[i]; }
@group(0) @binding(1) var<storage, read_write> a1: array<f32>;
fn ld_a1(i: u32) -> f32 { return a1[i]; }
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
fn ld_out(i: u32) -> f32 { return out[i]; }
fn k_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn k_tanh(x: f32) -> f32 {
  let a = abs(x);
  if (k_isnan(x)) { return x; }
  if (a < 0.625) {
    let z = x * x;
    return x + x * z * (-0.33333334 + z * (0.13333334 + z * (-0.053968254 + z * (0.021869488 + z * (-0.008863236 + z * 0.0035921280)))));
  }
  let e = exp(-2.0 * a);
  let t = (1.0 - e) / (1.0 + e);
  return select(-t, t, x >= 0.0);
}
fn ew(p: u32) -> f32 {
  let x0 = ld_a0(p);
  let x1 = ld_a1(((p % 3u)));
  let t0 = (x0 * x1);
  let t1 = k_tanh(t0);
  let t2 = (t1 + bitcast<f32>(0x3f000000u));
  let t3 = (t2 > x1);
  let t4 = select(x0, t2, t3);
  return t4;
}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let p = gid.x;
  if (p >= 195u) { return; }
  out[p] = ew(p);
}
