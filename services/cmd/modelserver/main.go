// Command modelserver serves the models of a model repository over the
// Open Inference Protocol's REST and gRPC APIs (see services/modelserver
// for the repository layout, config.json, the endpoints and the RPCs).
//
// Usage:
//
//	modelserver -repo DIR [-listen 127.0.0.1:8000] [-grpc-listen 127.0.0.1:8001] [-agent TARGET] [-slots 0,1]
//	modelserver -repo DIR -attach LISTING[:VERSION] [-attachments N] [-registry URL] [-lease 30s]
//	modelserver -repo DIR -sim N
//	modelserver -model NAME=REGISTRY/NS/REPO@sha256:DIGEST [-model ...] [-model-cache DIR] -sim N
//	modelserver ... -listen 0.0.0.0:8000 -tokens FILE [-tls-cert CERT -tls-key KEY [-client-ca CA]]
//
// Each model version gets one instance on every engine: the -slots of the
// faasd at -agent (found like the faas command finds it: -agent, else
// $FAAS_AGENT, else /run/faas/faasd.sock; the token is $FAAS_TOKEN or the
// one `faas login` stored), each already loaded with the AliDNN engine; or
// -attachments accelerators attached from the pool of the registry
// (-registry, else $FAAS_REGISTRY or `faas login`'s) running the AliDNN
// image -attach, their leases renewed; or, with -sim N, N AliDNN engines
// simulated in this process, for development and tests. A slot or an
// attachment that fails (faasd stopped, the node lost) is opened again,
// with backoff, while the others serve; after -reopen-attempts failed
// attempts in a row the server exits with 1, for its supervisor to start
// it again (in Kubernetes, a pod whose faasd restarted needs new
// credentials from the device plugin). In a pod given chips by faasd's
// device plugin, $FAAS_SLOTS is the default of -slots and
// $FAAS_ALLOCATION_TOKEN the token.
//
// -model serves a model pushed with faas model push (repeatable, with or
// without -repo), fetched into -model-cache (faas-modelserver in the
// user's cache directory by default) and pinned to its digest. The
// registry account is -registry-user or $MODELSERVER_REGISTRY_USER, its API
// token the contents of -registry-token-file or
// $MODELSERVER_REGISTRY_TOKEN; with neither, the login faas login stored.
// -max-model-bytes bounds a model artifact.
//
// The REST API listens on -listen, the gRPC service
// (inference.GRPCInferenceService) on -grpc-listen, Triton's ports by
// default; -grpc-listen "" turns gRPC off. -tokens FILE requires a bearer
// token of every request but the health checks, lines "ROLE TOKEN" with
// roles metadata, infer and admin; -tls-cert and -tls-key serve both over
// TLS, and -client-ca requires client certificates it verified (mTLS). Both
// listen on 127.0.0.1 unless told otherwise, and the command refuses an
// address that is not loopback without -tokens or -client-ca unless
// -insecure-no-auth is given (see services/modelserver, "Authentication").
// The server answers
// liveness at once and readiness once
// every model is loaded; a model that fails to load ends it with exit code
// 1. Logs are JSON lines on standard error. With -metrics ADDR, Prometheus
// metrics are served at ADDR/metrics.
//
// Exit codes: 0 stopped by a signal; 1 a failure; 2 bad usage.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/services/modelserver"
)

func main() {
	repo := flag.String("repo", "", "model repository folder (required without -model)")
	listen := flag.String("listen", "127.0.0.1:8000", "address of the REST API")
	grpcListen := flag.String("grpc-listen", "127.0.0.1:8001", `address of the gRPC API ("": none)`)
	agent := flag.String("agent", "", "faasd: unix socket path, unix:///path or https://host:port (default $FAAS_AGENT or /run/faas/faasd.sock)")
	slots := flag.String("slots", "0", "comma-separated faasd slots loaded with the AliDNN engine")
	sim := flag.Int("sim", 0, "run on N in-process simulated engines instead of faasd slots")
	attach := flag.String("attach", "", "attach accelerators running this AliDNN image (LISTING[:VERSION]) from the registry's pool instead of faasd slots")
	attachments := flag.Int("attachments", 1, "with -attach: how many accelerators to attach")
	registry := flag.String("registry", "", "with -attach: the registry's URL (default $FAAS_REGISTRY or faas login's)")
	lease := flag.Duration("lease", 0, "with -attach: the lease renewed on each attachment (default the registry's)")
	pipeline := flag.Int("pipeline", modelserver.DefaultPipeline, "jobs of an instance on its engine at once")
	queue := flag.Int("queue", modelserver.DefaultQueueSize, "requests of a model admitted at once, when its config.json has no max_queue_size")
	timeout := flag.Duration("timeout", modelserver.DefaultTimeout, "deadline of an infer request, queueing included")
	maxBody := flag.Int64("max-body", modelserver.DefaultMaxBodyBytes, "largest infer request body or gRPC message, in bytes")
	metrics := flag.String("metrics", "", "address to serve Prometheus metrics on (default none)")
	reopen := flag.Int("reopen-attempts", 30, "attempts in a row to reopen a failed slot or attachment before exiting with 1 (0: no bound)")
	sec := addSecurityFlags()
	flag.Parse()
	if flag.NArg() != 0 || (*repo == "" && len(sec.models) == 0) || *sim < 0 || *attachments < 1 || *reopen < 0 ||
		(*attach != "" && (*sim > 0 || isSet("slots"))) {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	src := engineSource{sim: *sim, agent: *agent, slots: *slots, attach: *attach, attachments: *attachments, registry: *registry, lease: *lease}
	engines, openers, closeEngines, err := src.open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		if h := faas.Hint(err); h != "" {
			fmt.Fprintln(os.Stderr, "hint:", h)
		}
		os.Exit(1)
	}
	defer closeEngines()
	cfg := modelserver.Config{Repository: *repo, Engines: engines, Openers: openers, Version: version(), MaxBodyBytes: *maxBody,
		QueueSize: *queue, Timeout: *timeout, Pipeline: *pipeline, Logger: log, ReopenAttempts: *reopen}
	gopts, tcfg, err := sec.apply(&cfg, log)
	if err == nil {
		err = sec.checkExposure(cfg, tcfg, log, *listen, *grpcListen)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelserver:", err)
		code := 1
		if errors.As(err, new(usageErr)) {
			code = 2
		}
		os.Exit(code)
	}
	if *metrics != "" {
		reg := prometheus.NewRegistry()
		cfg.Metrics = modelserver.NewMetrics(reg)
		go serveMetrics(ctx, log, *metrics, reg)
	}
	ln, gln, err := listen2(*listen, *grpcListen)
	if err == nil {
		if tcfg != nil {
			ln = tls.NewListener(ln, tcfg)
		}
		err = run(ctx, log, cfg, ln, gln, gopts...)
	}
	if err != nil {
		log.Error("modelserver failed", "err", err, "hint", faas.Hint(err))
		os.Exit(1)
	}
}

// listen2 opens the REST API's listener and, unless grpcAddr is "", the
// gRPC service's.
func listen2(addr, grpcAddr string) (ln, gln net.Listener, err error) {
	if ln, err = net.Listen("tcp", addr); err != nil || grpcAddr == "" {
		return ln, nil, err
	}
	if gln, err = net.Listen("tcp", grpcAddr); err != nil {
		ln.Close()
		return nil, nil, err
	}
	return ln, gln, nil
}

// run serves cfg's repository on ln (REST) and gln (gRPC, if not nil)
// until ctx ends: the APIs answer from the start, readiness comes with the
// models.
func run(ctx context.Context, log *slog.Logger, cfg modelserver.Config, ln, gln net.Listener, gopts ...grpc.ServerOption) error {
	srv, err := modelserver.New(cfg)
	if err != nil {
		ln.Close()
		if gln != nil {
			gln.Close()
		}
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 2)
	go func() { served <- hs.Serve(ln) }()
	gs := srv.GRPCServer(gopts...)
	if gln != nil {
		go func() { served <- gs.Serve(gln) }()
		log.Info("serving the Open Inference Protocol over gRPC", "addr", gln.Addr().String())
	}
	log.Info("serving the Open Inference Protocol", "addr", ln.Addr().String(), "repository", cfg.Repository, "engines", len(cfg.Engines)+len(cfg.Openers))
	defer srv.Close(context.WithoutCancel(ctx))
	if err := srv.Load(ctx); err != nil {
		hs.Close()
		gs.Stop()
		if ctx.Err() != nil {
			return nil // stopped while loading
		}
		return err
	}
	log.Info("every model is loaded: ready")
	select {
	case err := <-served:
		hs.Close()
		gs.Stop()
		return err
	case <-srv.Dead():
		hs.Close()
		gs.Stop()
		return errors.New("an engine could not be opened again: giving up")
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Timeout+5*time.Second)
	defer cancel()
	return shutdown(shut, hs, gs)
}

// shutdown lets the requests in flight on both servers end, until ctx
// does; then it closes what is left.
func shutdown(ctx context.Context, hs *http.Server, gs *grpc.Server) error {
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	err := hs.Shutdown(ctx)
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop()
		<-stopped
	}
	return err
}

// serveMetrics serves reg at addr/metrics until ctx ends.
func serveMetrics(ctx context.Context, log *slog.Logger, addr string, reg *prometheus.Registry) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("metrics listener failed", "addr", addr, "err", err)
	}
}

// version is the module version the binary was built from, or "dev".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
