// dispatch 0: workgroups [2 1 1], bindings [{0 0} {0 1} {0 2} {1 0}]
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
fn ld_a(i: u32) -> f32 { return a[i]; }
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
fn ld_b(i: u32) -> f32 { return b[i]; }
@group(0) @binding(2) var<storage, read_write> e1: array<f32>;
fn ld_e1(i: u32) -> f32 { return e1[i]; }
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
fn ld_out(i: u32) -> f32 { return out[i]; }
fn epilogue(p: u32, x0: f32) -> f32 {
  let x1 = ld_e1(((p % 67u)));
  let t0 = (x0 + x1);
  let t1 = select(t0, 0.0, t0 <= 0.0);
  return t1;
}
const M = 31u;
const N = 67u;
const K = 20u;
const TILE = 64u;
const TILE4 = 16u;
const KT = 16u;
var<workgroup> As: array<vec4<f32>, 256>;
var<workgroup> Bs: array<vec4<f32>, 256>;
fn store(m: u32, n: u32, row: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) {
    let nn = n + j;
    if (nn >= N) { return; }
    let p = bz_g * M * N + m * N + nn;
    let v = row[j];
    out[p] = epilogue(p, v);
  }
}
var<private> bz_g: u32;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let bz = wid.z;
  bz_g = bz;
  let aoff = 0u;
  let boff = 0u;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let tid = lid.y * 16u + lid.x;
  let ra = lid.y * 4u;
  let rb = lid.x * 4u;
  let ra4 = ra / 4u;
  let rb4 = rb / 4u;
  var c0_0 = vec4<f32>(0.0);
  var c1_0 = vec4<f32>(0.0);
  var c2_0 = vec4<f32>(0.0);
  var c3_0 = vec4<f32>(0.0);
  for (var k0 = 0u; k0 < K; k0 += KT) {
    for (var l = 0u; l < 4u; l++) {
      let e = tid + l * 256u;
      let r = e / KT;
      let kk = e % KT;
      var av = 0.0;
      if (m0 + r < M && k0 + kk < K) { av = a[aoff + (m0 + r) * K + k0 + kk]; }
      As[kk * TILE4 + r / 4u][r % 4u] = av;
      let kb = e / TILE;
      let c = e % TILE;
      var bv = 0.0;
      if (k0 + kb < K && n0 + c < N) { bv = b[boff + (k0 + kb) * N + n0 + c]; }
      Bs[kb * TILE4 + c / 4u][c % 4u] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < KT; kk++) {
      let a0 = As[kk * TILE4 + ra4 + 0u];
      let b0 = Bs[kk * TILE4 + rb4 + 0u];
      c0_0 = fma(vec4<f32>(a0[0]), b0, c0_0);
      c1_0 = fma(vec4<f32>(a0[1]), b0, c1_0);
      c2_0 = fma(vec4<f32>(a0[2]), b0, c2_0);
      c3_0 = fma(vec4<f32>(a0[3]), b0, c3_0);
    }
    workgroupBarrier();
  }
  if (m0 + ra + 0u < M) {
    store(m0 + ra + 0u, n0 + rb + 0u, c0_0);
  }
  if (m0 + ra + 1u < M) {
    store(m0 + ra + 1u, n0 + rb + 0u, c1_0);
  }
  if (m0 + ra + 2u < M) {
    store(m0 + ra + 2u, n0 + rb + 0u, c2_0);
  }
  if (m0 + ra + 3u < M) {
    store(m0 + ra + 3u, n0 + rb + 0u, c3_0);
  }
}
