// This file tests FromEnv: every launcher, the overrides, the rendezvous
// rule and every refusal.

package bootstrap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromEnv(t *testing.T) {
	tmp := "/scratch/tmp"
	priv := filepath.Join(tmp, fmt.Sprintf("mscclgo-%d", os.Geteuid()))            // this user's rendezvous directory
	osPriv := filepath.Join(os.TempDir(), fmt.Sprintf("mscclgo-%d", os.Geteuid())) // likewise, without TMPDIR
	ompi := map[string]string{
		"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
		"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "8",
		"TMPDIR": tmp,
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    World // RendezvousFile is checked by prefix only
		ok      bool
		wantErr string // substring; the EnvError must name the variable
	}{
		{name: "nothing", env: map[string]string{"PATH": "/bin"}},
		{name: "stray torchrun-like names are not a launcher", env: map[string]string{"LOCAL_RANK": "1", "MASTER_ADDR": "x"}},
		{
			name: "open mpi, single host, rendezvous file",
			env:  ompi, ok: true,
			want: World{Rank: 3, Size: 8, LocalRank: 3, LocalSize: 8, RendezvousFile: priv, SecretFile: priv, RendezvousHost: "127.0.0.1", Launcher: "Open MPI"},
		},
		{
			name: "open mpi with MASTER_ADDR/MASTER_PORT",
			env:  with(ompi, "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500"), ok: true,
			want: World{Rank: 3, Size: 8, LocalRank: 3, LocalSize: 8, Master: "10.0.0.1:29500", SecretFile: priv, Launcher: "Open MPI"},
		},
		{
			name: "MSCCLGO overrides",
			env: with(ompi, "MSCCLGO_RANK", "5", "MSCCLGO_WORLD_SIZE", "16", "MSCCLGO_LOCAL_RANK", "1",
				"MSCCLGO_MASTER", "node1:7000", "MASTER_ADDR", "ignored", "MASTER_PORT", "1", "MSCCLGO_HOST", "box", "MSCCLGO_JOB_TOKEN", "s3cret"),
			ok:   true,
			want: World{Rank: 5, Size: 16, LocalRank: 1, LocalSize: 8, Host: "box", Master: "node1:7000", Token: "s3cret", TokenFrom: "MSCCLGO_JOB_TOKEN", Launcher: "Open MPI"},
		},
		{
			name: "mscclgo variables alone",
			env:  map[string]string{"MSCCLGO_RANK": "1", "MSCCLGO_WORLD_SIZE": "2", "MSCCLGO_MASTER": "[::1]:29500"},
			ok:   true,
			want: World{Rank: 1, Size: 2, Master: "[::1]:29500", SecretFile: osPriv, Launcher: "mscclgo"},
		},
		{
			name: "mpich/pmi",
			env:  map[string]string{"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "4", "TMPDIR": tmp},
			ok:   true,
			want: World{Rank: 0, Size: 4, LocalRank: 0, LocalSize: 4, RendezvousFile: priv, SecretFile: priv, RendezvousHost: "127.0.0.1", Launcher: "MPICH/PMI"},
		},
		{
			name: "pmi without local variables",
			env:  map[string]string{"PMI_RANK": "2", "PMI_SIZE": "4", "TMPDIR": tmp},
			ok:   true,
			want: World{Rank: 2, Size: 4, RendezvousFile: priv, SecretFile: priv, RendezvousHost: "127.0.0.1", Launcher: "MPICH/PMI"},
		},
		{
			name: "torchrun",
			env: map[string]string{"RANK": "7", "WORLD_SIZE": "16", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "4",
				"MASTER_ADDR": "master.example", "MASTER_PORT": "29500", "MSCCLGO_JOB_TOKEN": "t"},
			ok:   true,
			want: World{Rank: 7, Size: 16, LocalRank: 3, LocalSize: 4, Master: "master.example:29500", Token: "t", TokenFrom: "MSCCLGO_JOB_TOKEN", Launcher: "torchrun"},
		},
		{
			name: "torchrun on one host: the secret in a file",
			env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
				"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TMPDIR": tmp},
			ok:   true,
			want: World{Rank: 1, Size: 4, LocalRank: 1, LocalSize: 4, Master: "127.0.0.1:29500", SecretFile: priv, Launcher: "torchrun"},
		},
		{
			name: "torchrun across hosts in a shared directory",
			env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
				"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "MSCCLGO_RENDEZVOUS_DIR": "/shared/rdzv"},
			ok:   true,
			want: World{Rank: 1, Size: 4, LocalRank: 1, LocalSize: 2, Master: "node0:29500", SecretFile: "/shared/rdzv", Launcher: "torchrun"},
		},
		{
			name: "open mpi wins over torchrun variables",
			env:  with(ompi, "RANK", "0", "WORLD_SIZE", "2"),
			ok:   true,
			want: World{Rank: 3, Size: 8, LocalRank: 3, LocalSize: 8, RendezvousFile: priv, SecretFile: priv, RendezvousHost: "127.0.0.1", Launcher: "Open MPI"},
		},
		{
			name: "shared rendezvous directory across hosts",
			env:  with(ompi, "OMPI_COMM_WORLD_LOCAL_SIZE", "4", "MSCCLGO_RENDEZVOUS_DIR", "/shared/rdzv"),
			ok:   true,
			want: World{Rank: 3, Size: 8, LocalRank: 3, LocalSize: 4, RendezvousFile: "/shared/rdzv", SecretFile: "/shared/rdzv", Launcher: "Open MPI"},
		},
		{
			name: "world of one needs no rendezvous",
			env:  map[string]string{"MSCCLGO_RANK": "0", "MSCCLGO_WORLD_SIZE": "1"},
			ok:   true,
			want: World{Rank: 0, Size: 1, Launcher: "mscclgo"},
		},
		{name: "non-integer rank", env: with(ompi, "OMPI_COMM_WORLD_RANK", "three"), wantErr: `OMPI_COMM_WORLD_RANK="three": not an integer`},
		{name: "negative rank", env: with(ompi, "MSCCLGO_RANK", "-1"), wantErr: `MSCCLGO_RANK="-1": negative`},
		{name: "zero size", env: map[string]string{"PMI_RANK": "0", "PMI_SIZE": "0"}, wantErr: `PMI_SIZE="0": must be at least 1`},
		{name: "rank not below size", env: map[string]string{"RANK": "4", "WORLD_SIZE": "4"}, wantErr: `RANK="4": the rank is not below the world size WORLD_SIZE=4`},
		{name: "override pushes rank out", env: with(ompi, "MSCCLGO_WORLD_SIZE", "2"), wantErr: `OMPI_COMM_WORLD_RANK="3": the rank is not below the world size MSCCLGO_WORLD_SIZE=2`},
		{name: "size without rank", env: map[string]string{"OMPI_COMM_WORLD_SIZE": "4"}, wantErr: `OMPI_COMM_WORLD_SIZE="4": is set but the rank is not (MSCCLGO_RANK or OMPI_COMM_WORLD_RANK)`},
		{name: "rank without size", env: map[string]string{"MSCCLGO_RANK": "1"}, wantErr: `MSCCLGO_RANK="1": is set but the world size is not (MSCCLGO_WORLD_SIZE)`},
		{name: "local rank not below local size", env: with(ompi, "OMPI_COMM_WORLD_LOCAL_RANK", "8"), wantErr: `OMPI_COMM_WORLD_LOCAL_RANK="8": the local rank is not below the local size 8`},
		{name: "local size above size", env: with(ompi, "OMPI_COMM_WORLD_LOCAL_SIZE", "9"), wantErr: `OMPI_COMM_WORLD_LOCAL_SIZE="9": the local size is above the world size`},
		{name: "bad master", env: with(ompi, "MSCCLGO_MASTER", "node1"), wantErr: `MSCCLGO_MASTER="node1": want host:port`},
		{name: "bad master port", env: with(ompi, "MSCCLGO_MASTER", "node1:http"), wantErr: `MSCCLGO_MASTER="node1:http": want host:port with a port number`},
		{name: "MASTER_ADDR without port", env: with(ompi, "MASTER_ADDR", "10.0.0.1"), wantErr: `MASTER_ADDR="10.0.0.1": is set but MASTER_PORT is not`},
		{name: "MASTER_PORT out of range", env: with(ompi, "MASTER_ADDR", "h", "MASTER_PORT", "70000"), wantErr: `MASTER_PORT="70000": not a port number`},
		{name: "several hosts without rendezvous", env: with(ompi, "OMPI_COMM_WORLD_LOCAL_SIZE", "4"), wantErr: `OMPI_COMM_WORLD_LOCAL_SIZE="4": the ranks span several hosts (world size 8)`},
		{name: "torchrun across hosts without a secret", env: map[string]string{"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"},
			wantErr: `LOCAL_WORLD_SIZE="2": the ranks span several hosts (world size 4) and share no job secret: set MSCCLGO_JOB_TOKEN`},
		{name: "mscclgo variable without rank", env: map[string]string{"MSCCLGO_MASTER": "h:1"}, wantErr: `MSCCLGO_MASTER="h:1": is set but no rank is`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := FromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				var ee *EnvError
				if err == nil || !errors.As(err, &ee) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromEnv: got (%+v, %v, %v), want an *EnvError containing %q", got, ok, err, tc.wantErr)
				}
				if !strings.Contains(tc.wantErr, ee.Var+"=") {
					t.Errorf("EnvError names %s, want the variable of %q", ee.Var, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("FromEnv: got (%+v, %v, %v), want ok=%v and no error", got, ok, err, tc.ok)
			}
			if tc.want.RendezvousFile != "" {
				if !strings.HasPrefix(got.RendezvousFile, tc.want.RendezvousFile+string(filepath.Separator)+"mscclgo-rdzv-") ||
					!strings.HasSuffix(got.RendezvousFile, ".addr") {
					t.Errorf("RendezvousFile %q, want mscclgo-rdzv-*.addr in %s", got.RendezvousFile, tc.want.RendezvousFile)
				}
				got.RendezvousFile = tc.want.RendezvousFile
			}
			if tc.want.SecretFile != "" {
				if !strings.HasPrefix(got.SecretFile, tc.want.SecretFile+string(filepath.Separator)+"mscclgo-") {
					t.Errorf("SecretFile %q, want mscclgo-* in %s", got.SecretFile, tc.want.SecretFile)
				}
				got.SecretFile = tc.want.SecretFile
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRendezvousFileName checks that the file name depends on the job
// identifier (and on the world size), so that two jobs on one host do
// not meet.
func TestRendezvousFileName(t *testing.T) {
	file := func(kv ...string) string {
		env := map[string]string{"PMI_RANK": "0", "PMI_SIZE": "4", "TMPDIR": "/t"}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		w, _, err := FromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return w.RendezvousFile
	}
	a := file("PMIX_NAMESPACE", "prterun-host-100@1")
	if b := file("PMIX_NAMESPACE", "prterun-host-100@1"); a != b {
		t.Errorf("same job, different files: %s, %s", a, b)
	}
	for _, other := range [][]string{
		{"PMIX_NAMESPACE", "prterun-host-101@1"},
		{"PMIX_NAMESPACE", "prterun-host-100@1", "PMI_SIZE", "2"},
		{"OMPI_MCA_orte_hnp_uri", "123.0;tcp://10.0.0.1:1000"},
		{"SLURM_JOB_ID", "77", "SLURM_STEP_ID", "0"},
		{"MSCCLGO_JOB_ID", "x"},
	} {
		if b := file(other...); b == a {
			t.Errorf("%v: same file as another job: %s", other, b)
		}
	}
	// Without a job identifier the parent process (the launcher's
	// daemon) keys the file.
	if got, want := file(), file("PMIX_NAMESPACE", ""); got != want {
		t.Errorf("no job id: %s then %s", got, want)
	}
}
