package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnml/kiln/internal/atomicfile"
)

// fileArg is a file a command reads or writes, as the user named it: the
// flag that gave it, or for a positional argument what it stands for
// (MODEL.kir), and the path.
type fileArg struct{ name, path string }

func (f fileArg) String() string { return f.name + " " + f.path }

// dirArg marks an output that is a directory (-checkpoint) rather than a
// file.
const dirArg = "/"

// checkFiles checks a command's outputs before it does any work: an output
// that is one of the inputs or another output is a usage error (it would
// be overwritten), and every output must be writable: its directory (for
// an output directory, its nearest existing ancestor) must take a new
// file, and a file output must not be a directory. Entries with an empty
// path are not given and are skipped. Output directories are named with
// dirArg appended to their flag.
func checkFiles(ins, outs []fileArg) error {
	for i, o := range outs {
		if o.path == "" {
			continue
		}
		o.name = strings.TrimSuffix(o.name, dirArg)
		for _, in := range ins {
			if in.path != "" && samePath(o.path, in.path) {
				return usagef("%s is the input %s; it would be overwritten: give another output path", o, in)
			}
		}
		for _, p := range outs[:i] {
			if p.path != "" && samePath(o.path, p.path) {
				p.name = strings.TrimSuffix(p.name, dirArg)
				return usagef("%s is also %s; it would be overwritten: give another output path", o, p)
			}
		}
	}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		isDir := strings.HasSuffix(o.name, dirArg)
		o.name = strings.TrimSuffix(o.name, dirArg)
		if err := writable(o.path, isDir); err != nil {
			return fmt.Errorf("%s: %v", o, err)
		}
	}
	return nil
}

// samePath reports whether a and b name the same file: the same absolute
// path, or, when both exist, the same file by os.SameFile (links).
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// writable checks that path can be written: a file output must not be a
// directory, and the directory it goes in (for a directory output, the
// directory itself or its nearest existing ancestor, which the command
// creates the rest under) must take a new file, tried by creating and
// removing one.
func writable(path string, isDir bool) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() != isDir {
		if isDir {
			return errors.New("is a file, not a directory")
		}
		return errors.New("is a directory")
	}
	dir := filepath.Dir(path)
	if isDir {
		dir = path
		for {
			if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
				break
			}
			dir = filepath.Dir(dir)
		}
	}
	if err := atomicfile.CheckDir(dir); err != nil {
		return fmt.Errorf("cannot write in %s: %v", dir, err)
	}
	return nil
}

// writeOutput writes data to path, named by flag, atomically. When that
// fails, as it can at the end of a long run although checkFiles passed
// before it (the directory was removed, the disk filled), it writes data to
// a new file in os.TempDir() named after model instead, and returns an
// error naming path, the failure, what the data is and where it went.
func writeOutput(flag, path, what, model string, data []byte) error {
	err := atomicfile.WriteFile(path, data)
	if err == nil {
		return nil
	}
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the message names path already
	}
	f, ferr := os.CreateTemp("", "kiln-"+filepath.Base(model)+"-*"+filepath.Ext(path))
	if ferr == nil {
		_, ferr = f.Write(data)
		if cerr := f.Close(); ferr == nil {
			ferr = cerr
		}
		if ferr != nil {
			os.Remove(f.Name())
		}
	}
	if ferr != nil {
		return fmt.Errorf("%s %s: %v; writing %s to %s failed too: %v", flag, path, err, what, os.TempDir(), ferr)
	}
	return fmt.Errorf("%s %s: %v; wrote %s to %s instead", flag, path, err, what, f.Name())
}
