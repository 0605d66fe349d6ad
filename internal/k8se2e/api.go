package k8se2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// API is the Kubernetes API as the cluster's administrator
// (system:masters), over plain REST with the types of k8s.io/api: the
// tests need a handful of calls, not a client library.
type API struct {
	base string
	hc   *http.Client
}

func newAPI(base string, p *pki) (*API, error) {
	cert, err := tls.LoadX509KeyPair(p.path("admin.crt"), p.path("admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}}
	return &API{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// StatusError is a response of the API server other than 2xx.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// raw sends one request and returns the body of a 2xx answer.
func (a *API) raw(ctx context.Context, method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &StatusError{Code: resp.StatusCode, Body: string(out)}
	}
	return out, nil
}

func (a *API) do(ctx context.Context, method, path string, body, out any) error {
	b, err := a.raw(ctx, method, path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Node reads a node.
func (a *API) Node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	return &n, a.do(ctx, "GET", "/api/v1/nodes/"+name, nil, &n)
}

// CreatePod creates a pod in its namespace.
func (a *API) CreatePod(ctx context.Context, p *corev1.Pod) error {
	return a.do(ctx, "POST", "/api/v1/namespaces/"+p.Namespace+"/pods", p, nil)
}

// Pod reads a pod.
func (a *API) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	var p corev1.Pod
	return &p, a.do(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil, &p)
}

// DeletePod deletes a pod with grace period 0: the kubelet still stops
// its containers, and the fake runtime has nothing to wait for. A pod
// that is gone already is no error.
func (a *API) DeletePod(ctx context.Context, ns, name string) error {
	err := a.do(ctx, "DELETE", "/api/v1/namespaces/"+ns+"/pods/"+name, map[string]any{"gracePeriodSeconds": 0}, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return nil
	}
	return err
}

// Gone reports whether a pod no longer exists.
func (a *API) Gone(ctx context.Context, ns, name string) (bool, error) {
	_, err := a.raw(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return true, nil
	}
	return false, err
}

// Create creates an object given as JSON-shaped map (a rendered manifest):
// its collection's path is worked out from apiVersion and kind, for the
// kinds the project's manifests use.
func (a *API) Create(ctx context.Context, obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	plural := strings.ToLower(kind) + "s"
	if strings.HasSuffix(plural, "ys") {
		plural = strings.TrimSuffix(plural, "ys") + "ies" // NetworkPolicy
	}
	path := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		path = "/api/" + apiVersion
	}
	if ns != "" {
		path += "/namespaces/" + ns
	}
	return a.do(ctx, "POST", path+"/"+plural, obj, nil)
}
