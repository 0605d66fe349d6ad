package loader

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/agent/cache"
)

const retryHint = "retry when the registry is reachable again"

// classify turns an error without a code into an *Error.
func classify(err error) *Error {
	var te *transport.Error
	switch {
	case errors.Is(err, registryclient.ErrUnavailable), unreachable(err):
		return &Error{Code: agentapi.CodeUnavailable, Hint: retryHint, Err: err}
	case errors.As(err, &te) && te.StatusCode >= 500:
		return &Error{Code: agentapi.CodeUnavailable, Hint: retryHint, Err: err}
	case errors.Is(err, registryclient.ErrUnauthenticated):
		return &Error{Code: agentapi.CodeInternal, Hint: "the node's registry credentials were refused; tell the operator", Err: err}
	case errors.Is(err, registryclient.ErrSpendLimit):
		return &Error{Code: agentapi.CodeSpendLimit, Hint: spendHint, Err: err}
	case errors.Is(err, registryclient.ErrDenied):
		return &Error{Code: agentapi.CodeNotEntitled, Err: err}
	case errors.Is(err, registryclient.ErrNotFound):
		return &Error{Code: agentapi.CodeNotFound, Err: err}
	}
	return &Error{Code: agentapi.CodeInternal, Err: err}
}

// unreachable reports a network failure reaching the registry.
func unreachable(err error) bool {
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// pullErr classifies a failed manifest fetch of image ref.
func pullErr(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return &Error{Code: agentapi.CodeNotEntitled, Hint: "subscribe to the image's listing in the marketplace (or check `faas login`)",
				Err: fmt.Errorf("the registry refused %s to this tenant: %w", ref, err)}
		case http.StatusNotFound:
			return &Error{Code: agentapi.CodeNotFound, Hint: "check the image name and tag",
				Err: fmt.Errorf("%s not found: %w", ref, err)}
		}
	}
	if e := classify(err); e.Code != agentapi.CodeInternal {
		e.Err = fmt.Errorf("pulling %s: %w", ref, err)
		if e.Code == agentapi.CodeUnavailable {
			e.Err = fmt.Errorf("the registry is unreachable (pulling %s): %w", ref, err)
		}
		return e
	}
	return fmt.Errorf("pulling %s: %w", ref, err)
}

// cacheErr classifies a failed layer fetch.
func cacheErr(layer string, err error) error {
	switch {
	case errors.Is(err, cache.ErrFull):
		return &Error{Code: agentapi.CodeCacheFull, Hint: "the operator must free disk space or raise the cache limit",
			Err: fmt.Errorf("layer %s: %w", layer, err)}
	case errors.Is(err, cache.ErrDigestMismatch):
		return &Error{Code: agentapi.CodeSignature, Hint: "the image was altered after it was signed; tell the ISV",
			Err: fmt.Errorf("layer %s does not match its digest: %w", layer, err)}
	}
	return pullErr("layer "+layer, err)
}

func parseWrapped(s string) (seal.WrappedKey, error) {
	var w seal.WrappedKey
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return w, fmt.Errorf("wrapped key: %w", err)
	}
	if err := w.UnmarshalBinary(b); err != nil {
		return w, fmt.Errorf("wrapped key: %w", err)
	}
	return w, nil
}
