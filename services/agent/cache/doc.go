// Package cache is the node agent's content-addressed blob cache: the OCI
// manifests, configs and layers of accelerator images, kept on local disk
// under a size limit so that programming a board never waits on the registry
// for an image the node already has.
//
// Blobs are named by digest ("sha256:<64 lowercase hex>"); nothing else is
// accepted, which also keeps digests from naming paths outside the cache.
// On disk:
//
//	dir/blobs/sha256/<hex>   complete, verified blobs; the mtime is the last use
//	dir/tmp/                 downloads in progress
//
// A blob enters blobs/ only by rename, after its bytes were hashed while
// written, matched the digest and size, and were fsynced. So a file under
// blobs/ is trusted at Open without hashing it again (re-hashing gigabytes at
// every agent start is too slow), and a crash leaves at most a file in tmp/,
// which Open deletes. Partial downloads are never visible.
//
// The cache evicts least-recently-used blobs to make room for new ones. Open
// and Fetch pin a blob until its *Blob is closed; pinned blobs are never
// evicted or removed. When a blob cannot fit (it is larger than the limit, or
// everything else is pinned) or the filesystem reports ENOSPC, the error wraps
// ErrFull and the cache is left as it was before the download began, minus any
// blobs already evicted for it.
//
// Concurrent Fetches of one digest share one download. Every error wraps one
// of the sentinels below or the cause (context errors, the fetcher's error,
// *fs.PathError), checked with errors.Is.
package cache
