package cpu

import "unsafe"

// The blocked gemm: C = op(A)·op(B) + beta·C for row-major operands, with
// the loop structure of Goto's algorithm (as in BLIS). The product is cut
// into NC-wide column blocks of C; each is summed over KC-deep slices of
// the inner dimension; for each slice the KC×NC block of op(B) is packed
// into NR-wide panels, then for each MC-tall row block the MC×KC block of
// op(A) is packed into MR-tall panels and the macro-kernel runs the
// micro-kernel (gemm_kernels_amd64.s; with AVX-512 those of
// gemm_avx512_amd64.s, 4 panels at once where whole) over every MR×NR tile
// of the block.
// Packed panels are padded with zeros to whole tiles; a tile that sticks
// out of C is computed into a scratch tile and its valid part copied (or
// added) into C.
//
// Rounding order. Each element of C is, for beta = 0,
//
//	c = (...((s_0) + s_1) + ...) + s_last
//
// where s_q is the micro-kernel's fused multiply-add chain over slice q of
// the inner dimension (slices of gemmKC elements from 0, in order), and
// with beta ≠ 0, c is first scaled by beta (beta = 1: left as is) and every
// s_q is added to it. That order depends only on k and gemmKC, not on
// where the element lies in its tile, its block or the range of rows or
// columns a call computes, so the result is bitwise the same for every
// call and for any split of the rows (gemmWork.gemmRange) or columns over
// workers. The inner dimension is never split.

// Cache blocking: KC×NR B panels stay in L1 while a tile runs, the MC×KC
// packed A block in L2, the KC×NC packed B block in L3.
//
// A call with few rows (at most gemmSmallM: a layer's product over a
// batch) packs its rows of op(A) for a slice once, as one block, and
// packs each B panel just before the tiles that use it, into an L1-sized
// buffer: its B is then read once and its packed panels never leave L1,
// where the usual order writes the whole packed KC×NC block out to L3 and
// reads it back for only a few row blocks. The loops and the sums are the
// same, so the result is bitwise the same either way. With the AVX-512
// kernels, a small-M call with at most gemmDirectN columns (attention's
// per-head products: 128 rows by 32 columns) packs only the rows past its
// last whole 24-row block: the kernels of gemmDirect read the blocks' rows
// of op(A) in place, the same chains, so again the same bits.
const (
	gemmKC     = 256
	gemmMC     = 120 // a multiple of every MR
	gemmNC     = 4080
	gemmSmallM = 192 // a small-M call's A block: 192×256 f32, 192 KiB, in L2
)

// gemmKernel is a micro-kernel: the MR×NR tile of C at c (row stride ldc
// elements) from kc steps of a packed A panel at a and a packed B panel at
// b; mode 0 stores the tile, mode 1 adds it to C.
type gemmKernel func(kc int, a, b, c unsafe.Pointer, ldc, mode int)

// gemmDirectKernel is a micro-kernel that reads op(A) in place rather than
// packed: the tile of C at c from kc steps of rows of op(A) at a (from A,
// or from Aᵀ, with row stride lda elements) and of a packed B panel at b;
// mode as gemmKernel's.
type gemmDirectKernel func(kc int, a, b, c unsafe.Pointer, ldc, mode, lda int)

// gemmDirectN is the widest product (columns of C) whose A the small-M
// order reads in place, where there are in-place kernels (gemmDirect):
// packing A costs about as much as the multiply-adds of a few B panels, so
// for few columns it does not pay; for many, the packed panels' one
// contiguous stream is worth their packing (BenchmarkMatmulHeads, Zen 5:
// 128×32×128 about 1.25× faster in place, 128×128×32 about 0.7×).
const gemmDirectN = 64

// gemmWork is the blocked gemm's state for one caller: the micro-kernel,
// the block sizes and the packing buffers, sized when it is made so that
// calls with operands no larger than those it was made for allocate
// nothing. It must not be used by two goroutines at once: parallel callers
// each have their own (newGemmWork) and split the rows of C between them
// with gemmRange.
type gemmWork[T float] struct {
	kern       gemmKernel
	mr, nr     int
	wide       gemmKernel       // nil, or the kernel of wideRows rows (gemmWide)
	wideRows   int              // a multiple of mr
	directT    gemmDirectKernel // nil, or wide's rows read in place from Aᵀ
	directN    gemmDirectKernel // and from A (gemmDirect)
	directMaxN int              // products with at most this many columns read A in place (gemmDirectN; the tests raise it)
	mc, kc, nc int
	smallM     int // calls with at most this many rows take the small-M order
	packA      []T // MC×KC, in MR-row panels
	packB      []T // KC×NC, in NR-column panels
	tile       []T // MR×NR scratch for edge tiles
}

// newGemmWork returns a gemmWork for products of at most m×k by k×n (larger
// ones grow its buffers once).
func newGemmWork[T float](m, n, k int) *gemmWork[T] {
	kern, mr, nr := gemmMicro[T]()
	w := &gemmWork[T]{kern: kern, mr: mr, nr: nr, mc: gemmMC, kc: gemmKC, nc: gemmNC, smallM: gemmSmallM}
	w.wide, w.wideRows = gemmWide[T]()
	w.directT, w.directN = gemmDirect[T]()
	w.directMaxN = gemmDirectN
	w.tile = make([]T, max(mr, w.wideRows)*nr)
	w.reserve(m, n, k)
	return w
}

// reserve makes the packing buffers large enough for an m×k by k×n product.
func (w *gemmWork[T]) reserve(m, n, k int) {
	kc := min(w.kc, k)
	rows := min(w.mc, roundUp(m, w.mr))
	if m <= w.smallM {
		rows = roundUp(m, w.mr) // one block of every row
	}
	if need := rows * kc; len(w.packA) < need {
		w.packA = make([]T, need)
	}
	if need := min(w.nc, roundUp(n, w.nr)) * kc; len(w.packB) < need {
		w.packB = make([]T, need)
	}
}

// roundUp rounds x up to a multiple of q.
func roundUp(x, q int) int { return (x + q - 1) / q * q }

// gemm computes C = op(A)·op(B) + beta·C, op(X) = Xᵀ when tX: A is m×k (or,
// transposed, k×m) with row stride lda, B is k×n (n×k) with row stride ldb,
// C is m×n with row stride ldc. beta = 0 ignores C's contents (NaN
// included).
func (w *gemmWork[T]) gemm(tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	w.gemmRange(0, m, tA, tB, m, n, k, a, lda, b, ldb, beta, c, ldc)
}

// gemmRange computes rows [mLo, mHi) of C = op(A)·op(B) + beta·C (see gemm)
// and touches no other row of C. Calls over disjoint row ranges, each with
// its own gemmWork, may run in parallel and give, bitwise, the result of
// one gemm over all rows: this is how a worker pool should split a product
// (by rows, or by columns with the same argument; never over k).
func (w *gemmWork[T]) gemmRange(mLo, mHi int, tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if mLo < 0 || mHi > m || mLo >= mHi || n <= 0 {
		return
	}
	if len(c) < (m-1)*ldc+n {
		panic("cpu: gemm: C is too short")
	}
	if k <= 0 {
		for i := mLo; i < mHi; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
			} else if beta != 1 {
				for j := range row {
					row[j] *= beta
				}
			}
		}
		return
	}
	if (!tA && len(a) < (m-1)*lda+k) || (tA && len(a) < (k-1)*lda+m) ||
		(!tB && len(b) < (k-1)*ldb+n) || (tB && len(b) < (n-1)*ldb+k) {
		panic("cpu: gemm: an operand is too short")
	}
	if beta != 0 && beta != 1 {
		for i := mLo; i < mHi; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				row[j] *= beta
			}
		}
	}
	w.reserve(mHi-mLo, n, k)
	if mb := mHi - mLo; mb <= w.smallM {
		// A few columns: the whole wideRows-row blocks of op(A) are read
		// in place by the direct kernels, the rest packed.
		direct := w.directN
		if tA {
			direct = w.directT
		}
		nd := 0 // rows [mLo, mLo+nd) read in place
		if direct != nil && n <= w.directMaxN {
			nd = mb / w.wideRows * w.wideRows
		}
		for pc := 0; pc < k; pc += w.kc {
			kb := min(w.kc, k-pc)
			mode := 1
			if pc == 0 && beta == 0 {
				mode = 0
			}
			if nd < mb {
				w.packPanelsA(tA, a, lda, mLo+nd, mb-nd, pc, kb)
			}
			for jr := 0; jr < n; jr += w.nr {
				nb := min(w.nr, n-jr)
				w.packPanelsB(tB, b, ldb, pc, kb, jr, nb)
				for ir := 0; ir < nd; ir += w.wideRows {
					var ap unsafe.Pointer
					if tA {
						ap = unsafe.Pointer(&a[pc*lda+mLo+ir])
					} else {
						ap = unsafe.Pointer(&a[(mLo+ir)*lda+pc])
					}
					w.tileDirect(direct, ap, lda, nb, kb, c, (mLo+ir)*ldc+jr, ldc, mode)
				}
				if nd < mb {
					w.macro(mb-nd, nb, kb, c, (mLo+nd)*ldc+jr, ldc, mode)
				}
			}
		}
		return
	}
	for jc := 0; jc < n; jc += w.nc {
		nb := min(w.nc, n-jc)
		for pc := 0; pc < k; pc += w.kc {
			kb := min(w.kc, k-pc)
			mode := 1
			if pc == 0 && beta == 0 {
				mode = 0
			}
			w.packPanelsB(tB, b, ldb, pc, kb, jc, nb)
			for ic := mLo; ic < mHi; ic += w.mc {
				mb := min(w.mc, mHi-ic)
				w.packPanelsA(tA, a, lda, ic, mb, pc, kb)
				w.macro(mb, nb, kb, c, ic*ldc+jc, ldc, mode)
			}
		}
	}
}

// packPanelsA packs rows [i0, i0+mb) and columns [p0, p0+kb) of op(A) into
// MR-row panels, each kb steps of MR values, zero rows past mb.
func (w *gemmWork[T]) packPanelsA(tA bool, a []T, lda, i0, mb, p0, kb int) {
	mr := w.mr
	for ip := 0; ip < mb; ip += mr {
		dst := w.packA[ip*kb : (ip+mr)*kb]
		rows := min(mr, mb-ip)
		size := int(unsafe.Sizeof(a[0]))
		if tA {
			// op(A)[i, p] = a[p*lda + i]: a step is contiguous.
			if rows == 6 && mr == 6 && size == 4 {
				// A whole f32 panel: each step's 24 bytes moved by two
				// loads and two stores in assembly.
				src := a[p0*lda+i0+ip : (p0+kb-1)*lda+i0+ip+6]
				gemmPackAT6(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), lda*size, kb)
				continue
			}
			if rows == 6 && mr == 6 {
				for p := range kb {
					src := a[(p0+p)*lda+i0+ip : (p0+p)*lda+i0+ip+6 : (p0+p)*lda+i0+ip+6]
					d := dst[p*6 : p*6+6 : p*6+6]
					d[0], d[1], d[2], d[3], d[4], d[5] = src[0], src[1], src[2], src[3], src[4], src[5]
				}
				continue
			}
			for p := range kb {
				src := a[(p0+p)*lda+i0+ip:]
				d := dst[p*mr : p*mr+mr]
				copy(d[:rows], src[:rows])
				clear(d[rows:])
			}
			continue
		}
		if rows == 6 && mr == 6 {
			// A whole panel (the 6-row micro-kernels): one step, six
			// values, at a time, read from six rows and written in order.
			base := (i0+ip)*lda + p0
			r0, r1, r2 := a[base:base+kb], a[base+lda:base+lda+kb], a[base+2*lda:base+2*lda+kb]
			r3, r4, r5 := a[base+3*lda:base+3*lda+kb], a[base+4*lda:base+4*lda+kb], a[base+5*lda:base+5*lda+kb]
			p4 := 0
			if size == 4 {
				// f32: four steps at a time in assembly (4×4 blocks
				// transposed in registers), the rest below.
				p4 = kb &^ 3
				if p4 > 0 {
					gemmPackA6(unsafe.Pointer(&dst[0]), unsafe.Pointer(&r0[0]), lda*size, p4)
				}
			}
			for p := p4; p < kb; p++ {
				d := dst[p*6 : p*6+6 : p*6+6]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
			continue
		}
		for r := range rows {
			src := a[(i0+ip+r)*lda+p0 : (i0+ip+r)*lda+p0+kb]
			for p, v := range src {
				dst[p*mr+r] = v
			}
		}
		for r := rows; r < mr; r++ {
			for p := range kb {
				dst[p*mr+r] = 0
			}
		}
	}
}

// packPanelsB packs rows [p0, p0+kb) and columns [j0, j0+nb) of op(B) into
// NR-column panels, each kb steps of NR values, zero columns past nb.
func (w *gemmWork[T]) packPanelsB(tB bool, b []T, ldb, p0, kb, j0, nb int) {
	nr := w.nr
	for jp := 0; jp < nb; jp += nr {
		dst := w.packB[jp*kb : (jp+nr)*kb]
		cols := min(nr, nb-jp)
		if !tB {
			if size := int(unsafe.Sizeof(b[0])); cols == nr && nr*size == 64 {
				// A whole panel: each row of it is one 64-byte block (16
				// f32 or 8 f64), moved by one loop in assembly rather than
				// by a call to memmove each.
				src := b[p0*ldb+j0+jp : (p0+kb-1)*ldb+j0+jp+nr]
				gemmCopyRows64(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), ldb*size, kb)
				continue
			}
			for p := range kb {
				src := b[(p0+p)*ldb+j0+jp:]
				d := dst[p*nr : p*nr+nr]
				copy(d[:cols], src[:cols])
				clear(d[cols:])
			}
			continue
		}
		// op(B)[p, j] = b[j*ldb + p]: a column is contiguous.
		if size := int(unsafe.Sizeof(b[0])); cols == 16 && nr == 16 && size == 4 && kb >= 8 {
			// A whole f32 panel: 8×8 blocks transposed in registers, then
			// the steps past the last multiple of 8 one by one.
			k8 := kb &^ 7
			src := b[(j0+jp)*ldb+p0 : (j0+jp+15)*ldb+p0+kb]
			gemmPackTB16(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), ldb*size, k8)
			for j := range cols {
				for p := k8; p < kb; p++ {
					dst[p*nr+j] = src[j*ldb+p]
				}
			}
			continue
		}
		for j := range cols {
			src := b[(j0+jp+j)*ldb+p0 : (j0+jp+j)*ldb+p0+kb]
			for p, v := range src {
				dst[p*nr+j] = v
			}
		}
		for j := cols; j < nr; j++ {
			for p := range kb {
				dst[p*nr+j] = 0
			}
		}
	}
}

// macro runs the micro-kernel over the mb×nb block of C at c[off:] from the
// packed buffers (kb steps).
func (w *gemmWork[T]) macro(mb, nb, kb int, c []T, off, ldc, mode int) {
	mr, nr := w.mr, w.nr
	for jr := 0; jr < nb; jr += nr {
		bp := unsafe.Pointer(&w.packB[jr*kb])
		cols := min(nr, nb-jr)
		for ir := 0; ir < mb; {
			ap := unsafe.Pointer(&w.packA[ir*kb])
			rows := min(mr, mb-ir)
			co := off + ir*ldc + jr
			if w.wide != nil && cols == nr && mb-ir >= w.wideRows {
				// wideRows rows at once: consecutive A panels.
				w.wide(kb, ap, bp, unsafe.Pointer(&c[co]), ldc, mode)
				ir += w.wideRows
				continue
			}
			ir += mr
			if rows == mr && cols == nr {
				w.kern(kb, ap, bp, unsafe.Pointer(&c[co]), ldc, mode)
				continue
			}
			t := w.tile
			w.kern(kb, ap, bp, unsafe.Pointer(&t[0]), nr, 0)
			for r := range rows {
				dst := c[co+r*ldc : co+r*ldc+cols]
				src := t[r*nr : r*nr+cols]
				if mode == 0 {
					copy(dst, src)
				} else {
					for j, v := range src {
						dst[j] += v
					}
				}
			}
		}
	}
}

// tileDirect runs kern, a direct kernel, for the wideRows×nb tile of C at
// c[off:] (nb at most NR) from kb steps of op(A) in place at a (row stride
// lda) and the packed B panel at packB[0].
func (w *gemmWork[T]) tileDirect(kern gemmDirectKernel, a unsafe.Pointer, lda, nb, kb int, c []T, off, ldc, mode int) {
	bp := unsafe.Pointer(&w.packB[0])
	nr := w.nr
	if nb == nr {
		kern(kb, a, bp, unsafe.Pointer(&c[off]), ldc, mode, lda)
		return
	}
	t := w.tile
	kern(kb, a, bp, unsafe.Pointer(&t[0]), nr, 0, lda)
	for r := range w.wideRows {
		dst := c[off+r*ldc : off+r*ldc+nb]
		src := t[r*nr : r*nr+nb]
		if mode == 0 {
			copy(dst, src)
		} else {
			for j, v := range src {
				dst[j] += v
			}
		}
	}
}
