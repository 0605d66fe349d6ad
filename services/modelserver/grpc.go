package modelserver

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// GRPCServer returns a gRPC server with the protocol's
// inference.GRPCInferenceService registered, serving the same models,
// queues, deadlines and metrics as Handler. A message over
// Config.MaxBodyBytes is refused by gRPC itself with ResourceExhausted.
// opts come after the server's own, so they may override them; an
// InTapHandle among them replaces the one that bounds a call's time.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(int(s.cfg.MaxBodyBytes)), grpc.InTapHandle(s.callDeadline),
		grpc.ChainUnaryInterceptor(s.grpcUnaryAuth), grpc.ChainStreamInterceptor(s.grpcStreamAuth)}, opts...)...)
	inferencepb.RegisterGRPCInferenceServiceServer(gs, grpcService{s: s})
	return gs
}

// callDeadline bounds a call by Config.Timeout from the arrival of its
// headers. Set here, before the stream exists, the deadline covers
// reading the request message too, as the REST side's covers reading the
// body: a client that stalls mid-message is cut off.
func (s *Server) callDeadline(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	// ctx is the stream's, which gRPC cancels when the call ends, ending
	// this one and freeing its timer: there is nothing left for cancel.
	_ = cancel
	return ctx, nil
}

// grpcService is the protocol's GRPCInferenceService on a Server. Its
// methods turn the protocol's messages into the server's own types and
// errors into gRPC status codes (grpcError); everything between is the
// code the REST handlers run.
type grpcService struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	s *Server
}

func (g grpcService) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: g.s.Live()}, nil
}

// ServerReady answers false, not an error, while the models load: the
// RPC itself succeeded.
func (g grpcService) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: g.s.Ready()}, nil
}

func (g grpcService) ServerMetadata(context.Context, *inferencepb.ServerMetadataRequest) (*inferencepb.ServerMetadataResponse, error) {
	return &inferencepb.ServerMetadataResponse{Name: g.s.cfg.Name, Version: g.s.cfg.Version, Extensions: grpcExtensions}, nil
}

// ModelReady answers false while the models load, as the REST side's 503
// does, and NotFound for a model or version the repository does not have.
func (g grpcService) ModelReady(_ context.Context, r *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	_, v, err := g.s.lookup(r.GetName(), r.GetVersion())
	if errors.Is(err, ErrNotReady) {
		return &inferencepb.ModelReadyResponse{Ready: false}, nil
	}
	if err != nil {
		return nil, grpcError(err)
	}
	return &inferencepb.ModelReadyResponse{Ready: len(v.live()) > 0}, nil
}

func (g grpcService) ModelMetadata(_ context.Context, r *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	m, v, err := g.s.lookup(r.GetName(), r.GetVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	return &inferencepb.ModelMetadataResponse{Name: m.name, Versions: m.versionNames(), Platform: Platform,
		Inputs: grpcTensorMetadata(v.inputs), Outputs: grpcTensorMetadata(v.outputs)}, nil
}

func grpcTensorMetadata(ts []tensorSpec) []*inferencepb.ModelMetadataResponse_TensorMetadata {
	out := make([]*inferencepb.ModelMetadataResponse_TensorMetadata, len(ts))
	for k, t := range ts {
		out[k] = &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: datatypeName(t.Type), Shape: t.Shape}
	}
	return out
}

func (g grpcService) ModelInfer(ctx context.Context, r *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	start := time.Now()
	s := g.s
	m, v, err := s.lookup(r.GetModelName(), r.GetModelVersion())
	if err != nil {
		return nil, grpcError(err)
	}
	// ctx has the call's deadline (callDeadline), or the client's if sooner.
	resp, err := s.inferGRPC(ctx, r, m, v)
	s.record(ctx, "grpc", m, v, start, err)
	if err != nil {
		return nil, grpcError(err)
	}
	return resp, nil
}

// inferGRPC checks, runs and answers one ModelInfer request.
func (s *Server) inferGRPC(ctx context.Context, r *inferencepb.ModelInferRequest, m *model, v *version) (*inferencepb.ModelInferResponse, error) {
	req, raw, err := grpcRequest(r, v.inputs, v.outputs)
	if err != nil {
		return nil, err
	}
	res, err := s.infer(ctx, m, v, req.Inputs)
	if err != nil {
		return nil, err
	}
	return grpcResponse(m.name, v.name, req, raw, res.Outputs)
}

// grpcError is the gRPC status of an error of a request, by sentinel as
// Triton maps its errors: a full queue is Unavailable (Triton's "Exceeds
// maximum queue size"), as is a server still loading. ErrTooLarge has no
// entry: gRPC refuses an oversized message before it reaches the service.
func grpcError(err error) error {
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{ErrBadRequest, codes.InvalidArgument},
		{ErrNotFound, codes.NotFound},
		{ErrQueueFull, codes.Unavailable},
		{ErrNotReady, codes.Unavailable},
		{ErrUnavailable, codes.Unavailable},
		{ErrTimeout, codes.DeadlineExceeded},
		{ErrCanceled, codes.Canceled},
	} {
		if errors.Is(err, c.err) {
			return status.Error(c.code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}
