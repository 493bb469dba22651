package cli

// settings.go: the run-time settings (runconfig.Settings) the command's
// flags make; the backends' configurations and the transport are made
// from them (backends.go, runmp.go).

import (
	"github.com/mscclgo/mscclgo/executor/fabric"
	"github.com/mscclgo/mscclgo/runconfig"
	"github.com/urfave/cli/v2"
)

// oneProcess are the settings of a run in this process: --threads (a
// command without the flag: the default).
func oneProcess(c *cli.Context) runconfig.Settings {
	return runconfig.Settings{Threads: c.Int("threads")}
}

// launched are the settings of a rank of a launched run: --threads,
// --join-timeout (each step of a rank session's set-up and of the
// transport's), --transport and --fabric-hello-timeout.
func launched(c *cli.Context) runconfig.Settings {
	s := oneProcess(c)
	s.Transport = fabric.Transport(c.String("transport"))
	s.SetupTimeout = c.Duration("join-timeout")
	s.HelloTimeout, s.HelloBound = c.Duration("fabric-hello-timeout"), "--fabric-hello-timeout"
	return s
}
