package sass

import "strings"

// Space is the state space a memory instruction addresses.
type Space string

// The state spaces of SASS memory instructions.
const (
	Global  Space = "global"  // LDG, STG: no address-space check
	Generic Space = "generic" // LD, ST: resolved to a space on every access
	Local   Space = "local"   // LDL, STL: the thread's stack (spills, arrays)
	Shared  Space = "shared"  // LDS, STS
)

// Access is what a load or store instruction does.
type Access struct {
	Store bool
	Space Space
	Width int    // bits: 8, 16, 32, 64 or 128
	Scope string // "weak", "strong.gpu", "strong.sys", "strong.sm", "constant" (read-only cache)
}

// Bytes is the width in bytes.
func (a Access) Bytes() int { return a.Width / 8 }

// Kind is the access as the table names it: "ld.global.128", with the
// scope where it is not weak.
func (a Access) Kind() string {
	k := "ld"
	if a.Store {
		k = "st"
	}
	k += "." + string(a.Space) + "." + itoa(a.Width)
	if a.Scope != "weak" {
		k += "." + a.Scope
	}
	return k
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// Decode reports the access of a load or store instruction; false for
// any other (constant-bank loads LDC/ULDC, atomics, LDGSTS, LDSM).
func Decode(in Inst) (Access, bool) {
	parts := strings.Split(in.Op, ".")
	var a Access
	switch parts[0] {
	case "LDG":
		a.Space = Global
	case "STG":
		a.Space, a.Store = Global, true
	case "LD":
		a.Space = Generic
	case "ST":
		a.Space, a.Store = Generic, true
	case "LDL":
		a.Space = Local
	case "STL":
		a.Space, a.Store = Local, true
	case "LDS":
		a.Space = Shared
	case "STS":
		a.Space, a.Store = Shared, true
	default:
		return Access{}, false
	}
	a.Width, a.Scope = 32, "weak"
	strong := false
	for _, m := range parts[1:] {
		switch m {
		case "U8", "S8":
			a.Width = 8
		case "U16", "S16":
			a.Width = 16
		case "64":
			a.Width = 64
		case "128":
			a.Width = 128
		case "STRONG":
			strong = true
		case "SYS", "GPU", "SM":
			if strong || a.Scope == "weak" {
				a.Scope = "strong." + strings.ToLower(m)
			}
		case "CONSTANT":
			a.Scope = "constant"
		}
	}
	return a, true
}

// isAtomic reports atomics and reductions on global or generic memory
// (signals, semaphores, the FIFO head).
func isAtomic(in Inst) bool {
	switch in.Base() {
	case "ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDS", "ATOMC":
		return true
	}
	return false
}
