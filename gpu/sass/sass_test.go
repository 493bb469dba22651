package sass

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.table.md")

// load audits testdata/NAME.{sass,ptxas,cubin}: the output of
// cuobjdump -sass, nvcc -Xptxas -v and the cubin of testdata/fam.cu
// (commands in its comment), small kernels in the shapes of the
// interpreter's loops.
func load(t *testing.T, name string) ([]Function, Report) {
	t.Helper()
	read := func(ext string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name+ext))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	funcs, err := Parse(name+".sass", string(read(".sass")))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParsePtxas(name+".ptxas", "sm_90", string(read(".ptxas")))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := Symbols(name+".cubin", "sm_90", read(".cubin"))
	if err != nil {
		t.Fatal(err)
	}
	return funcs, Audit(funcs, syms, res)
}

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		op   string
		want Access
		ok   bool
	}{
		{"LDG.E.128", Access{Space: Global, Width: 128, Scope: "weak"}, true},
		{"STG.E.128.STRONG.SYS", Access{Store: true, Space: Global, Width: 128, Scope: "strong.sys"}, true},
		{"LD.E.64", Access{Space: Generic, Width: 64, Scope: "weak"}, true},
		{"ST.E.STRONG.SYS", Access{Store: true, Space: Generic, Width: 32, Scope: "strong.sys"}, true},
		{"LDG.E.64.STRONG.GPU", Access{Space: Global, Width: 64, Scope: "strong.gpu"}, true},
		{"LDG.E.U16", Access{Space: Global, Width: 16, Scope: "weak"}, true},
		{"ST.E.U8", Access{Store: true, Space: Generic, Width: 8, Scope: "weak"}, true},
		{"LDG.E.128.CONSTANT", Access{Space: Global, Width: 128, Scope: "constant"}, true},
		{"LDL.64", Access{Space: Local, Width: 64, Scope: "weak"}, true},
		{"STS.128", Access{Store: true, Space: Shared, Width: 128, Scope: "weak"}, true},
		{"LDC.64", Access{}, false},
		{"ULDC", Access{}, false},
		{"ATOM.E.ADD.64.STRONG.GPU", Access{}, false},
		{"LDGSTS.E.128", Access{}, false},
	} {
		got, ok := Decode(Inst{Op: c.op})
		if ok != c.ok || got != c.want {
			t.Errorf("Decode(%s) = %+v, %v; want %+v, %v", c.op, got, ok, c.want, c.ok)
		}
	}
}

func TestParse(t *testing.T) {
	funcs, _ := load(t, "fam_sm90")
	var names []string
	for _, f := range funcs {
		names = append(names, f.Arch+" "+f.Name)
	}
	want := []string{"sm_90 packets", "sm_90 reduce_narrow", "sm_90 copy_unaligned", "sm_90 copy_generic", "sm_90 copy_global"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("functions %q, want %q", names, want)
	}
	in := funcs[0].Insts[len(funcs[0].Insts)-1]
	if in.Op != "NOP" && in.Op != "BRA" {
		t.Errorf("last instruction of packets is %s, want the padding (NOP) or the final BRA", in)
	}
	for _, c := range []struct {
		text, err string
	}{
		{"\tcode for sm_90\n\t\tFunction : k\n        /*00g0*/  NOP ;\n", "x.sass:3: bad address \"00g0\""},
		{"\t\tFunction : k\n", "x.sass:1: function \"k\" before any"},
		{"\tcode for sm_90\n        /*0000*/  NOP ;\n", "x.sass:2: instruction"},
		{"\tcode for sm_90\n\t\tFunction : k\n        /*0000*/   ;\n", "x.sass:3: no instruction at address 0000"},
	} {
		_, err := Parse("x.sass", c.text)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Parse(%q): error %v, want one containing %q", c.text, err, c.err)
		}
	}
	in2, ok, err := parseInst("/*01b0*/              @!P0 BRA 0x250 ;                                     /* 0x0000000000248947 */")
	if err != nil || !ok || in2.Pred != "!P0" || in2.Op != "BRA" || in2.Args != "0x250" || in2.Addr != 0x1b0 {
		t.Errorf("parseInst: %+v, %v, %v", in2, ok, err)
	}
}

// TestLoops pins the loops of the excerpt: their nesting, the spin
// inside the packet loop, the shared-memory atomic's retry loop, and the
// called fallback's loop placed inside its caller's code.
func TestLoops(t *testing.T) {
	_, rep := load(t, "fam_sm90")
	var got []string
	for _, l := range rep.Loops {
		got = append(got, l.Func+" "+l.Family+" depth "+itoa(l.Loop.Depth))
	}
	want := []string{
		"packets packet depth 1", "packets wait depth 2", "packets sync depth 1",
		"reduce_narrow reduce depth 1",
		"copy_fallback copy depth 1",
		"copy_generic copy depth 1",
		"copy_global copy depth 1",
	}
	var gotData []string
	for _, g := range got {
		if !strings.Contains(g, " control ") {
			gotData = append(gotData, g)
		}
	}
	if !reflect.DeepEqual(gotData, want) {
		t.Errorf("loops:\n%s\nwant:\n%s", strings.Join(gotData, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range rep.Loops {
		if l.Func == "packets" && l.Family == FamWait && l.Loop.Parent < 0 {
			t.Errorf("the spin at 0x%x has no enclosing loop", l.Loop.Header)
		}
	}
}

// TestFindings: each rule fires where the excerpt breaks it, and only there.
func TestFindings(t *testing.T) {
	_, rep := load(t, "fam_sm90")
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Func+": "+f.Inst.Op+": "+strings.SplitN(f.Rule, " (", 2)[0])
	}
	sort.Strings(got)
	want := []string{
		"copy_generic: ST.E.128: generic access in a data loop",
		"reduce_narrow: LDG.E.64: 64-bit access in a Simple-protocol data loop",
		"reduce_narrow: LDG.E: 32-bit access in a Simple-protocol data loop",
		"reduce_narrow: LDG.E: 32-bit access in a Simple-protocol data loop",
		"reduce_narrow: STG.E.STRONG.SYS: 32-bit access in a Simple-protocol data loop",
		"reduce_narrow: STG.E.STRONG.SYS: strong.sys store in a Simple-protocol data loop",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A spill is a finding of its function.
	funcs := []Function{{Arch: "sm_90", Name: "k"}}
	rep = Audit(funcs, nil, map[Key]Resources{{"sm_90", "k"}: {Arch: "sm_90", Name: "k", SpillStores: 8}})
	if len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0].String(), "sm_90 k: spills 8 B of stores") {
		t.Errorf("spill findings: %v", rep.Findings)
	}
}

func TestPtxas(t *testing.T) {
	b, err := os.ReadFile("testdata/fam_sm90.ptxas")
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParsePtxas("fam_sm90.ptxas", "sm_90", string(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := res[Key{"sm_90", "reduce_narrow"}]; r.Registers != 22 || r.Stack != 0 {
		t.Errorf("reduce_narrow: %+v", r)
	}
	if _, ok := res[Key{"sm_90", "copy_fallback"}]; !ok {
		t.Errorf("no resources for the called copy_fallback: %v", res)
	}
	text := "ptxas info    : Compiling entry function 'k' for 'sm_80'\nptxas info    : Function properties for k\n" +
		"    560 bytes stack frame, 80 bytes spill stores, 88 bytes spill loads\nptxas info    : Used 64 registers, 384 bytes cmem[0]\n"
	res, err = ParsePtxas("x.log", "sm_90", text)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[Key{"sm_80", "k"}]; r != (Resources{Arch: "sm_80", Name: "k", Registers: 64, Stack: 560, SpillStores: 80, SpillLoads: 88}) {
		t.Errorf("k: %+v", r)
	}
	if _, err := ParsePtxas("x.log", "sm_90", "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"); err == nil ||
		!strings.Contains(err.Error(), "x.log:1:") {
		t.Errorf("a frame line without its function: error %v", err)
	}
}

// TestTable compares the tables, per function then merged, with
// testdata/fam_sm90.table.md (go test -update rewrites it).
func TestTable(t *testing.T) {
	_, rep := load(t, "fam_sm90")
	var b strings.Builder
	if err := rep.WriteTable(&b, false); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	if err := rep.WriteTable(&b, true); err != nil {
		t.Fatal(err)
	}
	compareGolden(t, "table", "testdata/fam_sm90.table.md", b.String())
}

// compareGolden compares got with the golden file (rewriting it first
// under -update) and reports a difference as what's.
func compareGolden(t *testing.T, what, golden, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s:\n%s\nwant (%s):\n%s", what, got, golden, want)
	}
}

func TestReplaceBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(p, []byte("a\n<!-- gpu-sass:begin -->\nold\n<!-- gpu-sass:end -->\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceBlock(p, "note", "| t |\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := "a\n<!-- gpu-sass:begin -->\nnote\n\n| t |\n<!-- gpu-sass:end -->\nb\n"; string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
	os.WriteFile(p, []byte("no block\n"), 0o644)
	if err := ReplaceBlock(p, "", ""); err == nil || !strings.Contains(err.Error(), "doc.md: no") {
		t.Errorf("no block: error %v", err)
	}
}

// TestLeaf: the rules are for the innermost data loops. The heartbeat
// between chunks of rounds (a strong store in the outer loop, beside
// what of the first round the compiler placed there) is no finding; a
// narrow access in the inner loop is one.
func TestLeaf(t *testing.T) {
	const nest = `
	code for sm_90
		Function : nest
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   STG.E.STRONG.SYS [R2.64], R0 ;
        /*0020*/                   LDG.E.128 R12, [R6.64] ;
        /*0030*/                   LDG.E.128 R4, [R6.64] ;
        /*0040*/                   STG.E.128 [R8.64], R4 ;
        /*0050*/                   %s ;
        /*0058*/                   %s2 ;
        /*0060*/               @P0 BRA 0x30 ;
        /*0070*/               @P1 BRA 0x10 ;
        /*0080*/                   EXIT ;
        /*0090*/                   BRA 0x90;
`
	for _, c := range []struct {
		inner    string
		findings []string
	}{
		{"NOP", nil},
		{"PMTRIG 0x80", nil},
		{"LDG.E.64 R10, [R2.64]", []string{"nest: loop at 0x0030 (reduce): /*0050*/ LDG.E.64 R10, [R2.64]: 64-bit access in a Simple-protocol data loop (want 128)"}},
		{"ST.E.128 [R8.64], R4", []string{"nest: loop at 0x0030 (fanout): /*0050*/ ST.E.128 [R8.64], R4: generic access in a data loop (want LDG/STG)"}},
	} {
		second := "NOP"
		if c.inner == "PMTRIG 0x80" {
			second = "LDG.E.U8 R10, [R2.64]" // exempt: the loop is marked
		}
		text := strings.Replace(strings.Replace(nest, "%s2", second, 1), "%s", c.inner, 1)
		funcs, err := Parse("nest.sass", text)
		if err != nil {
			t.Fatal(err)
		}
		rep := Audit(funcs, nil, nil)
		var got []string
		for _, f := range rep.Findings {
			got = append(got, strings.TrimPrefix(f.String(), "sm_90 "))
		}
		if !reflect.DeepEqual(got, c.findings) {
			t.Errorf("inner %q: findings %q, want %q", c.inner, got, c.findings)
		}
		var leaves []string
		for _, l := range rep.Loops {
			if l.Leaf && l.Moved() > 0 {
				leaves = append(leaves, itoa(int(l.Loop.Header)))
			}
		}
		if !reflect.DeepEqual(leaves, []string{"48"}) {
			t.Errorf("inner %q: leaf data loops at %v, want the one at 0x30 (48)", c.inner, leaves)
		}
	}
}

func TestCosts(t *testing.T) {
	_, rep := load(t, "fam_sm90")
	rows := rep.Costs()
	var b strings.Builder
	if err := WriteCosts(&b, "fam_sm90", rows); err != nil {
		t.Fatal(err)
	}
	golden := "testdata/fam_sm90.costs.tsv"
	compareGolden(t, "costs", golden, b.String())
	back, err := ParseCosts(golden, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rows) {
		t.Errorf("ParseCosts(WriteCosts(rows)) = %+v, want %+v", back, rows)
	}
	for _, c := range []struct{ name, text, err string }{
		{"no header", "sm_90\tk\tcopy\t1\t2\t3\t4\t5\t6\n", "header"},
		{"fields", costsHeader + "\nsm_90\tk\tcopy\t1\n", "4 fields, want 9"},
		{"row", costsHeader + "\nsm_90\tk\tspin\t1\t2\t3\t4\t5\t6\n", `row "spin"`},
		{"count", costsHeader + "\nsm_90\tk\tcopy\t1\t-2\t3\t4\t5\t6\n", `field insts: "-2"`},
		{"zero", costsHeader + "\nsm_90\tk\tcopy\t1\t0\t3\t4\t5\t6\n", "0 instructions"},
		{"empty", "# nothing\n", "no header"},
	} {
		if _, err := ParseCosts("x.tsv", strings.NewReader(c.text)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: ParseCosts error %v, want one containing %q", c.name, err, c.err)
		}
	}
}
