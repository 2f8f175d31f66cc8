package main

import (
	"errors"
	"strings"
	"testing"
)

// TestRun runs tracetop on a four-step trace and on bad input: the table's
// figures are sums of the events' durations, and errors name the file.
func TestRun(t *testing.T) {
	const head = "step 7.00 ms wall; steps 7.00 ms summed (worker 0: 4.50 ms; worker 1: 2.50 ms; " +
		"a step split across workers counts whole on the one that ran it)\n\n" +
		"| name | count | total (ms) | share |\n|---|---|---|---|\n"
	for _, c := range []struct {
		name  string
		args  []string
		want  string // the output, or a part of the error
		usage bool   // a usage error (exit status 2)
	}{
		{"by op", []string{"testdata/step.json"}, head +
			"| matmul | 2 | 4.50 | 64.3% |\n| gelu | 1 | 2.00 | 28.6% |\n| copy | 1 | 0.50 | 7.1% |\n", false},
		{"by op, two rows", []string{"-n", "2", "testdata/step.json"}, head +
			"| matmul | 2 | 4.50 | 64.3% |\n| gelu | 1 | 2.00 | 28.6% |\n| (1 more) | 1 | 0.50 | 7.1% |\n", false},
		{"by step", []string{"-by", "step", "-n", "2", "testdata/step.json"}, head +
			"| matmul %h1 | 1 | 3.00 | 42.9% |\n| gelu %g | 1 | 2.00 | 28.6% |\n| (2 more) | 2 | 2.00 | 28.6% |\n", false},
		{"no events", []string{"testdata/empty.json"}, `testdata/empty.json: no complete ("X") events`, false},
		{"not JSON", []string{"main.go"}, "main.go: not a Chrome trace", false},
		{"missing", []string{"testdata/none.json"}, "testdata/none.json", false},
		{"two files", []string{"a.json", "b.json"}, "want one FILE.json, found 2 arguments", true},
		{"bad -by", []string{"-by", "worker", "a.json"}, `-by "worker": want op or step`, true},
		{"bad -n", []string{"-n", "0", "a.json"}, "-n must be at least 1, found 0", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			err := run(c.args, &out)
			if strings.HasSuffix(c.want, "\n") {
				if err != nil {
					t.Fatal(err)
				}
				if out.String() != c.want {
					t.Errorf("got\n%s\nwant\n%s", out.String(), c.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if u := (usageError{}); errors.As(err, &u) != c.usage {
				t.Errorf("usage error: %v, want %v", !c.usage, c.usage)
			}
		})
	}
}
