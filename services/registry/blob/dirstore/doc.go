// Package dirstore is the blob.Store on a local directory, the registry's
// embedded default for one machine.
//
// Layout under the root directory:
//
//	blobs/<algorithm>/<first two hex digits>/<hex>   committed blobs
//	uploads/<id>/data                                staged data of an upload
//
// where the algorithm is sha256 or sha512.
//
// An upload's offset is the size of its data file; every Write ends with
// fsync. Commit hashes the data file, renames it to the blob's path (atomic
// on one file system) and fsyncs the directory, then removes the upload's
// directory. A crash leaves a complete blob or none; an upload directory
// without data (a crash after the rename) is reported by Uploads and
// removed by Abort.
package dirstore
