// Package blobtest is the conformance suite every blob.Store implementation
// must pass: call [Run] from the implementation's tests.
package blobtest
