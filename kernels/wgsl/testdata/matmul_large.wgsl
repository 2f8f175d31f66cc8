// dispatch 0: workgroups [6 5 1], bindings [{0 0} {0 1} {1 0}]
@group(0) @binding(0) var<storage, read_write> a: array<f32>;
fn ld_a(i: u32) -> f32 { return a[i]; }
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
fn ld_b(i: u32) -> f32 { return b[i]; }
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
fn ld_out(i: u32) -> f32 { return out[i]; }
const M = 600u;
const N = 700u;
const K = 33u;
const TILE = 128u;
const TILE4 = 32u;
const KT = 8u;
var<workgroup> As: array<vec4<f32>, 256>;
var<workgroup> Bs: array<vec4<f32>, 256>;
fn store(m: u32, n: u32, row: vec4<f32>) {
  for (var j = 0u; j < 4u; j++) {
    let nn = n + j;
    if (nn >= N) { return; }
    let p = bz_g * M * N + m * N + nn;
    let v = row[j];
    out[p] = v;
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
  let ra = lid.y * 8u;
  let rb = lid.x * 8u;
  let ra4 = ra / 4u;
  let rb4 = rb / 4u;
  var c0_0 = vec4<f32>(0.0);
  var c0_1 = vec4<f32>(0.0);
  var c1_0 = vec4<f32>(0.0);
  var c1_1 = vec4<f32>(0.0);
  var c2_0 = vec4<f32>(0.0);
  var c2_1 = vec4<f32>(0.0);
  var c3_0 = vec4<f32>(0.0);
  var c3_1 = vec4<f32>(0.0);
  var c4_0 = vec4<f32>(0.0);
  var c4_1 = vec4<f32>(0.0);
  var c5_0 = vec4<f32>(0.0);
  var c5_1 = vec4<f32>(0.0);
  var c6_0 = vec4<f32>(0.0);
  var c6_1 = vec4<f32>(0.0);
  var c7_0 = vec4<f32>(0.0);
  var c7_1 = vec4<f32>(0.0);
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
      let a1 = As[kk * TILE4 + ra4 + 1u];
      let b1 = Bs[kk * TILE4 + rb4 + 1u];
      c0_0 = fma(vec4<f32>(a0[0]), b0, c0_0);
      c0_1 = fma(vec4<f32>(a0[0]), b1, c0_1);
      c1_0 = fma(vec4<f32>(a0[1]), b0, c1_0);
      c1_1 = fma(vec4<f32>(a0[1]), b1, c1_1);
      c2_0 = fma(vec4<f32>(a0[2]), b0, c2_0);
      c2_1 = fma(vec4<f32>(a0[2]), b1, c2_1);
      c3_0 = fma(vec4<f32>(a0[3]), b0, c3_0);
      c3_1 = fma(vec4<f32>(a0[3]), b1, c3_1);
      c4_0 = fma(vec4<f32>(a1[0]), b0, c4_0);
      c4_1 = fma(vec4<f32>(a1[0]), b1, c4_1);
      c5_0 = fma(vec4<f32>(a1[1]), b0, c5_0);
      c5_1 = fma(vec4<f32>(a1[1]), b1, c5_1);
      c6_0 = fma(vec4<f32>(a1[2]), b0, c6_0);
      c6_1 = fma(vec4<f32>(a1[2]), b1, c6_1);
      c7_0 = fma(vec4<f32>(a1[3]), b0, c7_0);
      c7_1 = fma(vec4<f32>(a1[3]), b1, c7_1);
    }
    workgroupBarrier();
  }
  if (m0 + ra + 0u < M) {
    store(m0 + ra + 0u, n0 + rb + 0u, c0_0);
    store(m0 + ra + 0u, n0 + rb + 4u, c0_1);
  }
  if (m0 + ra + 1u < M) {
    store(m0 + ra + 1u, n0 + rb + 0u, c1_0);
    store(m0 + ra + 1u, n0 + rb + 4u, c1_1);
  }
  if (m0 + ra + 2u < M) {
    store(m0 + ra + 2u, n0 + rb + 0u, c2_0);
    store(m0 + ra + 2u, n0 + rb + 4u, c2_1);
  }
  if (m0 + ra + 3u < M) {
    store(m0 + ra + 3u, n0 + rb + 0u, c3_0);
    store(m0 + ra + 3u, n0 + rb + 4u, c3_1);
  }
  if (m0 + ra + 4u < M) {
    store(m0 + ra + 4u, n0 + rb + 0u, c4_0);
    store(m0 + ra + 4u, n0 + rb + 4u, c4_1);
  }
  if (m0 + ra + 5u < M) {
    store(m0 + ra + 5u, n0 + rb + 0u, c5_0);
    store(m0 + ra + 5u, n0 + rb + 4u, c5_1);
  }
  if (m0 + ra + 6u < M) {
    store(m0 + ra + 6u, n0 + rb + 0u, c6_0);
    store(m0 + ra + 6u, n0 + rb + 4u, c6_1);
  }
  if (m0 + ra + 7u < M) {
    store(m0 + ra + 7u, n0 + rb + 0u, c7_0);
    store(m0 + ra + 7u, n0 + rb + 4u, c7_1);
  }
}
