// Package hdk is the ISV toolkit: building, validating, signing, sealing and
// pushing accelerator images (OCI artifacts holding partial bitstreams for one
// or both chips of a board). The hdk command lives in hdk/cmd/hdk.
package hdk
