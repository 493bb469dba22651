// This file holds the job's secret and the proofs of it: where a rank
// gets the secret (World.Token, or the secret file rank 0 writes in a
// private directory), the checks of that directory and file, and the
// HMAC-SHA256 proofs the handshake exchanges instead of the secret.

package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const (
	nonceSize      = 32          // bytes of each side's challenge
	proofSize      = sha256.Size // bytes of an HMAC-SHA256 proof
	secretSize     = 32          // bytes of a secret rank 0 makes
	maxSecretBytes = 4 << 10     // bound of a secret file
)

// The labels of the three proofs, so that none can stand for another.
const (
	labelRoot  = "mscclgo bootstrap: rank 0"     // rank 0 answering a challenge
	labelJoin  = "mscclgo bootstrap: join"       // a rank's hello
	labelTable = "mscclgo bootstrap: rank table" // the rank table rank 0 sends
)

// failAuth is the arg of a fail frame refusing a connection that did not
// prove the job's secret (so that a rank whose secret came from a file
// that rank 0 has since rewritten reads it again and retries).
const failAuth = 1

// errAuth: a peer did not prove the job's secret.
var errAuth = errors.New("did not prove this job's secret")

// prove returns HMAC-SHA256 under key of the label and the parts, each
// part preceded by its length.
func prove(key []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	for _, p := range parts {
		m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(p))))
		m.Write(p)
	}
	return m.Sum(nil)
}

// nonce returns nonceSize random bytes.
func nonce() ([]byte, error) {
	n := make([]byte, nonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("random challenge: %w", err)
	}
	return n, nil
}

// secretSource names where this rank's secret comes from, for messages.
func (b *Bootstrap) secretSource() string {
	switch {
	case b.keyFile != "":
		return "the secret in " + b.keyFile
	case b.keyFrom != "":
		return b.keyFrom
	}
	return "World.Token"
}

// permError is a rendezvous directory or secret file that waiting will
// not make acceptable.
type permError struct{ err error }

func (e *permError) Error() string { return e.err.Error() }
func (e *permError) Unwrap() error { return e.err }

// ownerOf returns the owner of a file.
func ownerOf(st fs.FileInfo) (int, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(s.Uid), true
}

// checkPrivateDir refuses a rendezvous directory that another user could
// write into (and so replace the job's secret): one owned by another
// user, or writable by its group or by everyone.
func checkPrivateDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	fix := fmt.Sprintf("use a directory of your own, mode 0700 (or set %s to one; or set %s to a secret shared by every rank)", EnvRendezvousDir, EnvJobToken)
	if !st.IsDir() {
		return &permError{fmt.Errorf("rendezvous directory %s is not a directory (%s)", dir, st.Mode().Type())}
	}
	if uid, ok := ownerOf(st); ok && uid != os.Geteuid() {
		return &permError{fmt.Errorf("rendezvous directory %s is owned by uid %d, not by this process's uid %d: that user could read or replace the job's secret; %s", dir, uid, os.Geteuid(), fix)}
	}
	if m := st.Mode().Perm(); m&0o022 != 0 {
		return &permError{fmt.Errorf("rendezvous directory %s has mode %#o: writable by other users, who could replace the job's secret; chmod go-w it or %s", dir, m, fix)}
	}
	return nil
}

// writeSecret makes the rendezvous directory of file (mode 0700) if it
// is missing, checks it, and publishes key in file: a temporary file
// created exclusively with mode 0600, then renamed over file (which
// replaces a stale one of an earlier job).
func writeSecret(file string, key []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := checkPrivateDir(dir); err != nil {
		return err
	}
	return publish(file, ".mscclgo-key-*", hex.EncodeToString(key))
}

// readSecret reads the secret rank 0 published in file. A *permError is
// a directory or file that must not be trusted; other errors (the file
// is not there yet) may pass by waiting.
func readSecret(file string) ([]byte, error) {
	if err := checkPrivateDir(filepath.Dir(file)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no job secret in %s yet (rank 0 writes it)", file)
		}
		return nil, err
	}
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no job secret in %s yet (rank 0 writes it)", file)
	}
	if err != nil {
		return nil, &permError{fmt.Errorf("job secret file %s: %w", file, err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch uid, ok := ownerOf(st); {
	case !st.Mode().IsRegular():
		return nil, &permError{fmt.Errorf("job secret file %s is not a regular file (%s)", file, st.Mode().Type())}
	case ok && uid != os.Geteuid():
		return nil, &permError{fmt.Errorf("job secret file %s is owned by uid %d, not by this process's uid %d", file, uid, os.Geteuid())}
	case st.Mode().Perm()&0o077 != 0:
		return nil, &permError{fmt.Errorf("job secret file %s has mode %#o: other users can read it; rank 0 writes it with mode 0600", file, st.Mode().Perm())}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < 16 || len(data) > maxSecretBytes {
		// Not rank 0's: it may yet replace it.
		return nil, fmt.Errorf("job secret file %s does not hold a secret (%d bytes; rank 0 writes %d hexadecimal digits)", file, len(data), 2*secretSize)
	}
	return key, nil
}
