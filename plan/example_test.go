package plan_test

import (
	"fmt"

	"github.com/mscclgo/mscclgo/plan"
)

func Example() {
	bt, _ := plan.ParseBufferType("s")
	op, ok := plan.ParseOpType("rres")
	fmt.Println(bt, bt.Name(), op, ok)
	_, ok = plan.ParseOpType(plan.GroupLoadReduceName)
	fmt.Println(plan.GroupLoadReduceName, ok)
	// Output:
	// s scratch rres true
	// glre false
}

func ExampleCollectives() {
	fmt.Println(plan.Collectives(), plan.AllToAllVCollective)
	// Output:
	// [allgather allreduce reducescatter alltoall sendrecv test] alltoallv
}
