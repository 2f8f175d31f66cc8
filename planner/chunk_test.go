package planner_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// TestChunkedPlacement plans the training steps of the MLP and the digits
// MLP with chunks smaller than their arenas: Check proves that no buffer
// straddles a chunk boundary, the arena spans several chunks, and the
// placement stays within a small factor of the lower bound (reported).
func TestChunkedPlacement(t *testing.T) {
	adam, _ := passes.DefaultOptimizer("adam")
	for name, src := range map[string][]byte{"mlp": []byte(mlpSrc), "digits": examples.DigitsMLP} {
		g, err := ir.Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := kiln.Compile(g, kiln.Options{Optimizer: &adam})
		if err != nil {
			t.Fatal(err)
		}
		var largest int64
		for _, b := range whole.Buffers {
			largest = max(largest, (b.Size+planner.Align-1)/planner.Align*planner.Align)
		}
		for _, chunk := range []int64{largest, 2 * largest, 4 * largest} {
			t.Run(fmt.Sprintf("%s/chunk=%d", name, chunk), func(t *testing.T) {
				p, err := kiln.Compile(g, kiln.Options{Optimizer: &adam, Plan: planner.Options{ChunkBytes: chunk}})
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Check(); err != nil {
					t.Fatalf("Check: %v", err)
				}
				if p.ChunkBytes != chunk {
					t.Fatalf("ChunkBytes = %d, want %d", p.ChunkBytes, chunk)
				}
				if p.Chunks() < 2 {
					t.Fatalf("arena %d bytes in chunks of %d: %d chunk, want several", p.ArenaBytes, chunk, p.Chunks())
				}
				used := map[int64]bool{}
				for i, b := range p.Buffers {
					if b.Size > 0 {
						used[p.Chunk(i)] = true
						if end := b.Offset + b.Size - 1; end/chunk != b.Offset/chunk {
							t.Errorf("%%%s [%d,%d] straddles a chunk boundary", b.Name, b.Offset, end)
						}
					}
				}
				if len(used) < 2 {
					t.Errorf("buffers in %d chunk(s), want several", len(used))
				}
				if p.ArenaBytes < p.LowerBound || p.Ratio() > 2 {
					t.Errorf("arena %d for lower bound %d (ratio %.3f): want between 1 and 2", p.ArenaBytes, p.LowerBound, p.Ratio())
				}
				for _, s := range []string{p.Report(), p.Format()} {
					if want := fmt.Sprintf("chunks of at most %d bytes", chunk); !strings.Contains(s, want) {
						t.Errorf("report does not say %q:\n%s", want, s[:min(len(s), 300)])
					}
				}
				t.Logf("arena %d (unchunked %d), lower bound %d, ratio %.3f, %d chunks", p.ArenaBytes, whole.ArenaBytes, p.LowerBound, p.Ratio(), p.Chunks())
			})
		}
	}
}

// TestChunkErrors: a buffer larger than a chunk, or a chunk size that is
// not a multiple of Align, is refused with the sizes named; a plan whose
// buffer straddles a boundary fails Check.
func TestChunkErrors(t *testing.T) {
	g, err := ir.Parse("mlp", []byte(mlpSrc))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		chunk int64
		want  string
	}{
		{1024, "value %x (f32[32,20], 2560 bytes) is larger than the 1024-byte arena chunk"},
		{1000, "chunk size 1000 bytes is not a positive multiple of 256"},
		{-256, "chunk size -256 bytes is not a positive multiple of 256"},
	} {
		_, err := kiln.Compile(g, kiln.Options{Grad: true, Plan: planner.Options{ChunkBytes: tc.chunk}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ChunkBytes %d: err = %v, want %q", tc.chunk, err, tc.want)
		}
	}
	p, err := kiln.Compile(g, kiln.Options{Grad: true, O0: true})
	if err != nil {
		t.Fatal(err)
	}
	// A boundary one Align into a buffer of more than Align bytes.
	var chunk int64
	for _, b := range p.Buffers {
		if b.Size > planner.Align {
			chunk = b.Offset + planner.Align
			break
		}
	}
	if chunk == 0 {
		t.Fatal("the plan has no buffer of more than 256 bytes")
	}
	p.ChunkBytes = chunk
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("straddles the %d-byte chunk boundary", chunk)) {
		t.Errorf("Check of a straddling plan = %v", err)
	}
}

// TestFileChunks: a plan with chunks round-trips in a version 3 file; one
// without stays a version 2 file; chunk_bytes in a version 2 file is
// refused.
func TestFileChunks(t *testing.T) {
	g, err := ir.Parse("mlp", []byte(mlpSrc))
	if err != nil {
		t.Fatal(err)
	}
	chunked, err := kiln.Compile(g, kiln.Options{Grad: true, Plan: planner.Options{ChunkBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := kiln.Compile(g, kiln.Options{Grad: true})
	if err != nil {
		t.Fatal(err)
	}
	enc := func(p *planner.Plan) []byte {
		var buf bytes.Buffer
		if err := planner.Encode(&buf, &planner.File{Plans: map[string]*planner.Plan{"p": p}}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	for _, tc := range []struct {
		p       *planner.Plan
		version uint32
	}{{chunked, 3}, {plain, 2}} {
		data := enc(tc.p)
		if v := binary.LittleEndian.Uint32(data[8:]); v != tc.version {
			t.Errorf("ChunkBytes %d: file version %d, want %d", tc.p.ChunkBytes, v, tc.version)
		}
		f, err := planner.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.p, f.Plans["p"], planCmp); d != "" {
			t.Errorf("round trip (-want +got):\n%s", d)
		}
	}
	keep := func(doc []byte) []byte { return doc }
	if _, err := planner.Decode(bytes.NewReader(repack(t, enc(chunked), 2, keep))); err == nil || !strings.Contains(err.Error(), "chunk_bytes 4096 in a version 2 file") {
		t.Errorf("chunks in a version 2 file: %v", err)
	}
	bad := repack(t, enc(chunked), 3, func(doc []byte) []byte {
		return bytes.Replace(doc, []byte(`"chunk_bytes":4096`), []byte(`"chunk_bytes":512`), 1)
	})
	if _, err := planner.Decode(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "chunk boundary") {
		t.Errorf("a plan placed for 4096-byte chunks read as 512: %v", err)
	}
}
