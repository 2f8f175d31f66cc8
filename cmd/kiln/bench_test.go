package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchFields parses kiln bench's "key value" lines.
func benchFields(t *testing.T, out string) map[string]string {
	t.Helper()
	f := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		key, value, ok := strings.Cut(line, " ")
		if rest, found := strings.CutPrefix(line, "of peak "); found {
			key, value = "of peak", rest
		}
		if !ok {
			t.Fatalf("line without a value: %q\n%s", line, out)
		}
		f[key] = strings.TrimSpace(value)
	}
	return f
}

// TestBench runs kiln bench on the digits MLP (a few steps: the test checks
// the report, not the speed) and checks every field.
func TestBench(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		batch   string
		compile string
	}{
		{"gradient", []string{"-steps", "3"}, "32", "default passes; forward and backward"},
		{"adam -O0", []string{"-steps", "3", "-warmup", "0", "-optimizer", "adam", "-O0"}, "32", "-O0 (without simplify and fuse); forward, backward and adam update"},
		{"batch 64", []string{"-steps", "3", "-batch", "64", "-optimizer", "sgd", "-workers", "3"}, "64 (-batch)", "default passes; forward, backward and sgd update"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			workers := strconv.Itoa(runtime.NumCPU())
			if i := slices.Index(tt.args, "-workers"); i >= 0 {
				workers = tt.args[i+1]
			}
			n, err := strconv.Atoi(workers)
			if err != nil {
				t.Fatal(err)
			}
			r := runKiln(t, append(append([]string{"bench"}, tt.args...), digitsMLP)...)
			r.want(t, 0)
			if r.stderr != "" {
				t.Errorf("unexpected stderr:\n%s", r.stderr)
			}
			f := benchFields(t, r.stdout)
			want := map[string]*regexp.Regexp{
				"model":     regexp.MustCompile(`^digits_mlp \(` + regexp.QuoteMeta(digitsMLP) + `\)$`),
				"compile":   regexp.MustCompile(`^` + regexp.QuoteMeta(tt.compile) + `$`),
				"batch":     regexp.MustCompile(`^` + regexp.QuoteMeta(tt.batch) + `$`),
				"plan":      regexp.MustCompile(`^\d+ steps, \d+ buffers$`),
				"arena":     regexp.MustCompile(`^\d+ bytes \(lower bound \d+\)$`),
				"runs":      regexp.MustCompile(`^\d+ warmup, 3 timed steps$`),
				"workers":   regexp.MustCompile(`^` + workers + `$`),
				"median":    regexp.MustCompile(`^\d+\.?\d* ms$`),
				"range":     regexp.MustCompile(`^\d+\.?\d* - \d+\.?\d* ms$`),
				"samples/s": regexp.MustCompile(`^\d+$`),
				"traffic":   regexp.MustCompile(`^\d+\.\d{3} MB per step \(\d+ bytes\), \d+\.\d\d GB/s$`),
				"flops":     regexp.MustCompile(`^\d+\.\d{4} GFLOP per step \(\d+\)$`),
				"GFLOP/s":   regexp.MustCompile(`^\d+\.\d\d$`),
				"peak":      regexp.MustCompile(`^\d+\.\d\d GFLOP/s \(f32 gemm micro-kernel on ` + strconv.Itoa(peakCores(n)) + ` cores\)$`),
				"of peak":   regexp.MustCompile(`^\d+\.\d%$`),
			}
			for key, re := range want {
				if !re.MatchString(f[key]) {
					t.Errorf("%s: %q does not match %s", key, f[key], re)
				}
			}
			if len(f) != len(want) {
				t.Errorf("%d fields, want %d:\n%s", len(f), len(want), r.stdout)
			}
			// The throughput is the batch over the median.
			med, _ := strconv.ParseFloat(strings.TrimSuffix(f["median"], " ms"), 64)
			sps, _ := strconv.ParseFloat(f["samples/s"], 64)
			batch, _ := strconv.Atoi(strings.Fields(f["batch"])[0])
			if want := float64(batch) / (med / 1e3); med > 0 && (sps < 0.99*want || sps > 1.01*want) {
				t.Errorf("samples/s %g, want batch/median = %g", sps, want)
			}
			// The rate is the FLOPs over the median, and its fraction of
			// the peak the rate over the peak.
			flops, _ := strconv.ParseFloat(strings.Trim(f["flops"][strings.LastIndex(f["flops"], " ")+1:], "()"), 64)
			rate, _ := strconv.ParseFloat(f["GFLOP/s"], 64)
			if want := flops / (med / 1e3) / 1e9; flops <= 0 || med > 0 && (rate < 0.99*want-0.01 || rate > 1.01*want+0.01) {
				t.Errorf("GFLOP/s %g, want flops/median = %g (flops %g)", rate, want, flops)
			}
			peak, _ := strconv.ParseFloat(strings.Fields(f["peak"])[0], 64)
			frac, _ := strconv.ParseFloat(strings.TrimSuffix(f["of peak"], "%"), 64)
			// The printed rate and peak are rounded to 0.005: on a loaded
			// machine the peak can be a few GFLOP/s, and its rounding alone
			// moves the fraction by more than the printed 0.1%.
			if want, tol := 100*rate/peak, 0.1+100*0.005*(rate+peak)/(peak*peak); peak <= 0 || frac < want-tol || frac > want+tol {
				t.Errorf("of peak %g%%, want 100·GFLOP/s/peak = %g (peak %g)", frac, want, peak)
			}
		})
	}
}

// TestBenchTraffic checks the traffic estimate on a graph small enough to
// count by hand, and that -batch scales it.
func TestBenchTraffic(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "chain.kir", `graph chain
input %x: f32[16,4]
%a = exp %x
%b = mul %a, %x
%s = sum %b
output %s
`)
	for _, tt := range []struct {
		args  []string
		bytes int
	}{
		// exp reads x and writes a; mul reads a and x and writes b; sum
		// reads b and writes a scalar: 6 buffers of 16*4 floats and 4 bytes.
		{nil, 6*16*4*4 + 4},
		{[]string{"-batch", "2"}, 6*2*4*4 + 4},
	} {
		r := runKiln(t, append(append([]string{"bench", "-O0", "-steps", "1", "-warmup", "0"}, tt.args...), path)...)
		r.want(t, 0)
		if want := "(" + strconv.Itoa(tt.bytes) + " bytes)"; !strings.Contains(benchFields(t, r.stdout)["traffic"], want) {
			t.Errorf("bench %v: traffic %q, want %s", tt.args, benchFields(t, r.stdout)["traffic"], want)
		}
		if want := "forward"; !strings.HasSuffix(benchFields(t, r.stdout)["compile"], want) {
			t.Errorf("a graph without params compiles %q, want %q", benchFields(t, r.stdout)["compile"], want)
		}
	}
}

// TestBenchFLOPs checks the FLOPs per step on a graph small enough to count
// by hand: a matmul (2·M·N·K) and a relu (one per element).
func TestBenchFLOPs(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "mm.kir", `graph mm
input %x: f32[8,16]
input %w: f32[16,4]
%h = matmul %x, %w
%r = relu %h
output %r
`)
	r := runKiln(t, "bench", "-O0", "-steps", "1", "-warmup", "0", "-workers", "1", path)
	r.want(t, 0)
	if want := "(" + strconv.Itoa(2*8*4*16+8*4) + ")"; !strings.HasSuffix(benchFields(t, r.stdout)["flops"], want) {
		t.Errorf("flops %q, want %s", benchFields(t, r.stdout)["flops"], want)
	}
}

// TestBenchTrace checks -trace: the file is Chrome trace-event JSON with one
// complete event per step of the plan, named by op and value, on a worker's
// row, and a name for every worker's row.
func TestBenchTrace(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{1, 3} {
		path := filepath.Join(t.TempDir(), "trace.json")
		r := runKiln(t, "bench", "-steps", "2", "-warmup", "1", "-optimizer", "sgd", "-workers", strconv.Itoa(workers), "-trace", path, digitsMLP)
		r.want(t, 0)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var tr struct {
			TraceEvents []struct {
				Name string         `json:"name"`
				Ph   string         `json:"ph"`
				Ts   float64        `json:"ts"`
				Dur  float64        `json:"dur"`
				Pid  int            `json:"pid"`
				Tid  int            `json:"tid"`
				Args map[string]any `json:"args"`
			} `json:"traceEvents"`
		}
		if err := json.Unmarshal(data, &tr); err != nil {
			t.Fatalf("%d workers: %v\n%s", workers, err, data)
		}
		steps, _ := strconv.Atoi(strings.Fields(benchFields(t, r.stdout)["plan"])[0])
		seen := map[int]bool{}
		rows := map[int]bool{}
		name := regexp.MustCompile(`^[a-z_]+ %[\w./]+$`)
		for _, e := range tr.TraceEvents {
			switch e.Ph {
			case "M":
				rows[e.Tid] = true
			case "X":
				s := int(e.Args["step"].(float64))
				if seen[s] {
					t.Errorf("%d workers: step %d traced twice", workers, s)
				}
				seen[s] = true
				if !name.MatchString(e.Name) {
					t.Errorf("%d workers: event name %q", workers, e.Name)
				}
				if e.Tid < 0 || e.Tid >= workers {
					t.Errorf("%d workers: %q on tid %d", workers, e.Name, e.Tid)
				}
				if e.Ts < 0 || e.Dur < 0 {
					t.Errorf("%d workers: %q at %g for %g µs", workers, e.Name, e.Ts, e.Dur)
				}
			default:
				t.Errorf("%d workers: event phase %q", workers, e.Ph)
			}
		}
		if len(seen) != steps {
			t.Errorf("%d workers: %d steps traced, the plan has %d", workers, len(seen), steps)
		}
		if len(rows) != workers {
			t.Errorf("%d workers: %d named rows", workers, len(rows))
		}
	}
}

func TestBenchErrors(t *testing.T) {
	t.Parallel()
	reshape := writeFile(t, "reshape.kir", `graph rs
input %x: f32[32,8]
param %w: f32[8,4]
%h = matmul %x, %w
%flat = reshape %h {shape=[128]}
%s = sum %flat
output %s
`)
	tests := []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"literal batch", []string{"-batch", "64", reshape}, 1, []string{reshape + ":5:", "%flat", "-batch 64", "reshape", "does not re-batch"}},
		{"zero steps", []string{"-steps", "0", digitsMLP}, 2, []string{"-steps must be at least 1"}},
		{"negative warmup", []string{"-warmup", "-1", digitsMLP}, 2, []string{"-warmup must not be negative"}},
		{"negative batch", []string{"-batch", "-2", digitsMLP}, 2, []string{"-batch must be at least 1"}},
		{"no file", nil, 2, []string{"missing FILE.kir"}},
		{"bad optimizer", []string{"-optimizer", "adagrad", digitsMLP}, 2, []string{"adagrad"}},
		{"negative peak", []string{"-device", "gpu", "-peak-gflops", "-1", digitsMLP}, 2, []string{"-peak-gflops must be positive"}},
		{"peak on the cpu", []string{"-peak-gflops", "100", digitsMLP}, 2, []string{"-peak-gflops", "needs -device gpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"bench"}, tt.args...)...)
			r.want(t, tt.code)
			msg := r.stderr
			if tt.code == 1 {
				msg = oneLine(t, r.stderr)
			}
			containsAll(t, "stderr", msg, append([]string{"kiln bench: "}, tt.msg...)...)
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
		})
	}
}

func TestBenchMedian(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		times       []time.Duration
		med, lo, hi time.Duration
	}{
		{[]time.Duration{3 * ms}, 3 * ms, 3 * ms, 3 * ms},
		{[]time.Duration{5 * ms, 1 * ms, 3 * ms}, 3 * ms, 1 * ms, 5 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 9 * ms}, 3 * ms, 1 * ms, 9 * ms},
	}
	for _, tt := range tests {
		r := benchResult{Times: tt.times}
		med, lo, hi := r.median()
		if med != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("median(%v) = %v, %v, %v; want %v, %v, %v", tt.times, med, lo, hi, tt.med, tt.lo, tt.hi)
		}
	}
}

func TestMs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{12345 * time.Nanosecond, "0.0123"},
		{1234567 * time.Nanosecond, "1.235"},
		{12345678 * time.Nanosecond, "12.35"},
		{123456789 * time.Nanosecond, "123.5"},
		{2345678901 * time.Nanosecond, "2346"},
	}
	for _, tt := range tests {
		if got := ms(tt.d); got != tt.want {
			t.Errorf("ms(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestPeakCores checks that the peak is measured on at most one goroutine
// per CPU, so that more workers than cores cannot multiply it.
func TestPeakCores(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tt := range []struct{ workers, want int }{
		{0, 1}, {1, 1}, {cpus, cpus}, {cpus + 1, cpus}, {1000, cpus},
	} {
		if got := peakCores(tt.workers); got != tt.want {
			t.Errorf("peakCores(%d) = %d on %d CPUs, want %d", tt.workers, got, cpus, tt.want)
		}
	}
}
