package plan

// The values of a plan's "collective" that MSCCL++'s DSL writes: one per
// collective of the DSL (AllGather, AllReduce, ReduceScatter, AllToAll,
// SendRecv), and "test" for TestCollective, the plans of MSCCL++'s unit
// tests, which have no defined result. AllToAllVCollective is mscclgo's
// extension.
const (
	AllGatherCollective     = "allgather"
	AllReduceCollective     = "allreduce"
	ReduceScatterCollective = "reducescatter"
	AllToAllCollective      = "alltoall"
	SendRecvCollective      = "sendrecv"
	TestCollective          = "test"
)

// Collectives returns the values of a plan's "collective" that the
// MSCCL++ DSL writes, in the order error messages list them; the executor
// accepts these and AllToAllVCollective.
func Collectives() []string {
	return []string{AllGatherCollective, AllReduceCollective, ReduceScatterCollective, AllToAllCollective, SendRecvCollective, TestCollective}
}
