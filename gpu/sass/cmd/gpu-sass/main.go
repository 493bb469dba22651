// Command gpu-sass audits the interpreter's cubins (`make gpu-sass`,
// docs/gpu.md §16): for each cubin it runs `cuobjdump -sass`, reads the
// symbol table and ptxas's -v log beside it (build/interp_sm90.cubin:
// build/ptxas-sm90.log), and prints package sass's table. It exits 1 when
// a rule fails, naming the entry, loop and instruction, unless -report.
//
// With -costs FILE it also writes the costs summary that the model of
// this kernel is derived from (docs/model.md, "The mscclgo kernel").
//
//	go run ./gpu/sass/cmd/gpu-sass [-report] [-doc docs/gpu.md -note TEXT] [-costs FILE] build/interp_sm90.cubin ...
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mscclgo/mscclgo/gpu/sass"
)

func main() {
	report := flag.Bool("report", false, "report findings but exit 0")
	doc := flag.String("doc", "", "markdown file whose '<!-- gpu-sass:begin -->' ... '<!-- gpu-sass:end -->' block gets the table, one row per architecture and family")
	note := flag.String("note", "", "line written above the table in -doc (date, toolkit)")
	cuobjdump := flag.String("cuobjdump", "cuobjdump", "the cuobjdump to run")
	show := flag.Int("show", 40, "findings printed (all are counted)")
	costs := flag.String("costs", "", "write the costs summary (per entry: the dispatch path, each family's fastest loop) to `FILE`, what the model of this kernel reads (docs/model.md)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: gpu-sass [-report] [-doc FILE -note TEXT] CUBIN...")
		os.Exit(2)
	}
	rep, err := audit(*cuobjdump, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpu-sass:", err)
		os.Exit(2)
	}
	var table, merged bytes.Buffer
	if err := rep.WriteTable(&table, false); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-sass:", err)
		os.Exit(2)
	}
	os.Stdout.Write(table.Bytes())
	if *doc != "" {
		if err := rep.WriteTable(&merged, true); err != nil {
			fmt.Fprintln(os.Stderr, "gpu-sass:", err)
			os.Exit(2)
		}
		if err := sass.ReplaceBlock(*doc, *note, merged.String()); err != nil {
			fmt.Fprintln(os.Stderr, "gpu-sass:", err)
			os.Exit(2)
		}
	}
	if *costs != "" {
		var b bytes.Buffer
		if err := sass.WriteCosts(&b, *note, rep.Costs()); err != nil {
			fmt.Fprintln(os.Stderr, "gpu-sass:", err)
			os.Exit(2)
		}
		if err := os.WriteFile(*costs, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gpu-sass:", err)
			os.Exit(2)
		}
	}
	for i, f := range rep.Findings {
		if i == *show {
			fmt.Fprintf(os.Stderr, "gpu-sass: ... and %d more\n", len(rep.Findings)-i)
			break
		}
		fmt.Fprintln(os.Stderr, "gpu-sass:", f)
	}
	if len(rep.Findings) > 0 {
		if *report {
			fmt.Fprintf(os.Stderr, "gpu-sass: %d findings (report mode: exit 0)\n", len(rep.Findings))
			return
		}
		fmt.Fprintf(os.Stderr, "gpu-sass: %d findings\n", len(rep.Findings))
		os.Exit(1)
	}
}

// audit runs cuobjdump on each cubin and audits them all together.
func audit(cuobjdump string, cubins []string) (sass.Report, error) {
	var funcs []sass.Function
	var syms []sass.Sym
	res := map[sass.Key]sass.Resources{}
	for _, c := range cubins {
		out, err := exec.Command(cuobjdump, "-sass", c).Output()
		if err != nil {
			return sass.Report{}, fmt.Errorf("%s -sass %s: %v", cuobjdump, c, err)
		}
		fs, err := sass.Parse(c, string(out))
		if err != nil {
			return sass.Report{}, err
		}
		if len(fs) == 0 {
			return sass.Report{}, fmt.Errorf("%s: cuobjdump printed no function", c)
		}
		arch := fs[0].Arch
		bin, err := os.ReadFile(c)
		if err != nil {
			return sass.Report{}, err
		}
		ss, err := sass.Symbols(c, arch, bin)
		if err != nil {
			return sass.Report{}, err
		}
		// build/interp_sm90.cubin -> build/ptxas-sm90.log
		base := strings.TrimSuffix(filepath.Base(c), ".cubin")
		log := filepath.Join(filepath.Dir(c), "ptxas-"+base[strings.LastIndexByte(base, '_')+1:]+".log")
		text, err := os.ReadFile(log)
		if err != nil {
			return sass.Report{}, fmt.Errorf("the ptxas log of %s: %v", c, err)
		}
		r, err := sass.ParsePtxas(log, arch, string(text))
		if err != nil {
			return sass.Report{}, err
		}
		for k, v := range r {
			res[k] = v
		}
		funcs = append(funcs, fs...)
		syms = append(syms, ss...)
	}
	return sass.Audit(funcs, syms, res), nil
}
