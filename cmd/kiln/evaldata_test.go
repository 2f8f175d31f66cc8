package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// flipLabels returns the CSV text of separableCSV with every label
// flipped.
func flipLabels(csvText string) string {
	lines := strings.Split(csvText, "\n")
	for i, l := range lines[1:] {
		switch {
		case strings.HasSuffix(l, ",0"):
			lines[i+1] = strings.TrimSuffix(l, "0") + "1"
		case strings.HasSuffix(l, ",1"):
			lines[i+1] = strings.TrimSuffix(l, "1") + "0"
		}
	}
	return strings.Join(lines, "\n")
}

// TestTrainEvalData checks that -eval-data is the held-out data: the model
// trains on every row of -data and is evaluated on the file, whose labels
// here are the opposite of the training data's, so the held-out accuracy
// is near 0 where the training accuracy is near 100%.
func TestTrainEvalData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := writeFile(t, "m.kir", tinyMLPKir)
	data := filepath.Join(dir, "train.csv")
	os.WriteFile(data, []byte(separableCSV(160, 2, 1)), 0o644)
	evalCSV := filepath.Join(dir, "eval.csv")
	os.WriteFile(evalCSV, []byte(flipLabels(separableCSV(40, 2, 2))), 0o644)
	r := runKiln(t, "train", model, "-data", data, "-eval-data", evalCSV, "-epochs", "10")
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "160 training rows, 40 held out")
	out := parseTrain(t, r.stdout)
	if out.accuracy > 10 {
		t.Errorf("held-out accuracy %.2f%% on flipped labels, want at most 10%%:\n%s", out.accuracy, r.stdout)
	}
	if !regexp.MustCompile(`epoch  10/10 .* train acc (9\d|100)\.\d\d%`).MatchString(r.stdout) {
		t.Errorf("want a training accuracy of at least 90%%:\n%s", r.stdout)
	}
}

// TestTrainEvalDataErrors checks the flags' errors: each one line.
func TestTrainEvalDataErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := writeFile(t, "m.kir", tinyMLPKir)
	data := filepath.Join(dir, "train.csv")
	os.WriteFile(data, []byte(separableCSV(64, 2, 1)), 0o644)
	wide := filepath.Join(dir, "wide.csv")
	os.WriteFile(wide, []byte(separableCSV(16, 3, 1)), 0o644)
	seek := writeFile(t, "seek.kir", seekKir)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"holdout too", []string{model, "-data", data, "-eval-data", data, "-holdout", "0.5"}, 2, "-eval-data and -holdout both choose the held-out rows; give one"},
		{"features", []string{model, "-data", data, "-eval-data", wide}, 1, "-eval-data " + wide + ": expected 2 features per row, as " + data + " has, found 3"},
		{"missing", []string{model, "-data", data, "-eval-data", filepath.Join(dir, "none.csv")}, 1, "no such file"},
		{"eval-every", []string{model, "-data", data, "-eval-every", "-1"}, 2, "-eval-every must be at least 1, found -1"},
		{"no inputs", []string{seek, "-steps", "2", "-eval-every", "1"}, 2, "-eval-every: the graph takes no inputs, so there is no held-out data"},
		{"save-best is -save", []string{model, "-data", data, "-save", filepath.Join(dir, "p"), "-save-best", filepath.Join(dir, "p")}, 2, "is also -save"},
		{"save-best unwritable", []string{model, "-data", data, "-save-best", filepath.Join(dir, "no", "p")}, 1, "-save-best " + filepath.Join(dir, "no", "p") + ": cannot write in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"train"}, tc.args...)...)
			r.want(t, tc.code)
			stderr := r.stderr
			if tc.code == 2 { // a usage error: its line, then the usage
				stderr, _, _ = strings.Cut(stderr, "\nusage: ")
				stderr += "\n"
			}
			if line := oneLine(t, stderr); !strings.Contains(line, tc.want) {
				t.Errorf("error %q, want %q", line, tc.want)
			}
			if strings.Contains(r.stdout, "epoch ") {
				t.Errorf("trained before the error:\n%s", r.stdout)
			}
		})
	}
}

var (
	evalLine = regexp.MustCompile(`(?m)^step +(\d+)  held-out loss (\d+\.\d+)  R² (-?\d+\.\d+)$`)
	bestLine = regexp.MustCompile(`(?m)^saved the best params \(step (\d+), held-out loss \d+\.\d+, R² (-?\d+\.\d+)\) to (.*)$`)
)

// TestTrainEvalEverySaveBest trains a regression (CSV float targets, a
// held-out CSV file) with -eval-every and -save-best: the evaluations
// change no param, the best file holds the params of the step it names
// (the same as a run stopped there), and a run stopped and resumed keeps
// the same best.
func TestTrainEvalEverySaveBest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := writeFile(t, "m.kir", regressionKir)
	data := filepath.Join(dir, "train.csv")
	os.WriteFile(data, []byte(regressionCSV(64, 1)), 0o644) // 2 batches of 32
	evalCSV := filepath.Join(dir, "eval.csv")
	os.WriteFile(evalCSV, []byte(regressionCSV(50, 2)), 0o644)
	path := func(name string) string { return filepath.Join(dir, name) }
	args := []string{"train", model, "-data", data, "-eval-data", evalCSV, "-lr", "0.03", "-epochs", "12"}

	plain := runKiln(t, append(args, "-save", path("plain"))...)
	plain.want(t, 0)
	r := runKiln(t, append(args, "-save", path("last"), "-eval-every", "4", "-save-best", path("best"))...)
	r.want(t, 0)
	if a, b := readBytes(t, path("plain")), readBytes(t, path("last")); !bytes.Equal(a, b) {
		t.Error("-eval-every changed the trained params")
	}
	evals := evalLine.FindAllStringSubmatch(r.stdout, -1)
	if len(evals) != 6 || evals[5][1] != "24" {
		t.Fatalf("%d evaluation lines, want 6 (every 4 of 24 steps):\n%s", len(evals), r.stdout)
	}
	m := bestLine.FindStringSubmatch(r.stdout)
	if m == nil || m[3] != path("best") {
		t.Fatalf("no line on the best params:\n%s", r.stdout)
	}
	// The best is the highest R² of the evaluations, at epoch ends and
	// every 4 steps; the epoch lines print it too.
	best, _ := strconv.ParseFloat(m[2], 64)
	for _, e := range evals {
		if v, _ := strconv.ParseFloat(e[3], 64); v > best {
			t.Errorf("step %s has held-out R² %s, above the best %s", e[1], e[3], m[2])
		}
	}
	for _, e := range regexp.MustCompile(`held-out loss \d+\.\d+  R² (-?\d+\.\d+)`).FindAllStringSubmatch(r.stdout, -1) {
		if v, _ := strconv.ParseFloat(e[1], 64); v > best {
			t.Errorf("an evaluation has held-out R² %s, above the best %s", e[1], m[2])
		}
	}
	step, _ := strconv.Atoi(m[1])
	if step%2 != 0 {
		t.Fatalf("best step %d is not at an epoch's end (2 steps each): the step lines are every 4", step)
	}
	// A run of step/2 epochs ends on the best params, bitwise.
	short := runKiln(t, "train", model, "-data", data, "-eval-data", evalCSV, "-lr", "0.03", "-epochs", strconv.Itoa(step/2), "-save", path("short"))
	short.want(t, 0)
	if !bytes.Equal(readBytes(t, path("short")), readBytes(t, path("best"))) {
		t.Errorf("-save-best's params are not those after step %d", step)
	}

	// Stopped after 5 epochs and resumed: the same best file and line.
	ckpt := path("ckpt")
	first := append(args[:len(args)-1:len(args)-1], "5", "-eval-every", "4", "-save-best", path("best2"), "-checkpoint", ckpt)
	runKiln(t, first...).want(t, 0)
	rest := runKiln(t, append(args, "-eval-every", "4", "-save-best", path("best2"), "-checkpoint", ckpt, "-resume")...)
	rest.want(t, 0)
	if m2 := bestLine.FindStringSubmatch(rest.stdout); m2 == nil || m2[1] != m[1] || m2[2] != m[2] {
		t.Errorf("resumed: %q, want step %s and R² %s:\n%s", m2, m[1], m[2], rest.stdout)
	}
	if !bytes.Equal(readBytes(t, path("best2")), readBytes(t, path("best"))) {
		t.Error("the resumed run's best params differ from the uninterrupted run's")
	}

	// -resume refuses other held-out data.
	other := path("other.csv")
	os.WriteFile(other, []byte(regressionCSV(50, 3)), 0o644)
	bad := runKiln(t, "train", model, "-data", data, "-eval-data", other, "-lr", "0.03", "-epochs", "12", "-checkpoint", ckpt, "-resume")
	bad.want(t, 1)
	containsAll(t, "stderr", oneLine(t, bad.stderr), "-eval-data "+evalCSV, "-eval-data "+other, "eval data sha256")
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrainSaveBestChoice checks which evaluation -save-best keeps: the
// highest accuracy with the lowest loss among ties, or for a model without
// a metric output the lowest loss. The choice is recomputed from the
// printed evaluations (4 decimals of loss, which do not tie here).
func TestTrainSaveBestChoice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "train.csv")
	os.WriteFile(data, []byte(separableCSV(64, 2, 4)), 0o644)
	evalCSV := filepath.Join(dir, "eval.csv")
	os.WriteFile(evalCSV, []byte(separableCSV(40, 2, 5)), 0o644)
	evals := regexp.MustCompile(`(?m)^(?:step +(\d+)|epoch +(\d+)/\d+ .*)  held-out loss (\d+\.\d+)  acc (\S+)`)
	for _, tc := range []struct {
		name, model string
		metric      bool
	}{
		{"accuracy", tinyMLPKir, true},
		{"no metric", strings.Replace(tinyMLPKir, "output %loss, %logits", "output %loss", 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best := filepath.Join(t.TempDir(), "best.safetensors")
			r := runKiln(t, "train", writeFile(t, "m.kir", tc.model), "-data", data, "-eval-data", evalCSV, "-epochs", "6", "-lr", "0.01", "-eval-every", "3", "-save-best", best)
			r.want(t, 0)
			var wantStep, wantLoss, wantAcc string
			bl, ba := math.Inf(1), math.Inf(-1)
			for _, m := range evals.FindAllStringSubmatch(r.stdout, -1) {
				step := m[1]
				if step == "" {
					e, _ := strconv.Atoi(m[2])
					step = strconv.Itoa(8 * e) // 8 batches of 8 rows an epoch
				}
				loss, _ := strconv.ParseFloat(m[3], 64)
				acc, _ := strconv.ParseFloat(strings.TrimSuffix(m[4], "%"), 64)
				if !tc.metric {
					acc = 0
				}
				if acc > ba || (acc == ba && loss < bl) {
					wantStep, wantLoss, wantAcc, bl, ba = step, m[3], m[4], loss, acc
				}
			}
			want := "saved the best params (step " + wantStep + ", held-out loss " + wantLoss
			if tc.metric {
				want += ", accuracy " + wantAcc
			}
			containsAll(t, "stdout", r.stdout, want+") to "+best)
			if _, err := os.Stat(best); err != nil {
				t.Error(err)
			}
		})
	}
}
