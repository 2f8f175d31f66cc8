package tests

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// The GPT-style benchmark model bench/gpt.kir: batches of 16 sequences of
// 128 tokens in [0,256), width 256, four pre-norm blocks of 8 heads with
// an MLP of 1024, trained with Adam (bench/compare_pytorch.sh MODEL=gpt
// runs the same model in PyTorch, bench/pytorch_step.py).
const (
	gptFile                    = "../bench/gpt.kir"
	gptBatch, gptSeq, gptVocab = 16, 128, 256
	gptWidth, gptBlocks        = 256, 4
	gptHeads, gptHidden        = 8, 1024
)

// gptCausal says whether bench/gpt.kir's attention is causal, as a
// GPT's is. It is the one switch for the mask: the header written below
// (which bench/compare_pytorch.sh reads to give PyTorch the same mask)
// follows it; go test ./tests -run TestBenchGPT -update rewrites the file.
const gptCausal = true

// gptOptions are the builder's options for bench/gpt.kir.
func gptOptions() frontends.TransformerOptions {
	return frontends.TransformerOptions{Vocab: gptVocab, DModel: gptWidth, Blocks: gptBlocks,
		BlockOptions: frontends.BlockOptions{Heads: gptHeads, Hidden: gptHidden, Causal: gptCausal}}
}

// gptHeader is bench/gpt.kir's comment: what the model is, the flags
// kiln bench and bench/pytorch_step.py take for it, and how it is made.
func gptHeader() string {
	attention, pyFlag := "every position attends to every position (no mask)", "full"
	if gptCausal {
		attention, pyFlag = "each position attends to itself and the positions before it (causal)", "causal"
	}
	return `# A GPT-style transformer training step: batches of 16 sequences of 128
# tokens in [0,256). Token and learned position embeddings of width 256;
# four pre-norm blocks of
#   h = x + attention(layer_norm(x))        8 heads of width 32, softmax
#   y = h + fc2(gelu(fc1(layer_norm(h))))   exact gelu, hidden width 1024
# then a final layer_norm and a linear map to the 256 logits of each of the
# 16*128 positions; the loss is the mean cross-entropy against %y. In the
# attention ` + attention + `.
#   %x: the tokens [16,128]; %y: the targets [16,128]
# kiln bench flags: -optimizer adam
# pytorch_step.py flags: --attention ` + pyFlag + `
# Generated from the Go builder (frontends.Builder.Transformer) by
#   go test ./tests -run TestBenchGPT -update
`
}

// gptGraph builds bench/gpt.kir's graph: the transformer's logits and the
// mean softmax cross-entropy against the targets, the only output.
func gptGraph(t *testing.T) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("gpt")
	x := b.Input("x", ir.I64, gptBatch, gptSeq)
	y := b.Input("y", ir.I64, gptBatch, gptSeq)
	logits := b.Transformer(x, gptOptions())
	b.Output(b.Rename(b.SoftmaxCrossEntropy(logits, b.Reshape(y, gptBatch*gptSeq)), "loss"))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestBenchGPT checks that bench/gpt.kir is the graph gptGraph builds,
// with the current header (-update rewrites it), and that it compiles to
// an Adam training step.
func TestBenchGPT(t *testing.T) {
	want := gptGraph(t).Format()
	header := gptHeader()
	if golden.Update() {
		if err := os.WriteFile(gptFile, []byte(header+want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile(gptFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), header) {
		t.Errorf("%s: the header comment is stale; run go test ./tests -run TestBenchGPT -update", gptFile)
	}
	parsed, err := ir.Parse(gptFile, src)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(parsed.Format(), want); d != "" {
		t.Fatalf("%s is not the builder's graph; run go test ./tests -run TestBenchGPT -update (-file +builder):\n%s", gptFile, d)
	}
	opt, err := passes.DefaultOptimizer("adam")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kiln.Compile(parsed, kiln.Options{Grad: true, Optimizer: &opt}); err != nil {
		t.Errorf("%s: %v", gptFile, err)
	}
}
