package complete

import (
	"strings"
	"testing"
)

// tree is a two-command tree with one flag of each kind.
var tree = []Command{
	{Name: "eval", Usage: "compile a [script]", Args: Values{Exts: []string{".star"}, Words: []string{"ring"}, Label: "bundled algorithm"},
		Flags: []Flag{
			{Short: []string{"o"}, Long: []string{"output"}, Usage: "write to OUT", TakesValue: true, Placeholder: "OUT", Values: Values{Files: true}},
			{Long: []string{"dtype"}, Usage: "data type", TakesValue: true, Placeholder: "T", Values: Values{Words: []string{"float16", "int32"}, Label: "data type"}},
			{Short: []string{"D"}, Long: []string{"define"}, Usage: "set it's name=value", TakesValue: true, Repeatable: true, Placeholder: "name=value"},
			{Long: []string{"all"}, Usage: "everything"},
		}},
	{Name: "install", Usage: "install plans", Flags: []Flag{{Long: []string{"dir"}, Usage: "where", TakesValue: true, Values: Values{Dirs: true}}}},
}

func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		shell string
		want  []string // lines or fragments the script holds
	}{
		{"bash", []string{
			`compgen -W "eval install"`,
			"        -o|--output)\n            _mscclgo_files\n",
			`COMPREPLY+=( $(compgen -W "float16 int32" -- "$cur") )`,
			"        -D|--define)\n            return 0\n",
			"        --dir)\n            _mscclgo_dirs\n",
			"_mscclgo_files .star\n",
			`compgen -W "-o --output --dtype -D --define --all"`,
		}},
		{"zsh", []string{
			`'eval:compile a (script)'`,
			`'(-o --output)--output[write to OUT]:OUT:_mscclgo_values_1'`,
			`'*-D[set it'\''s name=value]:name=value: '`,
			`_alternative 'files:file:_files -g "*.star"' 'words:bundled algorithm:(ring)'`,
			"'directories:directory:_files -/'",
		}},
		{"fish", []string{
			"complete -c mscclgo -n __mscclgo_needs_command -a eval -d 'compile a [script]'",
			"complete -c mscclgo -n '__mscclgo_using eval' -s o -l output -r -F -d 'write to OUT'",
			"-l dtype -x -a 'float16 int32'",
			`-s D -l define -x -d 'set it\'s name=value'`,
			"-l dir -x -a '(__fish_complete_directories)'",
			"complete -c mscclgo -n '__mscclgo_using eval' -a '(__mscclgo_files .star)'",
		}},
	} {
		var b strings.Builder
		if err := Write(&b, tc.shell, tree); err != nil {
			t.Fatalf("Write(%s): %v", tc.shell, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s script lacks %q:\n%s", tc.shell, w, b.String())
			}
		}
	}
}

func TestWriteUnknownShell(t *testing.T) {
	var b strings.Builder
	err := Write(&b, "tcsh", tree)
	if err == nil || !strings.Contains(err.Error(), `"tcsh"`) || b.Len() != 0 {
		t.Fatalf("Write(tcsh) = %v, wrote %d bytes; want an error naming tcsh and nothing written", err, b.Len())
	}
}

func TestAny(t *testing.T) {
	for _, tc := range []struct {
		v    Values
		want bool
	}{
		{Values{}, false},
		{Values{Label: "only a label"}, false},
		{Values{Files: true}, true},
		{Values{Exts: []string{".json"}}, true},
		{Values{Dirs: true}, true},
		{Values{Words: []string{"a"}}, true},
	} {
		if got := tc.v.Any(); got != tc.want {
			t.Errorf("%+v.Any() = %v, want %v", tc.v, got, tc.want)
		}
	}
}
