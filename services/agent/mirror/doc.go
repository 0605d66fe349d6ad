// Package mirror routes the node agent's blob pulls through registry mirrors:
// a pull-through cache or the local daemon of a peer-to-peer engine such as
// Dragonfly's dfdaemon, the way containerd's hosts.toml mirrors do.
//
// Transport is an http.RoundTripper meant to sit under go-containerregistry's
// authenticating transport (the loader's Config.Transport). Only GETs of a
// blob by digest on the registry's host, /v2/<repo>/blobs/<alg>:<hex>, go to
// the mirrors, tried in order, as <mirror>/v2/<repo>/blobs/<digest>?ns=<host>
// (containerd's ns parameter names the upstream registry). Manifests, tags,
// token requests, uploads and every other request go to the registry itself:
// a mirror never resolves a tag, so it never decides which image a node
// loads.
//
// A mirror is not trusted with content. A blob named by digest can only be
// one sequence of bytes, and every consumer checks it: the node cache hashes
// layers as it writes them and keeps nothing that does not match
// (cache.ErrDigestMismatch, which fails the load before any chip is
// touched), and go-containerregistry checks configs and signature blobs. So
// the transport does not hash again; it falls back to the registry when a
// mirror cannot be reached, takes longer than Config.Timeout to answer, or
// answers anything but 200 (206 to a range request), and names the mirror in
// a log line and the metrics for every blob it served, so that a digest
// error can be traced to it.
//
// # What a mirror sees
//
// A mirror sees the repository and digest of each blob, the registry's host,
// and the request's Authorization header if, and only if, it is a bearer
// token: the short-lived (five minutes by default), pull-scoped token the
// registry issued for that one repository to the tenant's load. That is what
// a pull-through mirror or dfdaemon needs to fetch the blob from the registry
// on a miss, and it grants nothing the mirror could not get from the blob
// itself once cached. The tenant's long-lived API token is sent only to the
// registry's token endpoint, which this transport never mirrors; a request
// carrying any other kind of credentials (basic authentication, when a
// registry does not issue tokens) skips the mirrors. The node's own
// credentials travel on the registry client, not on this transport. When a
// mirror redirects to another host, the token is not sent there.
//
// Sealed layers stay confidential through a mirror: their data keys are
// released only to the node, per load grant. But a mirror, or a peer of a
// P2P engine, may serve a cached blob to anyone who names its digest, without
// asking the registry whether they may pull it. Deploy mirrors only where
// that is acceptable, and reach them over loopback, the node's own network
// namespace or TLS, since the token crosses the link.
package mirror
