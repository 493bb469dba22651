// This file holds World and FromEnv: a rank's place in the job as read
// from the variables a launcher (mpirun, mpiexec, torchrun) or the user
// sets, and the rendezvous rule for jobs that name no master address.

package bootstrap

import (
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// World is one rank's view of the job: who it is, how many ranks there
// are, and where rank 0 can be found.
type World struct {
	Rank int // this rank, 0 <= Rank < Size
	Size int // number of ranks (processes) in the job

	// LocalRank and LocalSize are this rank's index among the ranks of its
	// host and their number, as the launcher says. LocalSize 0 means the
	// launcher does not say (LocalRank is then ignored by Hosts).
	LocalRank int // index among the ranks of this host
	LocalSize int // ranks on this host; 0: unknown

	// Host names this rank's host in the rank table (MSCCLGO_HOST). Empty:
	// Options.Hostname, else os.Hostname().
	Host string

	// Master is rank 0's host:port. Rank 0 listens there, on the
	// address the host resolves to (not on every interface); the others
	// connect to it.
	Master string

	// RendezvousFile is used when Master is empty: rank 0 listens on an
	// ephemeral port and writes its address (one line, host:port) into
	// this file, atomically; the other ranks read it, retrying until it
	// appears. Rank 0 removes it once every rank has joined.
	RendezvousFile string

	// RendezvousHost is the address rank 0 listens on and advertises in
	// RendezvousFile: "127.0.0.1" when every rank is on this host; empty:
	// this host's first non-loopback IPv4 address (or 127.0.0.1 if it has
	// none).
	RendezvousHost string

	// Token is the job's secret when every rank is given it
	// (MSCCLGO_JOB_TOKEN, or the ncclUniqueId's): every connection to
	// rank 0 proves it, and rank 0 proves it back, by HMAC-SHA256 over
	// random challenges; the secret itself is never sent. A process
	// without it can neither join, nor abort the set-up, nor learn or
	// hand out the rank table.
	Token string

	// TokenFrom names where Token comes from, in messages (default
	// "World.Token").
	TokenFrom string

	// SecretFile, used when Token is empty, is where rank 0 publishes a
	// secret it makes for the job (created exclusively, mode 0600, then
	// renamed into place) and the other ranks read it. Its directory must
	// belong to this process's user and be writable by no one else; rank
	// 0 makes it (mode 0700) if missing and removes the file once every
	// rank has joined. Empty: RendezvousFile with ".key" appended. With
	// neither Token, SecretFile nor RendezvousFile, Connect refuses a
	// world of several ranks.
	SecretFile string

	// Launcher names the source of Rank and Size: "mscclgo", "Open MPI",
	// "MPICH/PMI" or "torchrun"; empty for a World built by hand.
	Launcher string
}

// The variables of mscclgo itself. Rank, sizes and local rank override
// the launcher's; the others have no launcher equivalent (but MASTER_ADDR
// and MASTER_PORT, which MSCCLGO_MASTER overrides).
const (
	EnvRank          = "MSCCLGO_RANK"           // this rank
	EnvWorldSize     = "MSCCLGO_WORLD_SIZE"     // number of ranks
	EnvLocalRank     = "MSCCLGO_LOCAL_RANK"     // this rank's index on its host
	EnvLocalSize     = "MSCCLGO_LOCAL_SIZE"     // number of ranks on its host
	EnvMaster        = "MSCCLGO_MASTER"         // rank 0's host:port
	EnvRendezvousDir = "MSCCLGO_RENDEZVOUS_DIR" // directory of the rendezvous file
	EnvJobID         = "MSCCLGO_JOB_ID"         // names the rendezvous file
	EnvHost          = "MSCCLGO_HOST"           // this rank's host in the rank table
	EnvJobToken      = "MSCCLGO_JOB_TOKEN"      // a secret every rank shares (else a secret file is)
)

// maxToken bounds the job token's length.
const maxToken = 1024

// MaxWorldSize bounds the ranks of a job: a plan has at most as many
// (the plan loader's cap), and the bootstrap allocates per rank.
const MaxWorldSize = 1 << 16

// launcherVars are the variables one launcher sets.
type launcherVars struct {
	name                             string
	rank, size, localRank, localSize string
}

// launchers lists the launchers FromEnv knows, in priority order.
func launchers() []launcherVars {
	return []launcherVars{
		{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
		{"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
		{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
	}
}

// jobIDVars are the variables that identify one launch of a job, in
// priority order; FromEnv hashes the first one set into the rendezvous
// file's name.
func jobIDVars() []string {
	return []string{
		EnvJobID,
		"PMIX_NAMESPACE",          // Open MPI 5 (PRRTE), MPICH with PMIx
		"OMPI_MCA_orte_hnp_uri",   // Open MPI 3 and 4: mpirun's URI, unique per launch
		"OMPI_MCA_ess_base_jobid", // Open MPI
		"OMPI_MCA_orte_ess_jobid", // older Open MPI
	}
}

// FromEnv reads this process's World from the environment through getenv
// (os.Getenv in a program, a map in tests). ok is false, with a zero World
// and no error, when no launcher variable is set: the process runs alone.
//
// Rank and size come from, in priority order: MSCCLGO_RANK and
// MSCCLGO_WORLD_SIZE (each overrides the launcher's value); Open MPI
// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE); MPICH, Intel MPI
// and other PMI launchers (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
// MPI_LOCALNRANKS); torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE). The first launcher with its rank or size variable set
// is the one used; the others are ignored. MSCCLGO_LOCAL_RANK and
// MSCCLGO_LOCAL_SIZE override the local values.
//
// Rendezvous: MSCCLGO_MASTER (host:port) if set, else MASTER_ADDR and
// MASTER_PORT (torchrun's, honoured under any launcher). Without either,
// the ranks meet through a file (World.RendezvousFile) in the rendezvous
// directory: MSCCLGO_RENDEZVOUS_DIR if set (a directory every host sees),
// else $TMPDIR/mscclgo-UID ($TMPDIR or os.TempDir(), UID this process's
// user id), which works only when every rank runs on this host, so
// FromEnv refuses it when the launcher's local size is smaller than the
// world size. The file's name is mscclgo-rdzv-HASH.addr, HASH a hash of
// the world size and of the first job identifier set among
// MSCCLGO_JOB_ID, PMIX_NAMESPACE, OMPI_MCA_orte_hnp_uri,
// OMPI_MCA_ess_base_jobid, OMPI_MCA_orte_ess_jobid and
// SLURM_JOB_ID.SLURM_STEP_ID; without any, of the parent process id (the
// launcher's daemon, shared by the ranks it started on this host), or,
// in MSCCLGO_RENDEZVOUS_DIR, of nothing (one job at a time per
// directory).
//
// Secret: MSCCLGO_JOB_TOKEN if set (World.Token). Else the job's secret
// is shared through World.SecretFile in the rendezvous directory:
// mscclgo-rdzv-HASH.key beside the address file, or, with a master
// address, mscclgo-key-HASH, HASH a hash of the master address (not of
// the world size, so that a rank told another size still meets rank 0
// and hears of the mismatch). A job with a master address whose ranks
// span several hosts needs MSCCLGO_JOB_TOKEN or MSCCLGO_RENDEZVOUS_DIR.
//
// Errors (*EnvError) name the variable and its value: not an integer,
// negative, a rank not below the size, a size without a rank or the
// reverse, a malformed address.
func FromEnv(getenv func(string) string) (World, bool, error) {
	get := func(name string) string {
		if name == "" {
			return ""
		}
		return strings.TrimSpace(getenv(name))
	}
	var l launcherVars
	found := false
	for _, c := range launchers() {
		if get(c.rank) != "" || get(c.size) != "" {
			l, found = c, true
			break
		}
	}
	ours := get(EnvRank) != "" || get(EnvWorldSize) != ""
	if !found && !ours {
		for _, name := range []string{EnvLocalRank, EnvLocalSize, EnvMaster, EnvRendezvousDir} {
			if v := get(name); v != "" {
				return World{}, false, &EnvError{name, v, fmt.Sprintf("is set but no rank is: set %s and %s, or run under mpirun or torchrun", EnvRank, EnvWorldSize)}
			}
		}
		return World{}, false, nil
	}
	w := World{Launcher: "mscclgo"}
	if found {
		w.Launcher = l.name
	}
	// pick returns the first of names that is set, with its value.
	pick := func(names ...string) (string, string) {
		for _, n := range names {
			if v := get(n); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	rankVar, rankVal := pick(EnvRank, l.rank)
	sizeVar, sizeVal := pick(EnvWorldSize, l.size)
	switch {
	case rankVar == "":
		want := EnvRank
		if found {
			want += " or " + l.rank
		}
		return World{}, false, &EnvError{sizeVar, sizeVal, "is set but the rank is not (" + want + ")"}
	case sizeVar == "":
		want := EnvWorldSize
		if found {
			want += " or " + l.size
		}
		return World{}, false, &EnvError{rankVar, rankVal, "is set but the world size is not (" + want + ")"}
	}
	var err error
	if w.Rank, err = envInt(rankVar, rankVal, 0); err != nil {
		return World{}, false, err
	}
	if w.Size, err = envInt(sizeVar, sizeVal, 1); err != nil {
		return World{}, false, err
	}
	if w.Size > MaxWorldSize {
		// Checked before anything is allocated per rank.
		return World{}, false, &EnvError{sizeVar, sizeVal, fmt.Sprintf("a job has at most %d ranks (as a plan has)", MaxWorldSize)}
	}
	if w.Rank >= w.Size {
		return World{}, false, &EnvError{rankVar, rankVal, fmt.Sprintf("the rank is not below the world size %s=%d", sizeVar, w.Size)}
	}
	if v, val := pick(EnvLocalSize, l.localSize); v != "" {
		if w.LocalSize, err = envInt(v, val, 1); err != nil {
			return World{}, false, err
		}
		if w.LocalSize > w.Size {
			return World{}, false, &EnvError{v, val, fmt.Sprintf("the local size is above the world size %s=%d", sizeVar, w.Size)}
		}
	}
	if v, val := pick(EnvLocalRank, l.localRank); v != "" {
		if w.LocalRank, err = envInt(v, val, 0); err != nil {
			return World{}, false, err
		}
		if w.LocalSize > 0 && w.LocalRank >= w.LocalSize {
			return World{}, false, &EnvError{v, val, fmt.Sprintf("the local rank is not below the local size %d", w.LocalSize)}
		}
		if w.LocalRank >= w.Size {
			return World{}, false, &EnvError{v, val, fmt.Sprintf("the local rank is not below the world size %s=%d", sizeVar, w.Size)}
		}
	}
	w.Host = get(EnvHost)
	w.Token = get(EnvJobToken)
	if len(w.Token) > maxToken {
		return World{}, false, &EnvError{EnvJobToken, "(hidden)", fmt.Sprintf("%d bytes: a token has at most %d", len(w.Token), maxToken)}
	}

	if w.Token != "" {
		w.TokenFrom = EnvJobToken
	}

	if m := get(EnvMaster); m != "" {
		if err := checkHostPort(EnvMaster, m); err != nil {
			return World{}, false, err
		}
		w.Master = m
	} else if addr, port := get("MASTER_ADDR"), get("MASTER_PORT"); addr != "" || port != "" {
		switch {
		case addr == "":
			return World{}, false, &EnvError{"MASTER_PORT", port, "is set but MASTER_ADDR is not"}
		case port == "":
			return World{}, false, &EnvError{"MASTER_ADDR", addr, "is set but MASTER_PORT is not"}
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return World{}, false, &EnvError{"MASTER_PORT", port, "not a port number (1-65535)"}
		}
		w.Master = net.JoinHostPort(addr, port)
	}
	if w.Size == 1 {
		return w, true, nil
	}

	// The rendezvous directory: the one given (every host sees it), else
	// this user's private directory in the temporary directory.
	dir := get(EnvRendezvousDir)
	shared := dir != ""
	if !shared {
		tmp := get("TMPDIR")
		if tmp == "" {
			tmp = os.TempDir()
		}
		dir = filepath.Join(tmp, fmt.Sprintf("mscclgo-%d", os.Geteuid()))
	}
	spansHosts := w.LocalSize > 0 && w.LocalSize < w.Size
	lsVar, lsVal := pick(EnvLocalSize, l.localSize)
	if w.Master != "" {
		if w.Token != "" {
			return w, true, nil
		}
		if spansHosts && !shared {
			return World{}, false, &EnvError{lsVar, lsVal, fmt.Sprintf(
				"the ranks span several hosts (world size %d) and share no job secret: set %s to one secret on every rank (say, the output of `openssl rand -hex 16`), or %s to a private directory every host shares",
				w.Size, EnvJobToken, EnvRendezvousDir)}
		}
		// Named after rank 0's address, which one job holds at a time,
		// and not after the world size: a rank told another size gets
		// the secret, joins and is told of the mismatch.
		h := fnv.New64a()
		fmt.Fprintf(h, "master=%s", w.Master)
		w.SecretFile = filepath.Join(dir, fmt.Sprintf("mscclgo-key-%016x", h.Sum64()))
		return w, true, nil
	}

	if !shared && spansHosts {
		return World{}, false, &EnvError{lsVar, lsVal, fmt.Sprintf(
			"the ranks span several hosts (world size %d) and no rendezvous is given: set %s=host:port (or MASTER_ADDR and MASTER_PORT) to rank 0's address, or %s to a directory every host shares",
			w.Size, EnvMaster, EnvRendezvousDir)}
	}
	key := ""
	for _, v := range jobIDVars() {
		if val := get(v); val != "" {
			key = v + "=" + val
			break
		}
	}
	if key == "" {
		if job := get("SLURM_JOB_ID"); job != "" {
			key = "SLURM=" + job + "." + get("SLURM_STEP_ID")
		}
	}
	if key == "" && !shared {
		key = "ppid=" + strconv.Itoa(os.Getppid())
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/size=%d", key, w.Size)
	w.RendezvousFile = filepath.Join(dir, fmt.Sprintf("mscclgo-rdzv-%016x.addr", h.Sum64()))
	if w.Token == "" {
		// A rank told another size waits for another address file:
		// the secret's name may carry the size too.
		w.SecretFile = filepath.Join(dir, fmt.Sprintf("mscclgo-rdzv-%016x.key", h.Sum64()))
	}
	if !shared || w.LocalSize == w.Size {
		w.RendezvousHost = "127.0.0.1"
	}
	return w, true, nil
}

// envInt parses the integer value of a variable, at least min.
func envInt(name, val string, min int) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil {
		return 0, &EnvError{name, val, "not an integer"}
	}
	if n < min {
		if min == 0 {
			return 0, &EnvError{name, val, "negative"}
		}
		return 0, &EnvError{name, val, fmt.Sprintf("must be at least %d", min)}
	}
	return n, nil
}

// checkHostPort checks that val is host:port with a host and a port
// number.
func checkHostPort(name, val string) error {
	host, port, err := net.SplitHostPort(val)
	if err != nil || host == "" {
		return &EnvError{name, val, "want host:port"}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return &EnvError{name, val, "want host:port with a port number (1-65535)"}
	}
	return nil
}

// check reports what Connect cannot accept in a World.
func (w World) check(haveListener bool) error {
	switch {
	case w.Size < 1:
		return fmt.Errorf("world size %d: must be at least 1", w.Size)
	case w.Size > MaxWorldSize:
		return fmt.Errorf("world size %d: a job has at most %d ranks", w.Size, MaxWorldSize)
	case w.Rank < 0 || w.Rank >= w.Size:
		return fmt.Errorf("rank %d is outside the world of %d ranks", w.Rank, w.Size)
	case w.LocalSize < 0 || (w.LocalSize > 0 && (w.LocalRank < 0 || w.LocalRank >= w.LocalSize)):
		return fmt.Errorf("local rank %d of local size %d", w.LocalRank, w.LocalSize)
	case w.Size > 1 && w.Master == "" && w.RendezvousFile == "" && !(w.Rank == 0 && haveListener):
		return fmt.Errorf("no rendezvous: World.Master and World.RendezvousFile are both empty")
	}
	return nil
}
