// Package fabric carries the port-channel traffic of a job of one process
// per rank over libfabric (InfiniBand verbs, EFA, Slingshot; tcp and shm
// on any machine) instead of the bootstrap's TCP connections.
//
// A Wire is opened once per process, on every rank at once, after the
// bootstrap connected: each rank opens an RDM endpoint of the provider
// libfabric picks (FI_PROVIDER narrows it; Options.Provider names one),
// registers a receive region (one ring per peer) and a send region, and
// the ranks all-gather their endpoint names, keys and region addresses
// over the bootstrap, once. A port message is one RMA write with remote
// CQ data (fi_writedata) of a record (its session tag, sequence number,
// header and payload) into the sender's ring at the receiver; the CQ data
// names the sender and the record's place, so the receiver's progress
// loop finds it without a receive posted. Credits flow back as writes
// with CQ data only. Large payloads go as several records. Where the
// provider keeps writes in order and needs no local registration, a
// receiver may register its own memory (RegisterPlace) and a sender
// write a payload straight into it ahead of the message that announces
// it (SendPortAt): no record, no copy at the receiver.
//
// A Wire is also a rankwire.Net (the bootstrap's, for everything but port
// traffic) and a rankwire.PortWire: a World whose Net is a Wire sends its
// sessions' port traffic through it, whichever backend runs them. One
// progress goroutine per Wire serves every session of the process.
//
// libfabric is loaded at run time (dlopen "libfabric.so.1") by a C shim
// that declares the part of libfabric's ABI it uses: building needs no
// libfabric, and Open refuses by name where it is missing. Without cgo,
// Open always refuses.
package fabric
