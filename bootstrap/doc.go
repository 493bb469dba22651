// Package bootstrap is the rendezvous of a job run as one process per rank
// (mpirun -np 8, torchrun --nproc-per-node 8, or processes started by
// hand): it reads the job's shape from the environment (FromEnv),
// connects the ranks over TCP (Connect), and gives them what a runtime
// needs before its data plane exists: AllGather, Barrier, Send and Recv,
// the hosts of the ranks (Hosts), and a liveness service that tells every
// rank when another one dies (Lost, Context). It imports no package of
// mscclgo but internal/infile, which reads the rendezvous file.
//
//	w, ok, err := bootstrap.FromEnv(os.Getenv) // ok: a launcher started this process
//	...
//	b, err := bootstrap.Connect(ctx, w, bootstrap.Options{})
//	...
//	defer b.Close()
//	parts, err := b.AllGather(ctx, mine)
//
// # Connections
//
// Every rank listens on one TCP port. Rank 0's is the job's rendezvous:
// World.Master, or an ephemeral port published in World.RendezvousFile.
// Each other rank keeps one control link to rank 0, which carries the
// handshake, the collectives, heartbeats and loss notices; rank 0 thus
// holds a link to every rank. Point-to-point messages use data links: on
// its first Send to a peer a rank dials the peer's port, and all its
// messages to that peer go over that connection, in order (messages the
// other way use the connection the peer dials). The reverse direction of
// a data link carries only a goodbye or a refusal.
//
// # Set-up
//
// Rank 0 listens (and writes the rendezvous file). Each other rank dials
// it, retrying with backoff (20 ms doubling to 1 s) until Options.Timeout,
// opens its own listener on the interface that reached rank 0, and sends
// a hello: its rank, world size, local rank and local size, host name
// and listening address. Rank 0 checks each hello (world size equal to
// its own, rank in range, not twice); a failed check ends the set-up on
// rank 0 and is sent, as a fail frame, to the offending rank and to every
// rank already joined. Connections whose first bytes are not a hello are
// refused and logged (Options.Logf), and the set-up goes on. Once every
// rank has joined, rank 0 picks a random 64-bit session and sends every
// rank the rank table: the session, then per rank its local rank, local
// size, host and address. A data link starts with a peer hello (rank,
// world size, session); a peer refuses one from another session.
//
// # Frames
//
// Everything on every connection is a frame: a 24-byte header, big-endian,
// then the payload.
//
//	offset size  field
//	0      4     magic "MSGO"
//	4      1     version (1)
//	5      1     kind
//	6      2     reserved, 0
//	8      4     tag: Send's tag, or a collective's sequence number
//	12     4     arg: a rank (the owner of an allgather part, a lost rank)
//	16     8     payload length
//
// Kinds: 1 hello, 2 table, 3 peer hello, 4 fail (payload: a message),
// 5 gather (a contribution to an allgather), 6 gather part (one rank's
// contribution, from rank 0), 7 barrier, 8 release, 9 data (Send),
// 10 ping, 11 lost (arg: the rank, payload: how it was noticed), 12 bye.
// Handshake payloads: integers are 4 or 8 bytes, big-endian; a string is a
// 2-byte length and at most 1024 bytes. A reader refuses a frame with
// another magic, version, kind or non-zero reserved bytes (ErrBadFrame),
// and a payload longer than its limit before reading it
// (ErrFrameTooLarge): 64 KiB during the handshake, Options.MaxMessage
// after (default 1 GiB). A refused data link is answered with a fail
// frame, so the sender's next Send fails naming the refusal.
//
// # Collectives
//
// Collectives run through rank 0 and are numbered on each rank in call
// order. A rank sends its contribution (gather with its data, or barrier)
// tagged with the number; rank 0 waits for every rank's, checks they are
// the same collective with the same number, and answers with every other
// rank's data (gather parts) or a release. If ranks disagree, rank 0
// sends a fail frame to every rank. A rank whose context ends sends rank
// 0 a fail frame tagged with the collective's number and waits for the
// answer: the result, if rank 0 had completed the collective, else rank
// 0's fail frame, sent to every rank. Once a collective has failed, every
// later one fails everywhere.
//
// # Liveness
//
// Both ends of every control link send a ping every
// Options.HeartbeatInterval, and a control link silent for
// Options.HeartbeatTimeout is a lost peer, as is any link that ends
// without a goodbye: a killed process is seen at once, from its closed
// sockets. Rank 0 sends a lost frame to every other rank when it loses
// one, before its own operations learn of the loss (so that it cannot
// exit before telling them); a rank that loses rank 0 sees it itself. A
// loss is delivered once
// on Lost(), cancels Context() with a *PeerLostError, closes the links to
// the rank, and makes every operation that needs it fail with an error
// wrapping ErrPeerLost and naming it. Close sends a goodbye on every link
// and waits (Options.CloseTimeout) for the peer to close its side, so a
// clean shutdown is never reported as a loss; operations that need a
// closed rank fail with ErrPeerClosed.
package bootstrap
