// Package s3store is the blob.Store on an S3 bucket through minio-go.
//
// Keys under the bucket (after an optional prefix):
//
//	blobs/<algorithm>/<hex>          committed blobs (sha256 or sha512)
//	uploads/<id>/started             marker: the upload exists and is resumable
//	uploads/<id>/<n>                 chunk n (ten digits) of the staged data
//	uploads/<id>/assembled           chunks joined, during Commit only
//
// Every Write stores its data as one new chunk object, so a failed Write
// stages nothing and the offset is the sum of the chunk sizes. Commit reads
// the staged data back while hashing it (a single chunk is read directly;
// several are streamed into the assembled object), and only when the digest
// matches copies it server-side to the blob's key, conditional on the ETag
// that was hashed. It then deletes the started marker, ending the upload,
// and the remaining staging objects. A crash leaves a complete blob or none;
// staging objects left without a marker are listed by Uploads and removed by
// Abort.
//
// Open reads through minio-go, or, on a plain-HTTP endpoint without a proxy
// (the usual in-cluster MinIO), by "direct GETs": a GET of a presigned URL
// of the object over HTTP/1.1 connections the store keeps itself (at most
// Options.MaxDirectConns; past that, minio-go), whose body is an io.WriterTo
// that hands the *net.TCPConn, in an io.LimitedReader of the remaining
// Content-Length, to a writer's ReadFrom. A registry answering a blob GET on
// plain TCP so lets Linux splice the bytes from the S3 socket to the
// client's, never copying them through user space. The body fails with an
// error, and its connection is closed, when S3 sends less than its
// Content-Length, stalls for Options.DirectReadTimeout, or the context ends;
// only a body read to its end leaves its connection for reuse. Any failure
// before the body (a stale idle connection is retried once on a new one)
// falls back to minio-go, which reports the service's errors.
//
// Store also implements blob.Redirector with presigned GET URLs, signed by
// Options.PublicClient so that they name an endpoint the registry's clients
// can reach.
package s3store
