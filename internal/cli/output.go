package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// pendingFile is an output written to a temporary file beside its final
// path, renamed into place only when every output of the command is ready.
type pendingFile struct {
	tmp   *os.File
	final string
}

// createPending opens a temporary file in the directory of final.
func createPending(final string) (*pendingFile, error) {
	dir := filepath.Dir(final)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(final)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &pendingFile{tmp: tmp, final: final}, nil
}

// Write writes to the temporary file.
func (p *pendingFile) Write(b []byte) (int, error) { return p.tmp.Write(b) }

// commit closes the temporary file and renames it to its final path.
func (p *pendingFile) commit() error {
	if err := p.tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := p.tmp.Close(); err != nil {
		return err
	}
	return os.Rename(p.tmp.Name(), p.final)
}

// abort removes the temporary file.
func (p *pendingFile) abort() {
	p.tmp.Close()
	os.Remove(p.tmp.Name())
}

// writeAll writes each (path, producer) atomically: either every file is
// in place afterwards, or none was created or changed.
func writeAll(paths []string, produce func(i int, w io.Writer) error) error {
	pending := make([]*pendingFile, 0, len(paths))
	abortAll := func() {
		for _, p := range pending {
			p.abort()
		}
	}
	for i, path := range paths {
		p, err := createPending(path)
		if err != nil {
			abortAll()
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		pending = append(pending, p)
		if err := produce(i, p); err != nil {
			abortAll()
			return err
		}
	}
	for i, p := range pending {
		if err := p.commit(); err != nil {
			for _, q := range pending[i:] {
				q.abort()
			}
			return fmt.Errorf("cannot write %s: %w", p.final, err)
		}
	}
	return nil
}
