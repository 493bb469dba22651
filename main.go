// Command mscclgo compiles collective-communication algorithms written in
// Starlark into MSCCL++ execution plans, and checks, runs, models, draws,
// installs and selects plans.
//
//	mscclgo eval algo.star -o plan.json
//
// See docs/cli.md for every command.
package main

import (
	"os"

	"github.com/mscclgo/mscclgo/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}
