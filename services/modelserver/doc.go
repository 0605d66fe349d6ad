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
// Metrics count the engines up and the reopens (see Metrics).
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
//	  "dims": {"batch": 1},                 symbolic dimensions, by name
//	  "dynamic_batching": {                 requests held for others to share their job (none without it)
//	    "max_queue_delay_microseconds": 500,
//	    "preferred_batch_size": [4, 8]
//	  }
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
// # Dynamic batching
//
// Without dynamic_batching, a request never waits for others: it goes to
// the engine as soon as its instance has a free job slot, and only those
// that arrive while every slot is busy share a job. With it, as Triton's
// dynamic batcher does, an instance holds a request up to
// max_queue_delay_microseconds while fewer wait than the largest
// preferred_batch_size (max_batch_size, or the batch of a batched
// program, when none is given): a job goes at once when that many wait;
// when the oldest request's delay has passed, it takes the largest
// preferred size the waiting requests fill, or all of them. Each preferred
// size is at most what a job runs. A request whose deadline (Config.Timeout,
// or the gRPC client's) comes before its delay would end is not held: the
// hold never spends the time its job needs. A held request is admitted (it
// counts against max_queue_size: 429, Unavailable), and one whose client
// goes away or whose deadline passes leaves at once, without a job. The
// hold lives in the instance, alidnn.WithMaxDelay, because the Session
// alone knows when a job slot is free and which requests wait for it: a
// hold in front of Session.Run would send a batch's requests one by one
// to a free slot.
//
// # Metrics
//
// With Config.Metrics, the server counts, labelled by model and version as
// Triton's nv_inference_* are:
//
//	modelserver_infer_requests_total{model,version,protocol,code}   requests by protocol (http, grpc) and HTTP status (failures: all but 200; 499 a client gone)
//	modelserver_infer_duration_seconds{model,version}               arrival to answer
//	modelserver_infer_queue_seconds{model,version}                  admission by the model's queue to the start of the engine job (a free slot, the hold)
//	modelserver_infer_compute_seconds{model,version}                the job's start to its results
//	modelserver_infer_batch_size{model,version}                     the requests that shared each request's job
//	modelserver_device_seconds_total{model,version}                 engine time: a job's device time shared among its requests
//	modelserver_infer_inflight{model}                               requests the model's queue admitted, running or held
//	modelserver_engines_up, modelserver_engine_reopens_total       engines up; engines opened again after they failed
//
// The queue, compute and batch histograms and the device time count
// successful requests. The version label is new to the names kept from
// before (requests, duration, batch size, device time).
//
// # Models from the registry
//
// A model may come from the registry instead (Config.Models, the
// command's -model NAME=REGISTRY/NS/REPO@sha256:… or :TAG), pushed there
// by faas model push as an OCI artifact: an image manifest of artifactType
// application/vnd.faas.model.v1+json whose config blob is the model's
// config.json and whose one layer is model.onnx or model.alidnn (the media
// types are in sdk/modelartifact). A tag is resolved to its digest once,
// at load, and the model stays pinned to that digest (logged as "model
// reference pinned"); the load answer shows the pinned reference. A load
// by the repository extension resolves a tag again: that is how a tag
// moved to another digest is taken up. The config's "name" may be left out; if given it must be the
// name the model is served under. A registry model has one version, "1".
//
// ModelCache fetches and keeps artifacts in a local folder by manifest
// digest. Nothing is used unchecked: the manifest's media type and size
// (a HEAD, before its body), its digest against the reference's, its
// media types and layer count (ParseManifest), every blob's size and
// digest against the manifest, and the sizes against limits (64 KiB for
// the manifest, 1 MiB for the config, -max-model-bytes, 2 GiB by default,
// for the model). Files are written with internal/atomicfile, the
// manifest last, so that a crash leaves no entry that looks complete. A
// cached digest is loaded after a restart without the network (every file
// checked again against the manifest); a damaged entry is fetched again.
// The registry's credentials (an account and its API token) are sent to the
// registry's token endpoint only, and never logged.
//
// # The REST surface
//
//	GET  /v2/health/live                          200 {"live": true}
//	GET  /v2/health/ready                         200 {"ready": true} once every model is loaded on an engine that is up, else 503
//	GET  /v2                                      {"name", "version", "extensions": ["binary_tensor_data", "model_repository"]}
//	GET  /v2/models/{m}[/versions/{v}]            {"name", "versions", "platform": "alidnn", "inputs", "outputs"}
//	GET  /v2/models/{m}[/versions/{v}]/ready      200 {"name", "ready": true}, 503 while loading or no engine is up, 404 unknown
//	POST /v2/models/{m}[/versions/{v}]/infer      $inference_request → $inference_response
//	POST /v2/repository/index                     [{"name", "version", "state", "reason"}]
//	POST /v2/repository/models/{m}/load           {"name", "versions", "state": "READY", "source"}
//	POST /v2/repository/models/{m}/unload         {"name", "state": "UNAVAILABLE"}
//
// An infer request's tensors are JSON (data flat or nested, row-major) or,
// with the binary tensor data extension, raw little-endian bytes after the
// JSON: Inference-Header-Content-Length gives the JSON's length, an input's
// "binary_data_size" parameter its bytes, an output's "binary_data"
// parameter (or the request's "binary_data_output") asks for binary
// outputs, answered the same way. Datatypes are those of the model's
// tensors: FP32, INT8 to INT64, UINT8 to UINT64, BOOL and BYTES; FP16 and
// FP64 are refused. BYTES elements are JSON strings (UTF-8 only), in
// binary data each a 4-byte little-endian length and its bytes (any
// bytes), over gRPC bytes_contents. The answer echoes "id" and names
// model_name and model_version.
//
// The repository extension (Triton's model repository extension) loads and
// unloads models at run time. The index lists every version of every
// loaded model READY, then, without a version, the models LOADING,
// UNLOADING (requests in flight finishing) or UNAVAILABLE, with a reason:
// "unloaded", the error of a failed load, or "not loaded" for a folder of
// the repository that is not; a body {"ready": true} lists the READY ones
// only. A load takes the model from the body's parameters.registry_ref, a
// registry reference as -model's ({"parameters": {"registry_ref":
// "reg.example.com/acme/mnist@sha256:…"}}), else from the reference it was
// started with, else from the repository folder of its name; a model
// loaded already is replaced once the new one is ready, and the old one is
// unloaded as an unload would. An unload answers 404 for new requests at
// once, waits for those in flight to be answered, then closes its
// instances. A load or unload of a model another one is under way for is
// 409 (ErrConflict); a load that fails is 400, its reason in the index.
//
// Errors are the protocol's {"error": "..."} with a status by sentinel: 400
// (ErrBadRequest: malformed JSON, an unknown or missing input, a wrong shape
// or datatype, binary sizes that do not add up), 401 (ErrUnauthenticated),
// 403 (ErrPermission), 404 (ErrNotFound), 409 (ErrConflict), 413
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
// served. KServe's proto has no repository RPCs (Triton's
// RepositoryIndex, RepositoryModelLoad and RepositoryModelUnload are in
// Triton's own proto): the repository extension is REST's only, and
// ServerMetadata over gRPC names binary_tensor_data alone.
//
// # Authentication
//
// Config.Auth (auth.go) protects both transports alike. Bearer tokens come
// from a file, a line "ROLE TOKEN" each (ReadTokens; the command's
// -tokens), several allowed, each at least 16 bytes; they are kept as
// SHA-256 hashes and a presented token is compared with every one in
// constant time. REST takes "Authorization: Bearer TOKEN", gRPC the
// "authorization" metadata with the same value. A token's role is the
// least it needs: metadata (server and model metadata and readiness),
// infer (also inference) or admin (also the repository extension: index,
// load, unload). A missing or unknown token is 401 with a Bearer
// challenge, or Unauthenticated; a role too low is 403, or
// PermissionDenied. Tokens and their hashes are never logged.
//
// With TLS (ServerTLS; -tls-cert, -tls-key) and a client CA (-client-ca),
// a client certificate the CA did not sign fails the handshake, and every
// request but the health checks needs a verified one (401,
// Unauthenticated): mTLS. With tokens too, a request needs both; with mTLS
// alone, a verified certificate may do everything.
//
// GET /v2/health/live, GET /v2/health/ready, ServerLive and ServerReady
// need no credential: Kubernetes probes and load balancers send none, and
// they tell nothing but that the process answers and its models are
// loaded. That is also why a client without a certificate passes the TLS
// handshake under mTLS: only the health checks answer it.
//
// The command refuses to listen on an address that is not loopback
// (0.0.0.0, ":8000", a host's address) with neither tokens nor a client
// CA, unless -insecure-no-auth is given: anyone who reaches the port could
// then run models and load or unload them. Tokens over plain HTTP off the
// loopback interface are allowed with a warning, for a mesh that provides
// TLS; otherwise give -tls-cert.
package modelserver
