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
  let t1 = select(0.0, t0, t0 > 0.0);
  return t1;
}
const M = 31u;
const N = 67u;
const K = 20u;
const TILE = 64u;
const KT = 16u;
var<workgroup> As: array<f32, 1024>;
var<workgroup> Bs: array<f32, 1024>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let bz = wid.z;
  let aoff = 0u;
  let boff = 0u;
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  let tid = lid.y * 16u + lid.x;
  var c0 = vec4<f32>(0.0);
  var c1 = vec4<f32>(0.0);
  var c2 = vec4<f32>(0.0);
  var c3 = vec4<f32>(0.0);
  let ra = lid.y * 4u;
  let rb = lid.x * 4u;
  for (var k0 = 0u; k0 < K; k0 += KT) {
    for (var l = 0u; l < 4u; l++) {
      let e = tid + l * 256u;
      let r = e / KT;
      let kk = e % KT;
      var av = 0.0;
      if (m0 + r < M && k0 + kk < K) { av = a[aoff + (m0 + r) * K + k0 + kk]; }
      As[kk * TILE + r] = av;
      let kb = e / TILE;
      let c = e % TILE;
      var bv = 0.0;
      if (k0 + kb < K && n0 + c < N) { bv = b[boff + (k0 + kb) * N + n0 + c]; }
      Bs[kb * TILE + c] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < KT; kk++) {
      let br = vec4<f32>(Bs[kk * TILE + rb], Bs[kk * TILE + rb + 1u], Bs[kk * TILE + rb + 2u], Bs[kk * TILE + rb + 3u]);
      c0 = fma(vec4<f32>(As[kk * TILE + ra]), br, c0);
      c1 = fma(vec4<f32>(As[kk * TILE + ra + 1u]), br, c1);
      c2 = fma(vec4<f32>(As[kk * TILE + ra + 2u]), br, c2);
      c3 = fma(vec4<f32>(As[kk * TILE + ra + 3u]), br, c3);
    }
    workgroupBarrier();
  }
  var rows = array<vec4<f32>, 4>(c0, c1, c2, c3);
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + ra + i;
    if (m >= M) { break; }
    let row = rows[i];
    for (var j = 0u; j < 4u; j++) {
      let nn = n0 + rb + j;
      if (nn >= N) { break; }
      let p = bz * M * N + m * N + nn;
      let v = row[j];
      out[p] = epilogue(p, v);
    }
  }
}
