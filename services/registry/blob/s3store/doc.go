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
// Store also implements blob.Redirector with presigned GET URLs, signed by
// Options.PublicClient so that they name an endpoint the registry's clients
// can reach.
package s3store
