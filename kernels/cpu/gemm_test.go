//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"math"
	"os/exec"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/kilnml/kiln/internal/cpufeat"
)

// TestGemmGenerated checks that gemm_kernels_amd64.s is what gen_gemm.go
// writes (go generate ./kernels/cpu after changing the generator).
func TestGemmGenerated(t *testing.T) {
	out, err := exec.Command("go", "run", "gen_gemm.go", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("gen_gemm.go -check: %v\n%s", err, out)
	}
}

// gemmRef computes op(A)·op(B) + beta·C in float64 and, per element, the
// scale of the rounding error of any summation order: Σ|a·b| + |beta·c|.
func gemmRef(tA, tB bool, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) (out, scale []float64) {
	out = make([]float64, m*n)
	scale = make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := beta * c[i*ldc+j]
			abs := math.Abs(s)
			for p := range k {
				var av, bv float64
				if tA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
				abs += math.Abs(av * bv)
			}
			out[i*n+j], scale[i*n+j] = s, abs
		}
	}
	return out, scale
}

// TestGemmBlocked checks the blocked gemm directly against a float64 loop
// over odd shapes, transposed operands, padded strides and beta 0, 1 and
// 0.5, with the default block sizes and with tiny ones that make every
// shape cross block edges: within (k+2)·u·(Σ|a·b| + |beta·c|), exact on
// integer inputs, bitwise the same on a second call, when the rows are
// split over gemmRange calls with separate gemmWorks, and with the AVX2
// micro-kernels forced on a CPU with AVX-512 (newGemmWorkAVX2).
func TestGemmBlocked(t *testing.T) {
	if !gemmAsm {
		t.Skip("no AVX2+FMA")
	}
	testGemmBlocked[float32](t)
	testGemmBlocked[float64](t)
}

func testGemmBlocked[T float](t *testing.T) {
	r := newRand(11)
	var z T
	u := math.Pow(2, -53)
	if _, ok := any(z).(float32); ok {
		u = math.Pow(2, -24)
	}
	shapes := [][3]int{{1, 1, 1}, {1, 17, 5}, {7, 1, 3}, {6, 16, 4}, {13, 29, 31}, {5, 9, 0}, {37, 53, 300}, {121, 35, 257}, {2, 4100, 3}, {197, 23, 40}}
	// "small" blocks take the usual order for every m, "smallM" the
	// small-M order for every m, reading A in place (AVX-512) for every n;
	// the default takes it for m <= gemmSmallM, in place for n <=
	// gemmDirectN.
	blockSizes := map[string]func(w *gemmWork[T]){
		"default": func(*gemmWork[T]) {},
		"small":   func(w *gemmWork[T]) { w.mc, w.kc, w.nc, w.smallM = 12, 5, 32, 0 },
		"smallM":  func(w *gemmWork[T]) { w.mc, w.kc, w.nc, w.smallM, w.directMaxN = 12, 5, 32, 1<<30, 1<<30 },
	}
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, blocks := range []string{"default", "small", "smallM"} {
			for tr := range 4 {
				tA, tB := tr&1 != 0, tr&2 != 0
				for _, beta := range []T{0, 1, 0.5} {
					for _, ints := range []bool{true, false} {
						name := fmt.Sprintf("%T/%dx%dx%d/%s/tA=%v,tB=%v/beta=%v/ints=%v", z, m, n, k, blocks, tA, tB, beta, ints)
						lda, ldb, ldc := k+3, n+1, n+2
						if tA {
							lda = m + 2
						}
						if tB {
							ldb = k + 1
						}
						// Operands of the least length their shapes and
						// strides allow: a read past them panics.
						ar, ac, br, bc := m, k, k, n
						if tA {
							ar, ac = k, m
						}
						if tB {
							br, bc = n, k
						}
						a := randVals[T](r, max(0, (ar-1)*lda+ac), ints)
						b := randVals[T](r, max(0, (br-1)*ldb+bc), ints)
						c0 := randVals[T](r, m*ldc, ints)
						if beta == 0 {
							for i := range c0 {
								c0[i] = T(math.NaN()) // beta = 0 ignores C
							}
						}
						newW := func() *gemmWork[T] {
							w := newGemmWork[T](m, n, k)
							blockSizes[blocks](w)
							return w
						}
						c := append([]T(nil), c0...)
						w := newW()
						w.gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
						cRef := f64s(c0)
						if beta == 0 {
							clear(cRef)
						}
						want, scale := gemmRef(tA, tB, m, n, k, f64s(a), lda, f64s(b), ldb, float64(beta), cRef, ldc)
						bound := float64(k+2) * u
						if ints {
							bound = 0
						}
						for i := range m {
							for j := range n {
								g := float64(c[i*ldc+j])
								if d := math.Abs(g - want[i*n+j]); !(d <= bound*scale[i*n+j]) {
									t.Fatalf("%s: c[%d,%d] = %v, want %v (bound %g)", name, i, j, g, want[i*n+j], bound*scale[i*n+j])
								}
							}
							for j := n; j < ldc && i*ldc+j < len(c); j++ {
								if math.Float64bits(float64(c[i*ldc+j])) != math.Float64bits(float64(c0[i*ldc+j])) {
									t.Fatalf("%s: wrote c[%d,%d] past n", name, i, j)
								}
							}
						}
						again := append([]T(nil), c0...)
						w.gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, again, ldc)
						split := append([]T(nil), c0...)
						cuts := []int{0, m / 3, m/3 + (m+1)/2, m}
						for q := range 3 {
							newW().gemmRange(cuts[q], cuts[q+1], tA, tB, m, n, k, a, lda, b, ldb, beta, split, ldc)
						}
						// The other order, at the same KC: the same sums.
						other := append([]T(nil), c0...)
						ow := newW()
						if m <= ow.smallM {
							ow.smallM = 0
						} else {
							ow.smallM = m
						}
						ow.gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, other, ldc)
						// The AVX2 kernels alone (where the CPU has
						// AVX-512, the AVX-512 ones ran above): the same
						// chains, the same bits.
						avx2 := append([]T(nil), c0...)
						aw := newGemmWorkAVX2[T](m, n, k)
						blockSizes[blocks](aw)
						aw.gemm(tA, tB, m, n, k, a, lda, b, ldb, beta, avx2, ldc)
						for i := range c {
							x := math.Float64bits(float64(c[i]))
							if math.Float64bits(float64(again[i])) != x || math.Float64bits(float64(split[i])) != x || math.Float64bits(float64(other[i])) != x {
								t.Fatalf("%s: element %d differs between calls (%v, %v, split %v, other order %v)", name, i, c[i], again[i], split[i], other[i])
							}
							if math.Float64bits(float64(avx2[i])) != x {
								t.Fatalf("%s: element %d is %v with the AVX2 kernels, %v with gemmMicro's and gemmWide's", name, i, avx2[i], c[i])
							}
						}
					}
				}
			}
		}
	}
}

// newGemmWorkAVX2 returns newGemmWork's gemmWork with the AVX2 micro-kernels
// alone, whatever the CPU has.
func newGemmWorkAVX2[T float](m, n, k int) *gemmWork[T] {
	defer func(v bool) { gemmAVX512 = v }(gemmAVX512)
	gemmAVX512 = false
	return newGemmWork[T](m, n, k)
}

// TestGemmAVX2Forced checks that newGemmWorkAVX2 does run the AVX2 kernels
// (so that TestGemmBlocked compares two paths where the CPU has AVX-512).
func TestGemmAVX2Forced(t *testing.T) {
	w := newGemmWorkAVX2[float32](8, 8, 8)
	if w.wide != nil || reflect.ValueOf(w.kern).Pointer() != reflect.ValueOf(gemmKernel(sgemmKernel6x16)).Pointer() {
		t.Fatal("newGemmWorkAVX2 made a gemmWork with the AVX-512 kernels")
	}
	wd := newGemmWorkAVX2[float64](8, 8, 8)
	if wd.wide != nil || reflect.ValueOf(wd.kern).Pointer() != reflect.ValueOf(gemmKernel(dgemmKernel6x8)).Pointer() {
		t.Fatal("newGemmWorkAVX2 made an f64 gemmWork with the AVX-512 kernels")
	}
	if w := newGemmWork[float32](8, 8, 8); cpufeat.AVX512 && w.wide == nil {
		t.Fatal("newGemmWork chose no AVX-512 kernel on a CPU with AVX-512")
	}
}

// BenchmarkMatmul256, 512 and 1024 time a square f32 and f64 product with
// the blocked gemm and with gonum's BLAS, both on one thread (GOMAXPROCS 1
// for gonum, which otherwise splits the product across goroutines), and
// report GFLOP/s (2·n³ per product).
func BenchmarkMatmul256(b *testing.B)  { benchMatmul(b, 256) }
func BenchmarkMatmul512(b *testing.B)  { benchMatmul(b, 512) }
func BenchmarkMatmul1024(b *testing.B) { benchMatmul(b, 1024) }

func benchMatmul(b *testing.B, n int) {
	benchMatmulT[float32](b, n)
	benchMatmulT[float64](b, n)
}

func benchMatmulT[T float](b *testing.B, n int) {
	r := newRand(5)
	x := randVals[T](r, n*n, false)
	y := randVals[T](r, n*n, false)
	c := make([]T, n*n)
	var z T
	gemms := []struct {
		name string
		f    gemmFunc[T]
	}{{"kiln", nil}, {"gonum", gonumGemmOf[T]()}}
	if gemmAsm {
		gemms[0].f = gemmOf[T](n, n, n)
	} else {
		gemms = gemms[1:]
	}
	for _, g := range gemms {
		b.Run(fmt.Sprintf("%T/%s", z, g.name), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			for b.Loop() {
				g.f(false, false, n, n, n, x, n, y, n, c, n)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmMicroKernel times the f32 micro-kernel alone on L1-resident
// packed panels (kc = 256): the ceiling of the blocked gemm on one core.
// "kiln" is the kernel PeakGFLOPS measures (peakKernel), "avx2" the AVX2
// one. It reports GFLOP/s and GFLOP per CPU-second (cpuSeconds).
func BenchmarkGemmMicroKernel(b *testing.B) {
	if !gemmAsm {
		b.Skip("no AVX2+FMA")
	}
	kerns := []struct {
		name string
		kern func() (gemmKernel, int, int)
	}{{"kiln", peakKernel}, {"avx2", func() (gemmKernel, int, int) { return sgemmKernel6x16, 6, 16 }}}
	for _, kk := range kerns {
		b.Run(kk.name, func(b *testing.B) {
			kern, mr, nr := kk.kern()
			const kc = 256
			a := randVals[float32](newRand(1), mr*kc, false)
			p := randVals[float32](newRand(2), nr*kc, false)
			c := make([]float32, mr*nr)
			cpu0 := cpuSeconds()
			for b.Loop() {
				kern(kc, unsafe.Pointer(&a[0]), unsafe.Pointer(&p[0]), unsafe.Pointer(&c[0]), nr, 1)
			}
			flops := 2 * float64(mr*nr*kc) * float64(b.N)
			b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			reportPerCPU(b, flops/1e9, "GFLOP/cpu-s", cpu0)
		})
	}
}

// TestGemmSliceOrder checks the rounding order the blocked gemm documents
// (gemm.go): each element is the sum, in order, of one fused multiply-add
// chain per slice of the inner dimension, slices of gemmKC from 0. f64
// products are compared bitwise with the same chains computed with
// math.FMA, for inner dimensions a little over gemmKC (288: a 3×3
// convolution over 32 channels) and of several slices (784), in the
// small-M order and the usual one, with A and B read as they are and
// transposed. (A split of the rows or columns keeps these chains:
// TestGemmBlocked.)
func TestGemmSliceOrder(t *testing.T) {
	if !gemmAsm {
		t.Skip("no AVX2+FMA")
	}
	r := newRand(3)
	for _, k := range []int{288, 784} {
		for _, m := range []int{30, 250} { // small-M order, usual order
			for tr := range 4 {
				tA, tB := tr&1 != 0, tr&2 != 0
				n := 21
				a := randVals[float64](r, m*k, false)
				b := randVals[float64](r, k*n, false)
				lda, ldb := k, n
				if tA {
					lda = m
				}
				if tB {
					ldb = k
				}
				at := func(i, p int) float64 {
					if tA {
						return a[p*lda+i]
					}
					return a[i*lda+p]
				}
				bt := func(p, j int) float64 {
					if tB {
						return b[j*ldb+p]
					}
					return b[p*ldb+j]
				}
				w := newGemmWork[float64](m, n, k)
				got := make([]float64, m*n)
				w.gemm(tA, tB, m, n, k, a, lda, b, ldb, 0, got, n)
				d := gemmKC
				for i := range m {
					for j := range n {
						var sum float64
						for p0 := 0; p0 < k; p0 += d {
							var s float64
							for p := p0; p < min(p0+d, k); p++ {
								s = math.FMA(at(i, p), bt(p, j), s)
							}
							if p0 == 0 {
								sum = s
							} else {
								sum += s
							}
						}
						if math.Float64bits(got[i*n+j]) != math.Float64bits(sum) {
							t.Fatalf("k=%d m=%d tA=%v tB=%v: c[%d,%d] = %v, want %v (slices of %d)", k, m, tA, tB, i, j, got[i*n+j], sum, d)
						}
					}
				}
			}
		}
	}
}
