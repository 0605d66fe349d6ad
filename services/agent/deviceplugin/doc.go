// Package deviceplugin is faasd's Kubernetes device plugin (kubelet device
// plugin API v1beta1): it advertises the host's chips to the kubelet as
// extended resources and hands each container the kubelet gives devices
// to what it needs to use them through faasd, and nothing more. It runs
// inside faasd (faasd serve --device-plugin), so one process owns the
// boards.
//
// # Resources
//
//   - faas.dev/chip: one whole chip, one slot per device ("slot-3").
//   - faas.dev/board: both chips of one board per device ("board-1" is
//     slots 2 and 3), for two-chip images.
//   - faas.dev/alidnn-share: one tenant window on a chip holding a loaded
//     AliDNN engine, cGPU-style; Config.SharesPerChip devices per chip
//     ("slot-3-share-0" … "slot-3-share-3").
//
// Each resource has its own gRPC server on a socket in the kubelet's
// plugin directory ("faasd-chip.sock" …) and registers with the kubelet's
// Registration service on kubelet.sock.
//
// # One chip, three resources
//
// The three resources are views of the same chips, so the plugin keeps the
// allocations of all three in one inventory and follows the rule the
// NVIDIA and Intel plugins follow for overlapping devices: a device the
// kubelet must not hand out is reported Unhealthy, which is the only way
// ListAndWatch can take capacity away.
//
//   - A chip allocated whole (chip or board) makes the board device over it
//     (or the chip devices under it) and all its share devices Unhealthy.
//   - A chip with one share allocated makes its chip device and its board's
//     device Unhealthy; its other shares stay Healthy.
//   - Share devices are Healthy only while their chip holds a loaded AliDNN
//     engine: a share is a window of an engine, not of an empty chip —
//     unless the plugin loads engines on demand (below), when the shares
//     of empty chips are Healthy too.
//
// The kubelet may still act on a list it has not yet replaced, so Allocate
// checks again: the first allocation of a chip wins and a conflicting one
// fails (the kubelet then rejects the pod, which its controller retries).
// A device the kubelet allocates again under the same resource supersedes
// the earlier allocation of it, whose credential is revoked: the kubelet
// hands a device on only after the container holding it has ended.
//
// The kubelet never says when a container ends, so allocations are
// released by reading the kubelet's PodResources API (Config.PodResources):
// an allocation none of whose devices any pod holds any more, and older than
// Config.ReleaseGrace (the kubelet records an allocation only after
// Allocate returns), is released, and the other resources over its chips
// turn Healthy again. The same list, read at start, adopts the devices of
// pods that outlived a restart of faasd, so a restart does not free chips
// that are in use. Without the PodResources socket allocations end only
// when the kubelet reallocates the same device.
//
// # Health
//
// A chip is Unhealthy while its slot is failed (a self-test or a clear
// failed on it), its inter-chip link is down, it is at or above its
// temperature limit, or its board does not answer (removed). The plugin
// polls the slot table and the chips' sensors every Config.Poll, so a
// change reaches ListAndWatch within a poll. When the link is back, or the
// temperature has fallen Config.CoolDown below the limit, the plugin
// acknowledges the shell's latched alarm (which recouples a role decoupled
// by over-temperature) and the chip turns Healthy again. A board device is
// Healthy when both its chips are.
//
// # Allocate
//
// A container gets a read-only mount of the directory of faasd's pod
// socket (server.Config.PodSocket) at /run/faasd, FAAS_AGENT naming the
// socket there, FAAS_SLOTS listing its slots ("2,3"), and
// FAAS_ALLOCATION_TOKEN, a credential of the agent (server.Grants) that
// opens sessions on those slots only: on whole slots as the tenant that
// loaded them, on shares one window per share. The directory, not the
// socket, is mounted so that the container keeps reaching faasd after
// faasd restarts and makes a new socket. CDI device names
// ("faas.dev/chip=slot-3") come too, with a CDI spec written to
// Config.CDIDir, for runtimes that resolve devices through CDI; faasd's
// chips are reached through its socket, so the specs add no device nodes.
//
// # Engines on demand
//
// With Config.Engines (faasd --share-image) a fresh node runs share pods at
// once: the kubelet may allocate the shares of an empty chip, Allocate
// starts loading the AliDNN engine onto it, and PreStartContainer, which
// the kubelet then calls before the container starts, waits for the load
// (the kubelet gives up after 30 s and asks again; the load runs on). A
// failed load fails PreStartContainer with its reason, which `kubectl
// describe pod` shows; the kubelet's next try loads again. An engine so
// loaded is cleared after Config.EngineIdle without a share allocated, and
// before the container of a pod allocated its chip whole starts: that pod
// would otherwise act as the account that loaded the engine.
//
// # Restarts
//
// The plugin watches its sockets and kubelet.sock: when the kubelet
// restarts (it wipes the plugin directory and makes a new kubelet.sock) or
// a socket vanishes, the plugin serves on fresh sockets and registers
// again. Credentials live in faasd's memory: after faasd restarts, pods
// must be restarted to get new ones (their devices stay theirs).
package deviceplugin
