// Package atomicfile writes files so that a reader never sees a partial
// one: the data goes to a temporary file in the same directory, which is
// synced and renamed over the destination.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically with mode 0644. On failure the
// destination is untouched and the temporary file removed. Errors are
// *os.PathError naming path (not the temporary file) with the cause.
func WriteFile(path string, data []byte) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: cause(err)}
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = &os.PathError{Op: "write", Path: path, Err: cause(err)}
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// Make the rename itself durable; not every system can sync a directory.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// CheckDir checks that dir takes a new file, as WriteFile into it will
// need, by creating and removing one. Errors are the cause alone ("no such
// file or directory"), without the name of the file tried.
func CheckDir(dir string) error {
	f, err := os.CreateTemp(dir, ".check-*")
	if err != nil {
		return cause(err)
	}
	name := f.Name()
	f.Close()
	return cause(os.Remove(name))
}

// cause returns the error an *os.PathError or *os.LinkError wraps, or err.
func cause(err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
