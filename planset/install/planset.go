package install

// planset.go holds the on-disk layout of an installed plan set: the
// symbolic link that Install swaps in one rename, the lock that serialises
// installs into one directory, and the recovery from what an interrupted
// install left behind.
//
// A plan set installed at DIR (parent P, base name NAME) is
//
//	P/NAME             a symbolic link to .NAME.set-ID
//	P/.NAME.set-ID/    the plans and index.json
//	P/.NAME.lock       locked (flock) while an install or a recovery runs
//
// Install writes the new set into P/.NAME.new-ID (stage), renames it to
// P/.NAME.set-ID, creates the link P/.NAME.link-ID to it, and renames that
// link over P/NAME: one rename(2), so that a reader sees the old set or the
// new one and never a mix or nothing. Only then is the old .NAME.set-ID
// removed. A NAME that is still a plain directory (written by an mscclgo
// of before the links) is moved to P/.NAME.old-ID just before the rename
// and removed after it.
//
// A killed install leaves at most: a .NAME.new-ID (unfinished), a
// .NAME.set-ID or .NAME.link-ID that NAME does not reference, a
// .NAME.old-ID, and, from the earlier scheme, a .NAME.new-ID.old (the
// previous set moved aside). recoverLocked removes them, after putting a
// moved-aside set back at NAME when NAME is missing.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/mscclgo/mscclgo/planset"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ErrRunning is returned by RecoverPlanSet when an install into the
// directory holds its lock: the leftovers may be that install's own.
var ErrRunning = errors.New("an install into the plan directory is running")

// planSet names the files of the plan set installed at dir.
type planSet struct {
	dir    string // parent/name, cleaned
	parent string
	name   string
}

// newPlanSet returns the layout of the plan set at dir.
func newPlanSet(dir string) (planSet, error) {
	if dir == "" {
		return planSet{}, errors.New("no plan directory given")
	}
	clean := filepath.Clean(dir)
	name := filepath.Base(clean)
	if name == "." || name == ".." || name == string(filepath.Separator) || filepath.Dir(clean) == clean {
		return planSet{}, fmt.Errorf("%s cannot be a plan directory: it needs a name inside a parent directory", dir)
	}
	return planSet{dir: clean, parent: filepath.Dir(clean), name: name}, nil
}

// path returns P/.NAME.KIND-ID.
func (ps planSet) path(kind, id string) string {
	return filepath.Join(ps.parent, "."+ps.name+"."+kind+"-"+id)
}

// lockPath is the lock file, P/.NAME.lock. It is never removed: removing a
// lock file races with the next process that opens it.
func (ps planSet) lockPath() string {
	return filepath.Join(ps.parent, "."+ps.name+".lock")
}

// entryKind classifies the entries of the parent directory.
type entryKind int

const (
	notOurs     entryKind = iota
	kindNew               // .NAME.new-ID: an unfinished set
	kindSet               // .NAME.set-ID: a complete set, NAME's target or a leftover
	kindLink              // .NAME.link-ID: a link not yet renamed over NAME
	kindOld               // .NAME.old-ID: a plain NAME moved aside
	kindOldPrev           // .NAME.new-ID.old: the earlier scheme's NAME moved aside
)

// classify says which of the plan set's files the parent directory's entry
// base is, by its exact name pattern (an ID is 1 to 32 digits or lowercase
// hex letters: os.MkdirTemp's digits in the earlier scheme, newID's hex
// now).
func (ps planSet) classify(base string) entryKind {
	rest, ok := strings.CutPrefix(base, "."+ps.name+".")
	if !ok {
		return notOurs
	}
	kind, id, ok := strings.Cut(rest, "-")
	if !ok {
		return notOurs
	}
	switch kind {
	case "new":
		if prev, ok := strings.CutSuffix(id, ".old"); ok && isID(prev) {
			return kindOldPrev
		}
		if isID(id) {
			return kindNew
		}
	case "set":
		if isID(id) {
			return kindSet
		}
	case "link":
		if isID(id) {
			return kindLink
		}
	case "old":
		if isID(id) {
			return kindOld
		}
	}
	return notOurs
}

func isID(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// newID returns a fresh random ID: 16 hex digits.
func newID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// target returns the path of NAME's link target when it is one of the
// plan set's .NAME.set-ID siblings, and "" otherwise (NAME missing, not a
// link, or a link elsewhere).
func (ps planSet) target() string {
	to, err := os.Readlink(ps.dir)
	if err != nil {
		return ""
	}
	if filepath.IsAbs(to) {
		if filepath.Dir(to) != ps.parent {
			return ""
		}
	} else if filepath.Dir(to) != "." {
		return ""
	}
	if ps.classify(filepath.Base(to)) != kindSet {
		return ""
	}
	return filepath.Join(ps.parent, filepath.Base(to))
}

// Recovery says what the recovery from an interrupted install did.
type Recovery struct {
	// Dir is the plan directory.
	Dir string
	// Restored is the moved-aside plan set that was put back at Dir
	// because Dir was missing; "" if none.
	Restored string
	// Removed are the leftovers that were removed.
	Removed []string
	// Err joins the failures to restore or remove, if any.
	Err error
}

// Empty reports whether the recovery found nothing to do.
func (r Recovery) Empty() bool { return r.Restored == "" && len(r.Removed) == 0 && r.Err == nil }

// String describes the recovery in one line, for a note to the user.
func (r Recovery) String() string {
	var parts []string
	if r.Restored != "" {
		parts = append(parts, fmt.Sprintf("restored the plan set %s from %s, which an interrupted install had moved aside", r.Dir, filepath.Base(r.Restored)))
	}
	if n := len(r.Removed); n > 0 {
		names := make([]string, 0, min(n, 3))
		for _, p := range r.Removed[:min(n, 3)] {
			names = append(names, filepath.Base(p))
		}
		list := strings.Join(names, ", ")
		if n > 3 {
			list += fmt.Sprintf(" and %d more", n-3)
		}
		parts = append(parts, fmt.Sprintf("removed the leftovers of an interrupted install beside %s: %s", r.Dir, list))
	}
	if r.Err != nil {
		parts = append(parts, fmt.Sprintf("could not clean up after an interrupted install: %v", r.Err))
	}
	return strings.Join(parts, "; ")
}

// recoveryPlan is what recoverLocked would do: the set to put back at
// NAME, and the leftovers to remove.
type recoveryPlan struct {
	restore string
	remove  []string
}

// plan inspects the parent directory and decides the recovery. It only
// reads.
func (ps planSet) plan() (recoveryPlan, error) {
	des, err := os.ReadDir(ps.parent)
	if errors.Is(err, fs.ErrNotExist) {
		return recoveryPlan{}, nil
	}
	if err != nil {
		return recoveryPlan{}, err
	}
	live := ps.target()
	_, statErr := os.Stat(ps.dir) // through the link: is there a set at all?
	missing := errors.Is(statErr, fs.ErrNotExist)
	var p recoveryPlan
	var olds []string
	for _, de := range des {
		path := filepath.Join(ps.parent, de.Name())
		switch ps.classify(de.Name()) {
		case kindNew, kindLink:
			p.remove = append(p.remove, path)
		case kindSet:
			if path != live {
				p.remove = append(p.remove, path)
			}
		case kindOld, kindOldPrev:
			if de.IsDir() {
				olds = append(olds, path)
			} else {
				p.remove = append(p.remove, path)
			}
		}
	}
	if missing && len(olds) > 0 {
		// Prefer a set with an index, then the most recently changed.
		sort.SliceStable(olds, func(i, j int) bool {
			ii, ij := hasIndex(olds[i]), hasIndex(olds[j])
			if ii != ij {
				return ii
			}
			return modTime(olds[i]).After(modTime(olds[j]))
		})
		p.restore, olds = olds[0], olds[1:]
	}
	p.remove = append(p.remove, olds...)
	sort.Strings(p.remove)
	return p, nil
}

func hasIndex(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, planset.IndexFile))
	return err == nil
}

func modTime(path string) time.Time {
	st, err := os.Lstat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// recoverLocked carries out the recovery. The caller holds the lock, so no
// install is writing any of the leftovers.
func (ps planSet) recoverLocked() Recovery {
	rec := Recovery{Dir: ps.dir}
	p, err := ps.plan()
	if err != nil {
		rec.Err = err
		return rec
	}
	var errs []error
	if p.restore != "" {
		// NAME is missing, or a link to nothing: put the set back.
		if st, err := os.Lstat(ps.dir); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if err := os.Remove(ps.dir); err != nil {
				errs = append(errs, err)
			}
		}
		if err := os.Rename(p.restore, ps.dir); err != nil {
			errs = append(errs, err)
		} else {
			rec.Restored = p.restore
			syncDir(ps.parent)
		}
	}
	for _, path := range p.remove {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, err)
			continue
		}
		rec.Removed = append(rec.Removed, path)
	}
	rec.Err = errors.Join(errs...)
	return rec
}

// RecoverPlanSet cleans up after an install into dir that was interrupted
// (killed, or the machine went down): if dir is missing but the previous
// plan set was moved aside, it is put back; unfinished sets, sets dir no
// longer references and stray links are removed. Only entries of dir's
// parent named as Install names them are touched. It does nothing when
// there are no leftovers, and returns ErrRunning without touching
// anything while an install into dir holds the lock.
func RecoverPlanSet(dir string) (Recovery, error) {
	ps, err := newPlanSet(dir)
	if err != nil {
		return Recovery{}, err
	}
	if p, err := ps.plan(); err != nil || (p.restore == "" && len(p.remove) == 0) {
		return Recovery{Dir: ps.dir}, err
	}
	unlock, err := ps.lock(context.Background(), nil)
	if err != nil {
		return Recovery{Dir: ps.dir}, err
	}
	defer unlock()
	rec := ps.recoverLocked()
	return rec, nil
}

// lock takes the install lock of the plan set. With waiting nil it does
// not wait: a lock held by another process is ErrRunning.
// Otherwise waiting is called once if the lock is held, and lock polls
// until it is free or ctx is done. The lock is released by unlock, or
// when the process ends, however it ends.
func (ps planSet) lock(ctx context.Context, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(ps.lockPath(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot lock %s: %w", ps.dir, err)
	}
	unlock = func() { unlockFile(f); f.Close() }
	delay := 20 * time.Millisecond
	for first := true; ; first = false {
		ok, err := tryLockFile(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("cannot lock %s: %w", ps.lockPath(), err)
		}
		if ok {
			return unlock, nil
		}
		if waiting == nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", ps.dir, ErrRunning)
		}
		if first {
			waiting()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("%w while waiting for another install into %s to finish", context.Cause(ctx), ps.dir)
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// checkReplaceable returns an error when the plan directory holds
// something Install must not replace: a file, or a non-empty directory
// without an index (not a plan set that install wrote). A link is
// replaced (its target is left alone unless it is one of the set's own
// .NAME.set-ID directories).
func (ps planSet) checkReplaceable() error {
	st, err := os.Lstat(ps.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode()&fs.ModeSymlink != 0:
		return nil
	case !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory: refusing to replace it", ps.dir)
	}
	if hasIndex(ps.dir) {
		return nil
	}
	des, err := os.ReadDir(ps.dir)
	if err != nil {
		return err
	}
	if len(des) > 0 {
		return fmt.Errorf("%s is not a plan set written by install (no %s): refusing to replace it; remove it or install elsewhere (--dir)", ps.dir, planset.IndexFile)
	}
	return nil
}

// lockForInstall takes the lock of the plan set for an install and
// cleans up after an interrupted one, noting what it removed. It refuses
// a plan directory that cannot be replaced (--dir /dev/null) before it
// creates the lock file beside it, and again under the lock.
func (ps planSet) lockForInstall(ctx context.Context, note func(format string, args ...any)) (unlock func(), err error) {
	if err := ps.checkReplaceable(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(ps.parent, 0o755); err != nil {
		return nil, err
	}
	unlock, err = ps.lock(ctx, func() {
		note("waiting for another install into %s to finish (it holds %s)", ps.dir, ps.lockPath())
	})
	if err != nil {
		return nil, err
	}
	// A failure to clean up is only noted: the leftovers are removed
	// again next time, and the install itself does not need them gone.
	if rec := ps.recoverLocked(); !rec.Empty() {
		note("%s", rec)
	}
	if err := ps.checkReplaceable(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// candidate is a plan set being written, P/.NAME.new-ID, before it is
// swapped in.
type candidate struct {
	dir, id string
	// settled is set once the directory is removed (interrupted) or
	// handed to publish, which removes it if it fails.
	settled bool
}

// stage creates the empty directory of a candidate set.
func (ps planSet) stage() (*candidate, error) {
	id := newID()
	c := &candidate{dir: ps.path("new", id), id: id}
	// Mkdir, not MkdirTemp: the set gets the usual permissions (0755 less
	// the umask), not MkdirTemp's 0700.
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	return c, nil
}

// discard removes the candidate set unless it was settled.
func (c *candidate) discard() {
	if !c.settled {
		os.RemoveAll(c.dir)
	}
}

// interrupted removes the candidate set now, so that the error can say
// so, and returns the error for cause.
func (c *candidate) interrupted(cause error) error {
	c.settled = true
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("%w: could not remove the partial plan set %s: %v", cause, c.dir, err)
	}
	return fmt.Errorf("%w: removed the partial plan set %s", cause, c.dir)
}

// swap publishes the complete candidate set at NAME and removes the set
// it replaced; a failure to remove that is only noted.
func (ps planSet) swap(c *candidate, note func(format string, args ...any)) error {
	c.settled = true // publish removes what it made if it fails
	old, err := ps.publish(c.dir, c.id)
	if err != nil {
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			note("could not remove the previous plan set %s (the next install removes it): %v", old, err)
		}
	}
	return nil
}

// publish makes the complete plan set in tmp, P/.NAME.new-id, the one at
// NAME, and returns the old set to remove ("" if none). On error, nothing
// changed at NAME and tmp, or what it became, is removed.
func (ps planSet) publish(tmp, id string) (old string, err error) {
	set := ps.path("set", id)
	if err := os.Rename(tmp, set); err != nil {
		return "", err
	}
	link := ps.path("link", id)
	fail := func(err error) (string, error) {
		os.Remove(link)
		os.RemoveAll(set)
		return "", err
	}
	if err := os.Symlink(filepath.Base(set), link); err != nil {
		return fail(err)
	}
	if err := ps.checkReplaceable(); err != nil {
		return fail(err)
	}
	moved := ""
	if st, err := os.Lstat(ps.dir); err == nil && st.IsDir() {
		// A plain directory cannot be renamed over: move it aside
		// first. A kill until the next rename leaves NAME missing and
		// .NAME.old-ID, which recovery puts back.
		moved = ps.path("old", id)
		if err := os.Rename(ps.dir, moved); err != nil {
			return fail(err)
		}
		old = moved
	} else {
		old = ps.target()
	}
	if err := os.Rename(link, ps.dir); err != nil {
		if moved != "" {
			os.Rename(moved, ps.dir)
		}
		return fail(err)
	}
	syncDir(ps.parent)
	if old == set {
		old = ""
	}
	return old, nil
}

// syncDir makes the renames in dir durable; best effort, as some file
// systems cannot sync a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
