// This file runs the bootstrap under a real mpirun (OpenMPI): four copies
// of the test binary find their ranks in OMPI_COMM_WORLD_* and each other
// through the rendezvous file, with no master address given. It is
// skipped, with a message, where mpirun is not installed (.ci/run installs
// Debian's openmpi-bin).
package bootstrap

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (apt-get install openmpi-bin): the run under a real MPI launcher is skipped")
	}
	const n = 4
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, "--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(n),
		"-x", childEnv+"=allgather", "-x", "MSCCLGO_RENDEZVOUS_DIR="+t.TempDir(), os.Args[0])
	// Only the launcher's variables may tell the children their ranks.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MSCCLGO_") && !strings.HasPrefix(kv, "RANK=") && !strings.HasPrefix(kv, "WORLD_SIZE=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("mpirun still running after %v:\n%s", hang, out)
	}
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	for r := 0; r < n; r++ {
		if !strings.Contains(string(out), fmt.Sprintf("rank %d: rank 0 pid ", r)) {
			t.Errorf("rank %d printed no allgather result:\n%s", r, out)
		}
	}
}
