// Package onnx decodes ONNX models and tensors (the onnx.proto messages
// ModelProto and TensorProto) for the AliDNN compiler, and encodes tensors for
// test data.
//
// It reads the protobuf wire format by hand with protowire rather than
// through generated code: the compiler needs a small, read-only view of the
// model (opsets, the main graph's nodes with their attributes, initializers
// and the shapes of inputs and outputs), and a hand decoder can check every
// length against the input before allocating, name the offending field in
// its errors, and never panic, whatever the input.
//
// # Scope
//
// Decoded: ModelProto's versions, producer, opset imports and graph;
// GraphProto's nodes, initializers, inputs, outputs and value_info; NodeProto
// with every attribute type except sparse tensors (graph attributes are
// decoded into [Graph], nested at most [MaxDepth] deep; TYPE_PROTO attributes
// keep only their type); TensorProto of the numeric types (FLOAT16,
// BFLOAT16, the five float8 types and FLOAT4E2M1 decoded exactly to float32
// by Tensor.Float32s; INT4, UINT4, INT2, UINT2 and FLOAT4E2M1 packed as ONNX
// packs them),
// BOOL and STRING, with data in raw_data or in the typed repeated fields,
// packed or not. NewFloat encodes float32 values to the floating-point types
// as ONNX's Cast rounds them.
// Unknown fields are skipped, so models from newer ONNX versions decode as
// long as they do not need what is missing.
//
// Rejected with an error wrapping [ErrFormat]: external data (the data lives
// in another file), segmented tensors, sparse initializers and sparse tensor
// attributes, tensor types other than those of [DataType] (complex,
// ...), tensors of more than [MaxDims] dimensions or more than
// [MaxElems] elements, data whose length does not match the dims, and inputs
// larger than [MaxModelSize].
//
// Skipped: doc strings, metadata, model-local functions, training info and
// quantization annotations.
package onnx
