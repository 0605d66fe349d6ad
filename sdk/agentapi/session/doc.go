// Package session is the wire contract of a tenant session with faasd: the
// binary frames both ends speak after upgrading an HTTP connection, and the
// shared-memory control block and rings of the local path. The SDK's client
// (package sdk/faas) and the agent (services/agent/server) build on it.
//
// # Opening a session
//
// The client sends
//
//	POST /v1/slots/{n}/session HTTP/1.1
//	Connection: Upgrade
//	Upgrade: faas-session/1
//
// authenticated as every other request of the agent's API. The agent checks
// that the caller may use the slot and that an AliDNN engine is loaded, and
// answers "101 Switching Protocols" (or an ordinary JSON error). From then
// on both ends speak frames (Frame): a 16-byte header — payload length,
// op, flags, request id — and a payload of at most MaxPayload bytes.
//
// The client's first frame is OpHello (Hello). The agent answers OpReply
// with Setup. On the unix socket the client may ask for shared memory
// (HelloShm); the agent then attaches a sealed memfd to the reply
// (FlagFD, SCM_RIGHTS) holding the control block: the submission and
// completion rings (see Control). On TCP no descriptors travel and the
// session runs on frames alone.
//
// # Requests
//
// Requests carry a client-chosen request id; the agent answers each with
// OpReply or OpError (ErrorPayload: an agentapi code and a message) and the
// same id, in any order. Jobs are the exception: OpSubmit (or an entry of
// the submission ring) has no reply, its outcome comes as a Completion
// (OpCompletion frame, or an entry of the completion ring) carrying the
// job id the client chose. A submission the agent refuses (a forged
// program handle, too many jobs in flight) completes with an error.
//
// On the local path every OpAlloc reply carries a second memfd, the
// buffer's staging memory, and OpSync moves bytes between it and device
// memory: no payload bytes travel on the socket. On the remote path OpWrite
// and OpRead carry the bytes, at most MaxData per frame; larger transfers
// are split by the client.
//
// # Doorbells
//
// The rings are single-producer, single-consumer, with the indices in the
// control block. A consumer that finds its ring empty spins for a short
// while and then sets its ring's sleep flag, checks the ring once more and
// blocks on the socket; a producer that publishes an entry and finds the
// flag set clears it and sends one OpDoorbell frame. Since flag and index
// are both sequentially consistent atomics, either the consumer's second
// look finds the entry or the producer finds the flag: no wakeup is lost.
// While a consumer is busy, no system call is made per job.
//
// # Limits
//
// A frame's payload is at most MaxPayload bytes (MaxData of data plus the
// request's fields); a program at most MaxInsns instructions; a buffer and
// every offset into it at most MaxBuffer. The agent offers DefaultEntries
// ring entries, which also bound the jobs a client keeps in flight. The
// agent waits 10 seconds for the hello, reads at most two requests ahead of
// the one it carries out, and keeps at most 4096 buffers with staging
// memory per session (every one is a mapping in the agent).
//
// # Trust
//
// Every frame and everything in the shared mapping is input from the other
// process. Decoders check lengths and reject unknown ops and flags; the
// agent keeps its own copies of the indices it owns, reads the client's
// only to bound its work, and closes the session when they are
// inconsistent. Memfds are sealed against shrinking, so neither side can
// make the other's accesses fault.
package session
