package plan

// AllToAllVCollective is the plan "collective" of variable-size
// all-to-all plans, an mscclgo extension (docs/executor.md §14): their
// per-call counts come at launch time, and the plan carries an
// "alltoallv" object that says how chunks map to blocks.
const AllToAllVCollective = "alltoallv"

// AllToAllVVersion is the version of the "alltoallv" extension object
// that emit writes and the executor reads.
const AllToAllVVersion = 1
