package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The classes of plan problems. Every error returned by Load, Check and
// Instantiate is a *PlanError whose Err is one of these, so errors.Is
// tells the class and the message tells the details.
var (
	// ErrSyntax means the data is not one JSON value.
	ErrSyntax = errors.New("not valid JSON")
	// ErrMissing means a required key is absent.
	ErrMissing = errors.New("missing required key")
	// ErrType means a value has the wrong JSON type, or is not a
	// non-negative integer where one is required.
	ErrType = errors.New("wrong JSON type")
	// ErrValue means a string is none of the spellings the format allows
	// (channel type, buffer type, protocol).
	ErrValue = errors.New("unknown value")
	// ErrUnknownOp means an op name the MSCCL++ executor rejects
	// ("Invalid operation type"), including the DSL-internal glre and
	// start.
	ErrUnknownOp = errors.New("invalid operation type")
	// ErrOutOfRange means an id or index beyond the table it selects
	// from: a channel, remote buffer, switch channel, semaphore, rank, or
	// chunk beyond its buffer.
	ErrOutOfRange = errors.New("out of range")
	// ErrStructure means the plan's shape is wrong: thread block ids not
	// dense, gpus[r].id != r, a nested pipeline, an inconsistent barrier.
	ErrStructure = errors.New("invalid plan structure")
	// ErrOperand means the operands or channel of an op do not fit the op
	// (docs/semantics.md §2.11): a remote operand where a local one is
	// read, a remote operand without a memory or port channel_type, the
	// wrong number of operands.
	ErrOperand = errors.New("invalid operand")
	// ErrLimit means a hard limit of the MSCCL++ executor is exceeded
	// (docs/semantics.md §1.16); MSCCL++ overflows most of them
	// silently.
	ErrLimit = errors.New("executor limit exceeded")
	// ErrPairing means channels that are used do not pair between ranks
	// (docs/semantics.md §4.1), or switch groups that do not match.
	ErrPairing = errors.New("unpaired channel")
	// ErrSize means a message size the plan cannot be instantiated for
	// (docs/semantics.md §1.7), or a run at that size would be refused
	// (CheckLaunch: a reduction of a partial element, misaligned packets,
	// a scratch ring access beyond scratch).
	ErrSize = errors.New("invalid message size")
	// ErrDuplicateKey means an object gives the same key twice: JSON
	// decoders keep one of the values (encoding/json and MSCCL++'s parser
	// the last), so the plan does not say what it means.
	ErrDuplicateKey = errors.New("duplicate key")

	// ErrUnpairedUnused is a warning, not an error: a declared memory or
	// port channel has no counterpart on its peer, but no op uses it.
	ErrUnpairedUnused = errors.New("unused unpaired channel")
	// ErrQuirk is a warning, not an error: MSCCL++ executes this part of
	// the plan differently from mscclgo (docs/semantics.md §6.2).
	ErrQuirk = errors.New("MSCCL++ quirk")
)

// IsWarning reports whether err is a warning (ErrUnpairedUnused,
// ErrQuirk): a problem Check reports but that does not stop Load.
func IsWarning(err error) bool {
	return errors.Is(err, ErrUnpairedUnused) || errors.Is(err, ErrQuirk)
}

// PlanError is a problem of a plan, located by a path such as
// "gpus[1].threadblocks[3].ops[7]" (empty for the top-level object).
type PlanError struct {
	// Path names the JSON object the problem is in.
	Path string
	// Err is the class of the problem: one of the Err* sentinels.
	Err error
	// Msg says what is wrong, naming the key and the value.
	Msg string
	// Sizes are the byte sizes Msg names as the message, input or output
	// size it is about ("message size 1024 (the input size): below
	// min_message_size 2048"), so that a caller that names the size does
	// not name it twice (NamesSize).
	Sizes []uint64
}

// NamesSize reports whether the message names the byte size n as the
// message, input or output size (Sizes).
func (e *PlanError) NamesSize(n uint64) bool { return slices.Contains(e.Sizes, n) }

// Error returns "PATH: MSG", or MSG alone for the top-level object.
func (e *PlanError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap returns the sentinel.
func (e *PlanError) Unwrap() error { return e.Err }

// Load parses and validates an MSCCL++ execution plan. It returns the
// first error found (a *PlanError); Check lists them all. Warnings do not
// stop loading. Unknown keys are ignored.
func Load(data []byte) (*Plan, error) {
	l := newLoader()
	l.run(data)
	for _, err := range l.errs {
		if !IsWarning(err) {
			return nil, err
		}
	}
	return l.plan, nil
}

// ReadCompiled reads a plan as the compiler may write it: as Load does,
// but it also takes the DSL-internal op glre (OpGroupLoadReduce, which
// MSCCL++ does not load and no executor runs), unchecked. It is for
// tools and tests that read compiled plans back; run only what Load
// accepts.
func ReadCompiled(data []byte) (*Plan, error) {
	l := newLoader()
	l.compiled = true
	l.run(data)
	for _, err := range l.errs {
		if !IsWarning(err) {
			return nil, err
		}
	}
	return l.plan, nil
}

// LoadChecked is Load and Check in one walk: the plan (nil where a
// problem is an error) and every problem found, as Check lists them.
func LoadChecked(data []byte) (*Plan, []error) {
	l := newLoader()
	l.run(data)
	for _, err := range l.errs {
		if !IsWarning(err) {
			return nil, l.errs
		}
	}
	return l.plan, l.errs
}

// Check validates a plan and returns every problem found, errors and
// warnings (see IsWarning) alike, in document order followed by the
// cross-rank checks; nil means the plan is clean.
func Check(data []byte) []error {
	l := newLoader()
	l.run(data)
	return l.errs
}

// ---------------------------------------------------------------------------
// The loader: one walk over the decoded JSON that builds the Plan and
// records every problem.

type loader struct {
	compiled bool // ReadCompiled: take glre ops
	errs     []error
	plan     *Plan
	gpus     []*gpuState
}

// gpuState is what the loader knows about one rank while it walks the
// thread blocks; the ok flags say whether a table parsed cleanly, so that
// a broken table does not cause a cascade of range errors.
type gpuState struct {
	path       string
	obj        node
	objOK      bool
	chunksOK   bool
	channelsOK bool
	remoteOK   bool
	semOK      bool
	// peers are the flattened connected_to lists of memory and port
	// channels; nSwitch the number of switch channels.
	peers   map[ChannelType][]int
	nSwitch int
	// used records, per channel type, the global channel indices that ops
	// signal or wait on, with the path of the first such op.
	used map[ChannelType]map[int]string
	// barriers records, per barrier id, the thread blocks using it and
	// the num_threadblocks values they give.
	barriers map[int]*barrierUse
}

type barrierUse struct {
	tbs    []int
	counts map[int]string // num_threadblocks -> first path
	first  string
}

func newLoader() *loader { return &loader{} }

func (l *loader) errf(path string, class error, format string, args ...any) {
	l.errs = append(l.errs, &PlanError{Path: path, Err: class, Msg: fmt.Sprintf(format, args...)})
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// IndexPath is the path of element i of the array at path, as PlanError
// paths spell it: "gpus[1]".
func IndexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func (l *loader) run(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		l.errf("", ErrSyntax, "%s", syntaxMessage(data, err))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		line, col := position(data, off)
		l.errf("", ErrSyntax, "line %d, column %d: data after the plan's JSON object", line, col)
		return
	}
	l.scanText(data)
	top, ok := l.object(root, "")
	if !ok {
		return
	}
	l.parsePlan(top)
}

// syntaxMessage describes a decoding error with a line and column.
func syntaxMessage(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included.
		line, col := position(data, se.Offset-1)
		return fmt.Sprintf("line %d, column %d: %v", line, col, se)
	}
	if errors.Is(err, io.EOF) {
		return "empty input: want a JSON object"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return err.Error()
}

func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
