// Package inferencepb is the Go code of the Open Inference Protocol's gRPC
// API, generated from KServe's grpc_predict_v2.proto (package inference,
// service GRPCInferenceService), which is vendored beside it with its
// licence and provenance (README.md). Nothing here is written by hand but
// this comment: regenerate with `go generate` after changing buf.gen.yaml.
//
// It lives under services/modelserver because the model server is its one
// user; a client outside services would need it moved to sdk.
package inferencepb

//go:generate go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate
