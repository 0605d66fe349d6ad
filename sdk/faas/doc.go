// Package faas is the SDK's client of the node agent, faasd: it lists and
// clears slots, loads images into them and follows the loads' progress,
// prefetches images and reads the node cache. The wire contract is package
// sdk/agentapi; this package adds the transport, authentication and typed
// errors.
//
// # Targets
//
// Dial takes the agent's address:
//
//   - "" means $FAAS_AGENT, or agentapi.DefaultSocket when that is unset;
//   - "unix:///path", or a path starting with "/" or ".", is a unix socket;
//   - "https://host:port" is TCP with TLS (WithTLSConfig for a private CA or
//     a client certificate);
//   - "http://host:port" is refused unless host is a loopback address
//     (127.0.0.1, ::1, localhost): a bearer token must not cross a network
//     in clear text.
//
// Dial checks that the agent answers GET /healthz; when it does not, the
// error wraps ErrUnavailable and names the target ("faasd is not running at
// /run/faas/faasd.sock: …"). When ctx has no deadline, that check gives up
// after 10 seconds. Every other call is bounded only by its ctx: there is no
// client-wide timeout, which would cut a long event stream.
//
// # Authentication
//
// On the unix socket faasd knows the caller by its uid. Loads and pulls need
// a registry API token of the tenant (WithToken), sent as "Authorization:
// Bearer faas_…"; on TCP every call needs it. Dial reads no token from the
// environment or from files; AgentToken gives the default the faas command
// sends: $FAAS_TOKEN, else what `faas login` stored, else, in a Kubernetes
// container given devices, its allocation credential ($FAAS_ALLOCATION_TOKEN).
//
// # Errors
//
// A request that faasd refuses returns *Error, with the HTTP status and the
// agent's code, message and hint; a load or pull that fails returns the
// final agentapi.Load together with *Error built from Load.Error. Test the
// class of an error with errors.Is and the sentinels ErrNotFound,
// ErrPermission, ErrNotEntitled, ErrSignature, ErrIncompatible, ErrBusy,
// ErrCacheFull, ErrUnavailable and ErrProgram. Transport failures (faasd not
// running, the connection cut, an event stream that ends before the load
// finished) wrap ErrUnavailable as well. Hint returns what to do about an
// error, when the agent said.
//
// # Profiles
//
// Every job of a Device returns a Profile (Job.Profile): faasd's queue
// wait and engine time, the SDK's round trip, and the engine's counters
// with the busy and token-stall cycles of each queue. Device.Profile sums
// a session; KeepProfiles keeps the last jobs' profiles for
// WriteProfileLog, whose files `faas trace export` (package
// sdk/traceevent) turns into a Chrome trace.
//
// # Limits
//
// JSON answers and error bodies are read up to 4 MiB, event lines up to
// 1 MiB; larger ones are errors.
package faas
