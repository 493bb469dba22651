package starlib

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/mscclgo/mscclgo/internal/infile"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// DefaultMaxSteps is the default Starlark step limit: more than three
// times what a 1024-rank hierarchical allgather takes, small enough to
// stop a runaway loop in seconds.
const DefaultMaxSteps = 1_000_000_000

// Source is where scripts and the files they load come from. Names are
// slash-separated paths relative to the source root; a load may not leave
// the root.
type Source interface {
	// ReadFile returns the contents of the root-relative file name.
	ReadFile(name string) ([]byte, error)
	// Display returns the name to show in positions and errors.
	Display(name string) string
}

// DirSource returns the Source of the directory root on disk. Symbolic
// links that resolve outside root are refused.
func DirSource(root string) Source { return dirSource{root: root} }

type dirSource struct{ root string }

func (d dirSource) ReadFile(name string) ([]byte, error) {
	full := filepath.Join(d.root, filepath.FromSlash(name))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		// The opener names a link loop or a missing file as such.
		if cerr := infile.Check(full, "a .star script", MaxScriptBytes); cerr != nil {
			err = cerr
		}
		return nil, named(name, err)
	}
	if err := infile.Check(real, "a .star script", MaxScriptBytes); err != nil {
		return nil, named(name, err)
	}
	rootReal, err := filepath.EvalSymlinks(d.root)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(rootReal, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s resolves outside the root %s", name, d.root)
	}
	data, err := infile.Read(real, "a .star script", MaxScriptBytes)
	return data, named(name, err)
}

// named names the file of an opener's error as the script did, not by
// where its links lead.
func named(name string, err error) error {
	var ie *infile.Error
	if errors.As(err, &ie) {
		ie.Path = name
	}
	return err
}

// MaxScriptBytes bounds the size of a script or loaded file.
const MaxScriptBytes = 16 << 20

func (d dirSource) Display(name string) string {
	if d.root == "." || d.root == "" {
		return name
	}
	return filepath.ToSlash(filepath.Join(d.root, filepath.FromSlash(name)))
}

// FSSource returns the Source of a file system (such as the embedded
// algorithms), showing names under prefix.
func FSSource(fsys fs.FS, prefix string) Source { return fsSource{fsys, prefix} }

type fsSource struct {
	fsys   fs.FS
	prefix string
}

func (s fsSource) ReadFile(name string) ([]byte, error) { return fs.ReadFile(s.fsys, name) }
func (s fsSource) Display(name string) string           { return path.Join(s.prefix, name) }

// Options configures an evaluation.
type Options struct {
	// Defines are the -D name=value parameters.
	Defines map[string]string
	// Limits bound the evaluation's steps, time, memory and ops; zero
	// fields take the defaults.
	Limits
	// Stderr receives print() output; nil discards it.
	Stderr io.Writer
	// Context cancels the evaluation.
	Context context.Context
}

// Result is what a script evaluation produced.
type Result struct {
	// Programs are the programs the script created, in creation order.
	Programs []*Program
	// Params are the parameters the script declared, in declaration order.
	Params []Param
}

// fileOptions is the dialect of .star files (docs/language.md §2.1).
var fileOptions = syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// Eval evaluates the root-relative file name of src. On failure the error
// is an *Error with a position and a traceback.
func Eval(src Source, name string, opts Options) (*Result, error) {
	name = path.Clean(name)
	stderr := opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	st := &state{params: &paramSet{defines: opts.Defines}, stderr: stderr}
	thread := &starlark.Thread{
		Name:  "mscclgo " + name,
		Print: func(_ *starlark.Thread, msg string) { fmt.Fprintln(stderr, msg) },
	}
	thread.SetLocal(stateKey, st)
	st.thread = thread
	m := startMeter(thread, opts.Limits)
	defer m.stopMeter()
	st.meter = m
	if ctx := opts.Context; ctx != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-ctx.Done():
				m.halt(context.Cause(ctx).Error())
			case <-done:
			}
		}()
	}
	l := &loader{src: src, predeclared: Predeclared(), modules: map[string]*module{}, names: map[string]string{}}
	thread.Load = l.load
	// The interpreter runs on its own goroutine, so that a builtin of
	// the interpreter that never checks for cancellation (== of two huge
	// lists, int() of a long string) cannot hold the evaluation past a
	// limit or a signal: abandonGrace after the stop, it is abandoned
	// (the command then exits, which ends it).
	ran := make(chan error, 1)
	go func() {
		_, err := l.exec(thread, name, "__main__")
		ran <- err
	}()
	var err error
	select {
	case err = <-ran:
	case <-m.halted:
		if err = m.awaitStop(ran); errors.Is(err, errAbandoned) {
			// Stop it at its next instruction, should the builtin
			// ever return.
			thread.Cancel("abandoned")
			pos, stack := stuckAt(thread)
			return nil, &Error{File: src.Display(name), Pos: pos, Stack: stack, Msg: m.stopped().Error() + " (inside a builtin call that does not stop by itself: abandoned)"}
		}
	}
	if err != nil {
		return nil, toError(err, src.Display(name))
	}
	if err := m.stopped(); err != nil {
		// A limit hit as the last statement ran.
		return nil, &Error{File: src.Display(name), Msg: err.Error()}
	}
	if err := st.params.undeclared(); err != nil {
		return nil, &Error{File: src.Display(name), Msg: err.Error()}
	}
	res := &Result{Programs: st.programs, Params: st.params.declared}
	return res, nil
}

// stuckAt returns the position and the script's frames of the call an
// abandoned evaluation sits in. It reads the interpreter's frames from
// another goroutine: that goroutine has gone abandonGrace inside one call
// and does not move its frames while it stays there. Should the call
// return during the read, the read may fail; then there is no position.
func stuckAt(thread *starlark.Thread) (pos syntax.Position, stack starlark.CallStack) {
	defer func() {
		if recover() != nil {
			pos, stack = syntax.Position{}, nil
		}
	}()
	for _, fr := range thread.CallStack() {
		if fr.Pos.IsValid() && fr.Pos.Filename() != "<builtin>" {
			stack = append(stack, fr)
			pos = fr.Pos
		}
	}
	return pos, stack
}

// abandonGrace is how long a stopped evaluation may go without the
// interpreter calling the meter back before it is abandoned.
const abandonGrace = 3 * time.Second

// errAbandoned says the interpreter did not stop after a halt.
var errAbandoned = errors.New("abandoned")

// awaitStop waits, after a halt, for the interpreter to return on ran;
// it returns errAbandoned when the interpreter went abandonGrace without
// a step callback (it sits in one builtin call).
func (m *meter) awaitStop(ran <-chan error) error {
	last := m.callbacks.Load()
	t := time.NewTicker(abandonGrace)
	defer t.Stop()
	for {
		select {
		case err := <-ran:
			return err
		case <-t.C:
			now := m.callbacks.Load()
			if now == last {
				return errAbandoned
			}
			last = now
		}
	}
}

// loader executes files and serves load().
type loader struct {
	src         Source
	predeclared starlark.StringDict
	modules     map[string]*module
	names       map[string]string // display name -> root-relative name
}

type module struct {
	globals starlark.StringDict
	err     error
	loading bool
}

// exec runs the root-relative file name with __name__ set to modName.
func (l *loader) exec(thread *starlark.Thread, name, modName string) (starlark.StringDict, error) {
	data, err := l.src.ReadFile(name)
	var ie *infile.Error
	if errors.As(err, &ie) {
		if errors.Is(err, infile.ErrNotRegular) || errors.Is(err, infile.ErrTooLarge) || errors.Is(err, infile.ErrLinkLoop) {
			// The opener's error names the file and what is wrong
			// with it.
			ie.Path = l.src.Display(name)
			return nil, err
		}
		err = ie.Err
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", l.src.Display(name), unwrapPathError(err))
	}
	l.names[l.src.Display(name)] = name
	f, err := fileOptions.Parse(l.src.Display(name), data, 0)
	if err != nil {
		return nil, err
	}
	rewriteSlices(f)
	pre := make(starlark.StringDict, len(l.predeclared)+1)
	for k, v := range l.predeclared {
		pre[k] = v
	}
	pre["__name__"] = starlark.String(modName)
	prog, err := starlark.FileProgram(f, pre.Has)
	if err != nil {
		return nil, err
	}
	g, err := prog.Init(thread, pre)
	if err != nil {
		return nil, err
	}
	if err := checkNesting(meterOf(thread), g); err != nil {
		return nil, &Error{File: l.src.Display(name), Msg: err.Error(), cause: err}
	}
	g.Freeze()
	return g, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// load implements load(): paths are relative to the loading file and may
// not leave the root.
func (l *loader) load(thread *starlark.Thread, modulePath string) (starlark.StringDict, error) {
	from := thread.CallFrame(0).Pos.Filename()
	if strings.HasPrefix(modulePath, "/") || filepath.IsAbs(modulePath) {
		return nil, fmt.Errorf("absolute path %q is not allowed; load paths are relative to the loading file", modulePath)
	}
	dir := path.Dir(l.names[from])
	name := path.Clean(path.Join(dir, modulePath))
	if name == ".." || strings.HasPrefix(name, "../") {
		return nil, fmt.Errorf("%q leaves the root directory of the program", modulePath)
	}
	if m, ok := l.modules[name]; ok {
		if m.loading {
			return nil, fmt.Errorf("load cycle: %s is already being loaded", name)
		}
		return m.globals, m.err
	}
	m := &module{loading: true}
	l.modules[name] = m
	m.globals, m.err = l.exec(thread, name, name)
	m.loading = false
	return m.globals, m.err
}

// Error is an evaluation error: a position, a message, and the Starlark
// call stack (outermost first).
type Error struct {
	// File names the file when there is no position.
	File string
	Pos  syntax.Position
	Msg  string
	// Hint, when set, suggests the Starlark way of writing a Python habit
	// that caused a syntax error (an import, a with block, **).
	Hint  string
	Stack starlark.CallStack
	cause error
}

// Error returns "FILE:LINE:COL: error: MESSAGE".
func (e *Error) Error() string {
	if e.Pos.IsValid() {
		return fmt.Sprintf("%s: error: %s", e.Pos, e.Msg)
	}
	if e.File != "" {
		return fmt.Sprintf("%s: error: %s", e.File, e.Msg)
	}
	return "error: " + e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.cause }

// Detail returns the error line, the hint line ("hint: ...") if any, and
// the traceback, one frame a line, innermost call last.
func (e *Error) Detail() string {
	var b strings.Builder
	b.WriteString(e.Error())
	b.WriteString("\n")
	if e.Hint != "" {
		fmt.Fprintf(&b, "hint: %s\n", e.Hint)
	}
	if len(e.Stack) > 0 {
		b.WriteString("Traceback (most recent call last):\n")
		for i, fr := range e.Stack {
			// A runaway recursion has a frame per call: show its two ends.
			if n := len(e.Stack); n > 2*tracebackEnds && i >= tracebackEnds && i < n-tracebackEnds {
				if i == tracebackEnds {
					fmt.Fprintf(&b, "  ... %d more frames ...\n", n-2*tracebackEnds)
				}
				continue
			}
			fmt.Fprintf(&b, "  %s: in %s\n", fr.Pos, fr.Name)
		}
	}
	return b.String()
}

// tracebackEnds is how many frames Detail shows at each end of a long
// traceback.
const tracebackEnds = 10

// toError converts an evaluation failure into an *Error.
func toError(err error, file string) *Error {
	if own, ok := err.(*Error); ok {
		return own
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		// A failure inside a loaded file is wrapped by the load; report
		// the innermost evaluation error, whose stack is complete.
		msg := ee.Msg
		for {
			var inner *starlark.EvalError
			if c := ee.Unwrap(); c != nil && errors.As(c, &inner) && inner != ee {
				ee = inner
				msg = inner.Msg
				continue
			}
			break
		}
		// A limit's message names the limit and its flag; the interpreter's
		// prefix adds nothing to it.
		msg = strings.TrimPrefix(msg, "Starlark computation cancelled: ")
		var stack starlark.CallStack
		var pos syntax.Position
		for _, fr := range ee.CallStack {
			if fr.Pos.IsValid() && fr.Pos.Filename() != "<builtin>" {
				stack = append(stack, fr)
				pos = fr.Pos
			}
		}
		e := &Error{Pos: pos, Msg: msg, Stack: stack, cause: err}
		if strings.HasPrefix(msg, "cannot load ") {
			// A syntax error in a loaded file.
			e.Hint = syntaxHint(msg)
		}
		return e
	}
	var se syntax.Error
	if errors.As(err, &se) {
		return &Error{Pos: se.Pos, Msg: se.Msg, Hint: syntaxHint(se.Msg), cause: err}
	}
	var rl resolve.ErrorList
	if errors.As(err, &rl) && len(rl) > 0 {
		msgs := make([]string, len(rl))
		for i, r := range rl {
			if i == 0 {
				msgs[i] = r.Msg
			} else {
				msgs[i] = fmt.Sprintf("%s: %s", r.Pos, r.Msg)
			}
		}
		return &Error{Pos: rl[0].Pos, Msg: strings.Join(msgs, "\n"), cause: err}
	}
	return &Error{File: file, Msg: err.Error(), cause: err}
}
