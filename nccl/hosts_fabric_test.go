package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mscclgo/mscclgo/executor/fabric"
)

// TestHostsLibraryFabric: the library's port channels between processes
// over libfabric (MSCCLGO_TRANSPORT): the job of two pretend hosts of
// TestHostsLibrary, whose plans cross between the hosts over port
// channels, run over the tcp provider, chosen (fabric) and by default
// (auto); auto goes on over tcp, every rank alike, where the fabric does
// not open; a malformed hello bound is refused by name. Every value of
// the nine calls is checked, and the INFO log names the transport and
// the provider that ran.
func TestHostsLibraryFabric(t *testing.T) {
	t.Parallel() // slow: runs beside the other slow tests, after the sequential ones
	if _, err := fabric.Available("tcp"); err != nil {
		t.Skipf("libfabric's tcp provider is not available (Debian's libfabric1; .ci/run installs it): %v", err)
	}
	base := []string{"LD_LIBRARY_PATH=" + filepath.Join(artifacts(t), "emu"), "MSCCLGO_NCCL_FALLBACK=none",
		"MSCCLGO_PLAN_PATH=" + hostsPlans(t), "NCCLCHECK_DEVICE=emu"}
	for _, c := range []struct {
		name string
		env  []string
		log  string // what every rank's INFO log says
	}{
		{"fabric", []string{"MSCCLGO_TRANSPORT=fabric", "FI_PROVIDER=tcp"}, "port channels between processes over fabric, libfabric provider tcp"},
		{"auto", []string{"FI_PROVIDER=tcp"}, "port channels between processes over fabric, libfabric provider tcp"},
		{"auto-refused", []string{"MSCCLGO_TRANSPORT=auto", "FI_PROVIDER=mscclgo-no-such-provider"}, "port channels between processes over tcp (fabric refused: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := append(append([]string{}, base...), c.env...)
			for rank, r := range runHosts(t, env, "MSCCLGO_HOST", "steady") {
				checkHostsData(t, rank, r, 9)
				if want := fmt.Sprintf("rank %d of 4: %s", rank, c.log); !strings.Contains(r.stderr, want) {
					t.Errorf("rank %d: log lacks %q:\n%s", rank, want, r.stderr)
				}
			}
		})
	}
	// Refusals name what to change: the provider FI_PROVIDER narrowed
	// libfabric to, and the ranks whose MSCCLGO_TRANSPORT differs (issue
	// 44: "no provider offers RDM endpoints", and `rank 0 runs provider ""`).
	for _, c := range []struct {
		name string
		side func(s int) ([]string, []string)
		want string
	}{
		{"no-such-provider", func(s int) ([]string, []string) {
			return nil, []string{fmt.Sprintf("MSCCLGO_HOST=hostK%d", s), "MSCCLGO_TRANSPORT=fabric", "FI_PROVIDER=mscclgo-no-such-provider"}
		}, `FI_PROVIDER="mscclgo-no-such-provider" narrows libfabric to that provider`},
		{"transports-differ", func(s int) ([]string, []string) {
			return nil, []string{fmt.Sprintf("MSCCLGO_HOST=hostK%d", s), "FI_PROVIDER=tcp", "MSCCLGO_TRANSPORT=" + []string{"tcp", "fabric"}[s]}
		}, "MSCCLGO_TRANSPORT differs between ranks: rank "},
	} {
		t.Run(c.name, func(t *testing.T) {
			for rank, r := range runHostsWith(t, base, "steady", 1, c.side) {
				if got := r.results()[fmt.Sprintf("rank %d: ncclCommInitRank", rank)]; got == "0" || got == "" {
					t.Errorf("rank %d: ncclCommInitRank -> %q, want an error\n%s\n%s", rank, got, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stdout, c.want) {
					t.Errorf("rank %d: the refusal lacks %q:\n%s\n%s", rank, c.want, r.stdout, r.stderr)
				}
			}
		})
	}
	t.Run("bad-hello-timeout", func(t *testing.T) {
		env := append(append([]string{}, base...), "FI_PROVIDER=tcp", "MSCCLGO_FABRIC_HELLO_TIMEOUT=soon")
		for rank, r := range runHostsWith(t, env, "steady", 1, hostSide("MSCCLGO_HOST")) {
			if got := r.results()[fmt.Sprintf("rank %d: ncclCommInitRank", rank)]; got == "0" || got == "" {
				t.Errorf("rank %d: ncclCommInitRank -> %q, want an error\n%s\n%s", rank, got, r.stdout, r.stderr)
			}
			if want := fmt.Sprintf(`ncclCommInitRank: rank %d of 4: MSCCLGO_FABRIC_HELLO_TIMEOUT="soon": not a duration`, rank); !strings.Contains(r.stdout, want) {
				t.Errorf("rank %d: the refusal does not name MSCCLGO_FABRIC_HELLO_TIMEOUT and its value:\n%s\n%s", rank, r.stdout, r.stderr)
			}
		}
	})
}
