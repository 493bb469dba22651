// Package infile is the one way mscclgo reads a file its user names:
// scripts, plans, source maps, counts files, hardware profiles, results
// files, plan indexes and the rendezvous file. Every such read goes
// through Open or Read, which refuse what could block or never end (a
// FIFO, a device, a socket, a directory), a file above the caller's size
// cap, and a symbolic link loop, each with an error that names the file
// and what was wrong with it.
package infile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The kinds of refusal, for errors.Is. Errors from Open and Read are
// *Error values wrapping one of these, or the operating system's error
// (fs.ErrNotExist, fs.ErrPermission, ...).
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
	ErrLinkLoop   = errors.New("symbolic link loop")
)

// Error is a refused or failed read of one file.
type Error struct {
	// Path is the file as the user named it.
	Path string
	// What says what the file was wanted as ("a counts file").
	What string
	// Err is ErrNotRegular, ErrTooLarge, ErrLinkLoop or the system's
	// error.
	Err error
	// Kind is what a non-regular file is ("a FIFO").
	Kind string
	// Size and Max are the size of a file above its cap and the cap.
	Size, Max int64
}

func (e *Error) Error() string {
	switch e.Err {
	case ErrNotRegular:
		return fmt.Sprintf("%s is %s, not a regular file (want %s)", e.Path, e.Kind, e.What)
	case ErrTooLarge:
		if e.Size == e.Max+1 {
			// Found while reading: the file grew past its stated size.
			return fmt.Sprintf("%s has more than %s: %s may have at most %s", e.Path, sizeText(e.Max), e.What, sizeText(e.Max))
		}
		return fmt.Sprintf("%s has %s: %s may have at most %s", e.Path, sizeText(e.Size), e.What, sizeText(e.Max))
	case ErrLinkLoop:
		return fmt.Sprintf("%s: a loop of symbolic links (want %s)", e.Path, e.What)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// sizeText writes a byte count exactly, with a binary unit when it has
// one.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d bytes (%d GiB)", n, n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d bytes (%d MiB)", n, n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d bytes (%d KiB)", n, n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Open opens the regular file name for reading. what says what the file
// is wanted as, for errors; max bounds its size in bytes. The open itself
// never blocks: a FIFO nobody writes is refused like /dev/zero.
func Open(name, what string, max int64) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer. Regular files ignore it.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, openError(name, what, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &Error{Path: name, What: what, Err: err}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &Error{Path: name, What: what, Err: ErrNotRegular, Kind: Kind(st.Mode())}
	}
	if st.Size() > max {
		f.Close()
		return nil, &Error{Path: name, What: what, Err: ErrTooLarge, Size: st.Size(), Max: max}
	}
	return f, nil
}

// openError names a failed open: a symbolic link loop as such, other
// system errors as they are.
func openError(name, what string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return &Error{Path: name, What: what, Err: ErrLinkLoop}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Error{Path: name, What: what, Err: err}
}

// Read returns the contents of the regular file name, refused as Open
// refuses it. A file that grows past max while it is read is refused too.
func Read(name, what string, max int64) ([]byte, error) {
	f, err := Open(name, what, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if st, err := f.Stat(); err == nil {
		// One read fills the buffer and the next finds the end.
		b.Grow(int(min(st.Size(), max)) + bytes.MinRead)
	}
	if _, err := b.ReadFrom(io.LimitReader(f, max+1)); err != nil {
		return nil, &Error{Path: name, What: what, Err: err}
	}
	if int64(b.Len()) > max {
		return nil, &Error{Path: name, What: what, Err: ErrTooLarge, Size: int64(b.Len()), Max: max}
	}
	return b.Bytes(), nil
}

// Check refuses name as Open would, without reading it.
func Check(name, what string, max int64) error {
	f, err := Open(name, what, max)
	if err != nil {
		return err
	}
	return f.Close()
}

// Kind names what a file that is not regular is: "a directory", "a FIFO",
// "a device", "a socket".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}
