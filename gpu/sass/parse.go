// Package sass audits the machine code of the interpreter kernel
// (csrc/interp.cu): it reads the text of `cuobjdump -sass` and the
// resource report of `ptxas -v`, finds every loop of every entry point
// from the control-flow graph, classifies the loops that move data by
// their instruction mix and checks them against the rules of issue 47
// (docs/gpu.md §16): no spills, 128-bit accesses, global (not generic)
// addresses and weak stores in the Simple-protocol data loops.
//
// To start: Parse the SASS text, ParsePtxas the ptxas log, then Audit:
//
//	funcs, err := sass.Parse(name, sassText)
//	res, err := sass.ParsePtxas(name, ptxasLog)
//	rep := sass.Audit(funcs, res)
//	rep.WriteTable(os.Stdout) // rep.Findings lists what fails
//
// `make gpu-sass` runs it on the cubins of `make gpu` (gpu/sass/cmd/gpu-sass).
package sass

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Inst is one SASS instruction.
type Inst struct {
	Addr uint64 // byte offset in its function
	Pred string // guard predicate ("P0", "!P1"), "" when unguarded
	Op   string // opcode with its modifiers ("LDG.E.128.STRONG.SYS")
	Args string // operands as printed
	Line int    // line of the SASS text, for messages
}

// Base is the opcode without modifiers ("LDG").
func (in Inst) Base() string {
	if i := strings.IndexByte(in.Op, '.'); i >= 0 {
		return in.Op[:i]
	}
	return in.Op
}

// String is the instruction as cuobjdump prints it, without the encoding.
func (in Inst) String() string {
	s := fmt.Sprintf("/*%04x*/ ", in.Addr)
	if in.Pred != "" {
		s += "@" + in.Pred + " "
	}
	s += in.Op
	if in.Args != "" {
		s += " " + in.Args
	}
	return s
}

// Function is the code of one function (an entry point or a called
// device function) for one architecture.
type Function struct {
	Arch  string // "sm_90"
	Name  string
	Insts []Inst
}

// Parse reads the text of `cuobjdump -sass` (file names it in errors).
// It keeps the instructions and drops the encodings.
func Parse(file, text string) ([]Function, error) {
	var funcs []Function
	arch := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(s, "code for sm_"):
			arch = strings.TrimPrefix(s, "code for ")
		case strings.HasPrefix(s, "Function : "):
			if arch == "" {
				return nil, fmt.Errorf("%s:%d: function %q before any \"code for sm_NN\" line", file, line, strings.TrimPrefix(s, "Function : "))
			}
			funcs = append(funcs, Function{Arch: arch, Name: strings.TrimSpace(strings.TrimPrefix(s, "Function : "))})
		case strings.HasPrefix(s, "/*") && len(s) > 2 && isHex(s[2]):
			in, ok, err := parseInst(s)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			if !ok {
				continue // an encoding-only line
			}
			if len(funcs) == 0 {
				return nil, fmt.Errorf("%s:%d: instruction %q outside any function", file, line, s)
			}
			in.Line = line
			f := &funcs[len(funcs)-1]
			f.Insts = append(f.Insts, in)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return funcs, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseInst parses "/*0140*/  @!P0 LDG.E.128 R8, [R2.64] ;  /* 0x... */".
// A line of the encoding alone ("/* 0x000ea2000c1e1d00 */") reports false.
func parseInst(s string) (Inst, bool, error) {
	end := strings.Index(s, "*/")
	if end < 0 {
		return Inst{}, false, fmt.Errorf("unterminated address in %q", s)
	}
	addrText := strings.TrimSpace(s[2:end])
	if strings.HasPrefix(addrText, "0x") {
		return Inst{}, false, nil
	}
	addr, err := strconv.ParseUint(addrText, 16, 64)
	if err != nil {
		return Inst{}, false, fmt.Errorf("bad address %q in %q", addrText, s)
	}
	rest := strings.TrimSpace(s[end+2:])
	if i := strings.Index(rest, ";"); i >= 0 {
		rest = strings.TrimSpace(rest[:i])
	} else if i := strings.Index(rest, "/*"); i >= 0 {
		rest = strings.TrimSpace(rest[:i])
	}
	if rest == "" {
		return Inst{}, false, fmt.Errorf("no instruction at address %s in %q", addrText, s)
	}
	in := Inst{Addr: addr}
	if strings.HasPrefix(rest, "@") {
		sp := strings.IndexAny(rest, " \t")
		if sp < 0 {
			return Inst{}, false, fmt.Errorf("predicate without instruction in %q", s)
		}
		in.Pred = rest[1:sp]
		rest = strings.TrimSpace(rest[sp:])
	}
	if sp := strings.IndexAny(rest, " \t"); sp >= 0 {
		in.Op, in.Args = rest[:sp], strings.TrimSpace(rest[sp:])
	} else {
		in.Op = rest
	}
	return in, true, nil
}
