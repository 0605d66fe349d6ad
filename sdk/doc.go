// Package sdk is the tenant side of the platform: the client of the node agent
// (devices, buffers, instruction queues), the AliDNN compiler and runtime, ONNX
// model decoding, and the faas command built on them (sdk/cmd/faas).
package sdk
