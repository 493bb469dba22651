package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// pendingFile is an output written to a temporary file beside its final
// path, renamed into place only when every output of the command is
// ready. A final path that is a symlink is written through to its target
// (the link stays); one that is a device or FIFO (-o /dev/stdout) is
// written to directly, as a stream, once the whole output is ready.
type pendingFile struct {
	tmp    *os.File
	stream *bytes.Buffer // output for a device or FIFO
	final  string
}

// danglingTarget follows the symlinks of final, a path that does not
// resolve to an existing file, to the path a write should create.
func danglingTarget(final string) (string, error) {
	for range 40 {
		st, err := os.Lstat(final)
		if errors.Is(err, fs.ErrNotExist) {
			return final, nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			return final, nil
		}
		to, err := os.Readlink(final)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(filepath.Dir(final), to)
		}
		final = to
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", final)
}

// createPending opens a temporary file in the directory of final's target.
func createPending(final string) (*pendingFile, error) {
	target := final
	st, err := os.Stat(final)
	switch {
	case err == nil && st.Mode().IsRegular():
		if target, err = filepath.EvalSymlinks(final); err != nil {
			return nil, err
		}
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("%s is a directory", final)
	case err == nil:
		// A device, a FIFO or a pipe (/dev/stdout): the user asked for a
		// stream there.
		return &pendingFile{stream: &bytes.Buffer{}, final: final}, nil
	case errors.Is(err, fs.ErrNotExist):
		if target, err = danglingTarget(final); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp*")
	if err != nil {
		return nil, err
	}
	return &pendingFile{tmp: tmp, final: target}, nil
}

// Write writes to the temporary file (or the stream's buffer).
func (p *pendingFile) Write(b []byte) (int, error) {
	if p.stream != nil {
		return p.stream.Write(b)
	}
	return p.tmp.Write(b)
}

// commit makes the output durable and puts it in place: the temporary
// file is synced, closed and renamed over the final path, and the
// directory synced; a stream is written to its device or FIFO.
func (p *pendingFile) commit() error {
	if p.stream != nil {
		f, err := os.OpenFile(p.final, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.Write(p.stream.Bytes()); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := p.tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := p.tmp.Sync(); err != nil {
		return err
	}
	if err := p.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(p.tmp.Name(), p.final); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(p.final)); err == nil {
		d.Sync() // best effort: some file systems cannot sync a directory
		d.Close()
	}
	return nil
}

// abort removes the temporary file.
func (p *pendingFile) abort() {
	if p.tmp == nil {
		return
	}
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
