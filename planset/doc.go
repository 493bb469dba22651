// Package planset reads plan sets: directories of validated plans with an
// index, which `mscclgo install` (package planset/install) writes and
// `mscclgo select`, the NCCL library or any runtime reads to pick the plan
// for a collective call.
//
// Select (or SelectBy, with a cost model's predictions) picks the plan for
// a Request from one or more sets, read with ReadIndex or indexed on the
// fly with ScanDir; NewEntry describes a loaded plan. DefaultDir and
// SearchPath are the one rule for where plan sets live. The package
// imports the executor (to load plans) and nothing of the compiler, so
// that the library links only what it runs. The plan set is described in
// docs/design.md §11.
package planset
