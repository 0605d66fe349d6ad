// Package modelserver serves compiled models on AliDNN engines over the
// Open Inference Protocol (KServe's V2 inference protocol, which Triton
// speaks), so that a program in any language can run them with a plain
// HTTP client or any gRPC client. It reaches accelerators through the SDK only: every engine
// is an alidnn.Engine — a slot opened through faasd, an accelerator
// attached from the registry's pool, or an in-process simulator — and
// every version of every model gets one instance (an alidnn.Session) on
// each engine.
//
// # Engines
//
// Config.Engines are engines the caller opened and owns (simulators in
// the command). Config.Openers open the others, which the server owns:
// FaasdSlot (a slot of faasd, through sdk/faas) and PoolAttachment (an
// accelerator of the registry's pool, faas.Attach, whose lease the SDK
// renews). The server opens them at Load, all at once; an engine that
// fails to open fails Load.
//
// An opened engine fails when its session ends (faasd stopped or
// restarted, the node's connection cut, the attachment's lease lost) or
// when a run returns the SDK's session errors. The server then drops its
// instances from every version, so that new requests go to the other
// engines, and the requests that were running on it fail with
// ErrUnavailable: 503 with Retry-After over REST, Unavailable over gRPC,
// both worth retrying. No request waits past its deadline for a failed
// engine. While a version has no instance left, the server and the model
// are not ready. The server opens the engine again (attaches again) with a
// backoff doubling from 250 ms to 10 s, each attempt bounded by two
// minutes, loads every version on it and only then gives it requests.
// Past Config.ReopenAttempts failed attempts in a row the server gives up:
// /v2/health/live and ServerLive answer false and Dead is closed (the
// command exits), for a supervisor to start it afresh.
// Metrics count the engines up (modelserver_engines_up), the reopens
// (modelserver_engine_reopens_total) and each model's engine time
// (modelserver_device_seconds_total: a job's device time shared among the
// requests it ran).
//
// # Model repository
//
// Models come from a folder laid out as Triton's model repository:
//
//	REPO/<model>/config.json
//	REPO/<model>/<version>/model.onnx     compiled with sdk/alidnn at load
//	REPO/<model>/<version>/model.alidnn   or a precompiled program (faas model compile)
//
// Versions are folders named by positive integers; every one is loaded, and
// a request that names none goes to the highest. Triton describes a model in
// config.pbtxt, protobuf text; this server reads the part it needs from
// JSON instead, ModelConfig:
//
//	{
//	  "name": "mnist",                      the folder's name
//	  "max_batch_size": 8,                  requests coalesced into one engine job (0: none)
//	  "max_queue_size": 64,                 requests admitted at once (0: the server's default)
//	  "input": [{"name": "Input3", "dims": [1, 1, 28, 28]}],   shapes of free dimensions, by input
//	  "dims": {"batch": 1}                  symbolic dimensions, by name
//	}
//
// The engine runs static shapes, so a model's inputs and outputs have the
// shapes it was compiled for, with no -1 dimension, and a request's shapes
// must be those. max_batch_size does not add a batch dimension as Triton's
// does: requests that arrive while an instance is busy are run as one job
// (see alidnn.Session). A program precompiled for n samples a run (faas
// model compile --batch n) takes one sample a request, its leading
// dimension shown as 1, and runs up to n requests in one pass instead.
// Unknown fields of config.json are errors.
//
// # The REST surface
//
//	GET  /v2/health/live                          200 {"live": true}
//	GET  /v2/health/ready                         200 {"ready": true} once every model is loaded on an engine that is up, else 503
//	GET  /v2                                      {"name", "version", "extensions": ["binary_tensor_data"]}
//	GET  /v2/models/{m}[/versions/{v}]            {"name", "versions", "platform": "alidnn", "inputs", "outputs"}
//	GET  /v2/models/{m}[/versions/{v}]/ready      200 {"name", "ready": true}, 503 while loading or no engine is up, 404 unknown
//	POST /v2/models/{m}[/versions/{v}]/infer      $inference_request → $inference_response
//
// An infer request's tensors are JSON (data flat or nested, row-major) or,
// with the binary tensor data extension, raw little-endian bytes after the
// JSON: Inference-Header-Content-Length gives the JSON's length, an input's
// "binary_data_size" parameter its bytes, an output's "binary_data"
// parameter (or the request's "binary_data_output") asks for binary
// outputs, answered the same way. Datatypes are those of the model's
// tensors: FP32, INT8 to INT64, UINT8 to UINT64 and BOOL; FP16, FP64 and
// BYTES are refused. The answer echoes "id" and names model_name and
// model_version.
//
// Errors are the protocol's {"error": "..."} with a status by sentinel: 400
// (ErrBadRequest: malformed JSON, an unknown or missing input, a wrong shape
// or datatype, binary sizes that do not add up), 404 (ErrNotFound), 413
// (ErrTooLarge, over Config.MaxBodyBytes), 429 (ErrQueueFull, the model's
// queue is full), 503 (ErrNotReady, still loading; ErrUnavailable, see
// Engines) and 504 (ErrTimeout,
// Config.Timeout passed, reading the body and queueing included). A
// request whose client went away (ErrCanceled) is counted as 499 in logs
// and metrics. The protocol says a health check is false on "4xx"; 503 is
// sent instead, since what reads it (Kubernetes probes, load balancers,
// Triton's clients) takes anything but 200 as false.
//
// # The gRPC surface
//
// Server.GRPCServer serves the protocol's inference.GRPCInferenceService,
// from KServe's grpc_predict_v2.proto (vendored, with the generated code,
// in inferencepb): ServerLive, ServerReady, ModelReady, ServerMetadata,
// ModelMetadata and ModelInfer, on the same models, queues, deadlines and
// metrics as the REST surface. A request is turned into the server's own
// request at the edge and from there runs the REST side's code. An input's
// data is its typed contents, in the field of its datatype (fp32_contents
// for FP32, int_contents for INT8 to INT32, uint_contents for UINT8 to
// UINT32, and int64, uint64 and bool contents), or raw_input_contents for
// every input at once, little-endian as the binary tensor data extension's.
// Outputs come back as raw_output_contents when the inputs came raw or a
// binary_data or binary_data_output parameter asks for them, else as typed
// contents: the protocol allows no mix of the two in one answer.
//
// Errors are gRPC status codes, mapped at the edge the way Triton maps
// its errors: InvalidArgument (ErrBadRequest), NotFound (ErrNotFound: the
// model or version; ModelMetadata and ModelReady too), Unavailable
// (ErrQueueFull, as Triton answers a full queue, ErrNotReady and
// ErrUnavailable),
// DeadlineExceeded (ErrTimeout: Config.Timeout from the call's headers,
// reading the message included, or the client's deadline if sooner),
// Canceled (ErrCanceled) and
// Internal for the rest. A message over Config.MaxBodyBytes is refused by
// gRPC itself with ResourceExhausted, and a call whose deadline passes
// before its message is read ends DeadlineExceeded, both before the
// service sees them, so neither is counted in the metrics. ServerReady and ModelReady answer false, not
// an error, while the models load. Metrics count gRPC requests under
// protocol "grpc", by the HTTP status of the same error over REST.
//
// ModelStreamInfer is Triton's, not part of KServe's protocol, and is not
// served; nor are the repository extension's RPCs.
//
// The server has no authentication yet: the command binds both listeners
// to 127.0.0.1 by default. Models from the registry and the repository
// extension (load and unload) are not served.
package modelserver
