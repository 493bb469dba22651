// Package atomicfile writes a command's output files atomically: each to
// a temporary file beside it (locked while its writer lives, so that a
// later writer can remove the ones a killed process left), renamed into
// place once every output is ready, and removed instead when anything
// fails or the context is cancelled. A path that is a symlink is written
// through to its target; a device or FIFO (/dev/stdout) is written to as
// a stream.
//
// To start:
//
//	err := atomicfile.WriteAll(ctx, []string{"plan.json"}, func(i int, w io.Writer) error {
//		_, err := w.Write(data)
//		return err
//	})
package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pendingFile is an output written to a temporary file beside its final
// path, renamed into place only when every output of the command is
// ready. A final path that is a symlink is written through to its target
// (the link stays); one that is a device or FIFO (-o /dev/stdout) is
// written to directly, as a stream, once the whole output is ready.
type pendingFile struct {
	ctx    context.Context // a cancelled ctx fails the writes
	tmp    *os.File
	stream *bytes.Buffer // output for a device or FIFO
	final  string
	// written and flushed count the bytes written to tmp and those
	// whose write-back to the disk has been started.
	written, flushed int64
}

// writeBackEvery is how many bytes are written before their write-back
// to the disk is started, so that commit's sync waits only for the tail
// of a large output instead of all of it.
const writeBackEvery = 4 << 20

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

// createPending opens a temporary file in the directory of final's
// target; its writes fail once ctx is cancelled.
func createPending(ctx context.Context, final string) (*pendingFile, error) {
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
		return &pendingFile{ctx: ctx, stream: &bytes.Buffer{}, final: final}, nil
	case errors.Is(err, fs.ErrNotExist):
		if target, err = danglingTarget(final); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	dir := filepath.Dir(target)
	removeStaleTemps(dir, filepath.Base(target))
	tmp, err := os.CreateTemp(dir, tempPrefix(filepath.Base(target))+"*")
	if err != nil {
		return nil, err
	}
	if err := lockTemp(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return &pendingFile{ctx: ctx, tmp: tmp, final: target}, nil
}

// tempPrefix is how the temporary files of the output base begin.
func tempPrefix(base string) string { return "." + base + ".tmp" }

// staleAge is how old a temporary file must be before it is taken as
// stale: a writer locks its file just after creating it.
const staleAge = 2 * time.Second

// removeStaleTemps removes the temporary files of the output base in dir
// that no live writer holds (left by a process killed with SIGKILL).
// Failures are ignored: the new output does not depend on them.
func removeStaleTemps(dir, base string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := tempPrefix(base)
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, prefix) || !de.Type().IsRegular() {
			continue
		}
		rest := name[len(prefix):]
		if rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue // not a name CreateTemp gave
		}
		p := filepath.Join(dir, name)
		if info, err := de.Info(); err != nil || time.Since(info.ModTime()) < staleAge {
			continue
		}
		if writerGone(p) {
			os.Remove(p)
		}
	}
}

// Write writes to the temporary file (or the stream's buffer), or fails
// with the cause of the cancellation once the context is cancelled.
func (p *pendingFile) Write(b []byte) (int, error) {
	if p.ctx.Err() != nil {
		return 0, context.Cause(p.ctx)
	}
	if p.stream != nil {
		return p.stream.Write(b)
	}
	n, err := p.tmp.Write(b)
	p.written += int64(n)
	if p.written-p.flushed >= writeBackEvery {
		startWriteBack(p.tmp, p.flushed, p.written-p.flushed)
		p.flushed = p.written
	}
	return n, err
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
	if err := renameTemp(p.tmp, p.final); err != nil {
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

// WriteAll writes each (path, producer) atomically: either every file is
// in place afterwards, or none was created or changed. When ctx is
// cancelled before the files are renamed into place (a signal), the temporary files are removed and the error wraps
// context.Cause(ctx) and names them; once the renames have begun, they
// all complete.
func WriteAll(ctx context.Context, paths []string, produce func(i int, w io.Writer) error) error {
	pending := make([]*pendingFile, 0, len(paths))
	abortAll := func() {
		for _, p := range pending {
			p.abort()
		}
	}
	interrupted := func() error {
		abortAll()
		return interruptedWrite(context.Cause(ctx), pending)
	}
	for i, path := range paths {
		if ctx.Err() != nil {
			return interrupted()
		}
		p, err := createPending(ctx, path)
		if err != nil {
			abortAll()
			return fmt.Errorf("cannot write %s: %w", path, err)
		}
		pending = append(pending, p)
		if err := produce(i, p); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			abortAll()
			return err
		}
	}
	if ctx.Err() != nil {
		return interrupted()
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

// interruptedWrite is the error of a WriteAll that cause interrupted
// after it removed the temporary files of pending: "interrupted by SIGINT:
// removed the partial output DIR/.plan.json.tmp123 (and 4 more)".
func interruptedWrite(cause error, pending []*pendingFile) error {
	var tmps []string
	for _, p := range pending {
		if p.tmp != nil {
			tmps = append(tmps, p.tmp.Name())
		}
	}
	switch len(tmps) {
	case 0:
		return fmt.Errorf("%w: no file was written", cause)
	case 1:
		return fmt.Errorf("%w: removed the partial output %s", cause, tmps[0])
	}
	return fmt.Errorf("%w: removed the partial output %s (and %d more)", cause, tmps[0], len(tmps)-1)
}
