package sass

import (
	"bytes"
	"debug/elf"
	"fmt"
	"strings"
)

// Sym is a called (not inlined) device function placed inside an entry
// point's code: `cuobjdump -sass` prints it as part of the entry, and
// only the cubin's symbol table says where it lies.
type Sym struct {
	Arch     string
	Entry    string // the entry whose .text section holds it
	Name     string // as ptxas names it (the symbol is "$entry$name")
	Lo, Hi   uint64 // its byte range in the entry's code
	Fallback bool   // its name says it is an unaligned fallback (exempt)
}

// Symbols reads the device functions of a cubin for arch (file names it
// in errors). The cubin is an ELF64 file whose version fields hold the
// toolkit version, which debug/elf refuses: a copy with them set to 1 is
// read instead.
func Symbols(file, arch string, cubin []byte) ([]Sym, error) {
	if len(cubin) < 0x18 || string(cubin[:4]) != "\x7fELF" {
		return nil, fmt.Errorf("%s: not an ELF file", file)
	}
	b := append([]byte(nil), cubin...)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	b[0x14], b[0x15], b[0x16], b[0x17] = 1, 0, 0, 0 // e_version
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: symbols: %v", file, err)
	}
	var out []Sym
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || int(s.Section) >= len(f.Sections) || s.Section == 0 {
			continue
		}
		entry, ok := strings.CutPrefix(f.Sections[s.Section].Name, ".text.")
		if !ok || s.Name == entry {
			continue // not code, or the entry itself
		}
		name := strings.TrimPrefix(s.Name, "$"+entry+"$")
		out = append(out, Sym{Arch: arch, Entry: entry, Name: name, Lo: s.Value, Hi: s.Value + s.Size,
			Fallback: strings.Contains(name, fallbackMark)})
	}
	return out, nil
}

// owner is the function an address of entry's code belongs to: a
// called function of syms, or the entry.
func owner(syms []Sym, arch, entry string, addr uint64) (string, bool) {
	for _, s := range syms {
		if s.Arch == arch && s.Entry == entry && addr >= s.Lo && addr < s.Hi {
			return s.Name, s.Fallback
		}
	}
	return entry, false
}
