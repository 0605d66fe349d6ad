package onnxtest

// refusals lists the ONNX node tests of testdata/onnx/node (onnx v1.22.0)
// that the compiler refuses, each with a part of the error it gives, which
// a run with Options.KnownRefusals requires (see refused.go). A test that
// starts to pass fails that run until its entry goes, so the list shrinks
// as the compiler learns.
//
// It is empty: every node test of the test data passes. The element types
// the engine's fp32 and int8 data path lacks are converted at the boundary
// or computed exactly on its int32 lanes (see sdk/alidnn's boundary.go:
// UINT32 as bit patterns, UINT64 and INT64 powers as two 32-bit words in
// wide.go, STRING as interned ids in intern.go, DOUBLE through a Cast), and
// integer arithmetic that fp32 would round runs where it is exact
// (intarith.go, intpath.go, intdiv.go, intpow.go). A new test data set may
// bring refusals back: each with the part of its error to expect.
var refusals = map[string]string{}
