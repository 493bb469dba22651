// Package diagnose names the most likely causes of a launch that went
// wrong, as typed values: a deadlock's causes from the plan's instance
// and the blocked thread blocks every backend reports in the same record
// (executor.BlockedTB: the CPU oracle, gpu-emu and the CUDA watchdog's
// dump), so that a wrong LL slot reads the same on every backend and no
// caller parses error text.
//
// Start with Deadlock: given the *executor.Instance that ran and the
// blocked thread blocks of an *executor.DeadlockError, it returns a
// Report whose Causes come likelier first (each a Cause of a Kind, the
// ops it names with their .star lines, the buffer place) and whose
// Blocked lines name every packet wait by its buffer and byte offset
// within the buffer (scratch[8192:12288]), never by a device address.
// Report.Write prints it cause first, cut to a number of lines.
//
// The wrong-data causes are Causes of the same type, built beside the CPU
// oracle from its movement log (executor/cpu's Prov.Causes) and ordered
// by Rank. GuardingWait finds the wait that a read before it should have
// come after (a wait moved after the reduce it guards), for the
// wrong-data report, which names its line.
//
// A race report's causes (an *executor.RaceError's pairs) come from
// Races: an access before the wait that would have ordered it, a buffer
// reused in the next launch with no handshake, or two ops that nothing
// orders, each naming both ops' .star lines and, across the launch
// boundary, the launch of each.
package diagnose
