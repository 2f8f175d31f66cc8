package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	kilnrt "github.com/kilnml/kiln/runtime"
)

// TestOptimizerSettings checks that every optimizer setting is recorded in
// a plan file's metadata (kiln compile), where kiln run -resume compares
// it (planSettings), and that each kind records the settings it reads.
func TestOptimizerSettings(t *testing.T) {
	t.Parallel()
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	for _, tt := range []struct {
		args []string
		want map[string]string // plan file metadata
	}{
		{[]string{"-optimizer", "sgd", "-momentum", "0.9", "-nesterov"},
			map[string]string{"optimizer": "sgd", "lr": "0.01", "momentum": "0.9", "dampening": "0", "nesterov": "true", "weight-decay": "0"}},
		{[]string{"-optimizer", "sgd", "-momentum", "0.5", "-dampening", "0.25"},
			map[string]string{"momentum": "0.5", "dampening": "0.25", "nesterov": "false"}},
		{[]string{"-optimizer", "adam", "-amsgrad"},
			map[string]string{"optimizer": "adam", "lr": "0.001", "amsgrad": "true", "beta1": "0.9", "beta2": "0.999", "eps": "1e-08", "weight-decay": "0"}},
		{[]string{"-optimizer", "adamw"},
			map[string]string{"optimizer": "adamw", "amsgrad": "false", "weight-decay": "0.01"}},
		{[]string{"-optimizer", "adamw", "-weight-decay", "0"},
			map[string]string{"optimizer": "adamw", "weight-decay": "0"}},
		{[]string{"-optimizer", "rmsprop", "-centered", "-momentum", "0.5"},
			map[string]string{"optimizer": "rmsprop", "lr": "0.01", "alpha": "0.99", "eps": "1e-08", "centered": "true", "momentum": "0.5"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "p.kplan")
			runKiln(t, append([]string{"compile", tiny, "-o", out}, tt.args...)...).want(t, 0)
			f, err := kilnrt.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			s := planSettings(f, "cpu")
			for k, v := range tt.want {
				if f.Meta[k] != v {
					t.Errorf("metadata %s = %q, want %q", k, f.Meta[k], v)
				}
				if s["-"+k] != v {
					t.Errorf("kiln run's setting -%s = %q, want %q", k, s["-"+k], v)
				}
			}
		})
	}
}

// TestOptimizerFlagErrors checks that optimizer settings that cannot train
// are usage errors of one line.
func TestOptimizerFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-optimizer", "lion2"}, `unknown optimizer "lion2" (expected sgd, adam, adamw, rmsprop)`},
		{[]string{"-optimizer", "sgd", "-nesterov"}, "nesterov momentum needs a momentum and zero dampening, found momentum 0, dampening 0"},
		{[]string{"-optimizer", "sgd", "-nesterov", "-momentum", "0.9", "-dampening", "0.1"}, "nesterov momentum needs a momentum and zero dampening"},
		{[]string{"-optimizer", "sgd", "-momentum", "0.9", "-dampening", "2"}, "dampening must be in [0,1], found 2"},
		{[]string{"-optimizer", "sgd", "-amsgrad"}, "amsgrad is for adam and adamw, not sgd"},
		{[]string{"-optimizer", "adam", "-momentum", "0.9"}, "momentum is for sgd and rmsprop; adam has its betas"},
		{[]string{"-optimizer", "adamw", "-nesterov"}, "dampening and nesterov are for sgd, not adamw"},
		{[]string{"-optimizer", "adam", "-centered"}, "centered is for rmsprop, not adam"},
		{[]string{"-optimizer", "rmsprop", "-alpha", "1"}, "rmsprop alpha must be in [0,1), found 1"},
		{[]string{"-optimizer", "adamw", "-weight-decay", "-1"}, "weight decay must be finite and >= 0, found -1"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		of := addOptimizerFlags(fs, "adam")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		_, err := of.config()
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line with %q", tt.args, err, tt.want)
		}
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %T is not a usage error", tt.args, err)
		}
	}
	r := runKiln(t, "train", "-optimizer", "sgd", "-nesterov")
	r.want(t, 2)
	if !strings.HasPrefix(r.stderr, "kiln train: nesterov momentum needs a momentum") {
		t.Errorf("stderr %q", r.stderr)
	}
}
