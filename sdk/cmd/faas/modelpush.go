package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/sdk/alidnn"
	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/modelartifact"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxPushConfigBytes is the model server's bound on a config.json.
const maxPushConfigBytes = modelartifact.DefaultMaxConfigBytes

func pushCommand() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "push REF [--config config.json] MODEL_FILE",
		Short: "Push a model (ONNX or a compiled program) and its config to the registry",
		Long: `push uploads MODEL_FILE, an ONNX model (.onnx) or a program compiled by
faas model compile (.alidnn), with its model server config.json as an OCI
artifact (artifactType ` + modelartifact.ArtifactType + `) to REF,
REGISTRY/NAMESPACE/REPOSITORY:TAG (or NAMESPACE/REPOSITORY:TAG, in the
registry faas login stored), and prints the manifest's digest. The
model server serves it with --model NAME=REGISTRY/NAMESPACE/REPOSITORY@DIGEST.

Without --config the config is {}: the model server's defaults, the name
taken from --model. The file is checked before it is sent: the model must
decode, the config must be a JSON object of at most 1 MiB.

It authenticates as the login faas login stored ($FAAS_TOKEN overrides its
token); plain http is used only for a registry on the loopback interface.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return pushModel(cmd, args[0], args[1], configPath)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the model's config.json (default {})")
	return cmd
}

func pushModel(cmd *cobra.Command, ref, modelPath, configPath string) error {
	login, err := client.StoredLogin()
	if err != nil {
		return usageErrorf("%v", err)
	}
	ref = withRegistry(ref, login.Registry)
	if _, err := modelartifact.ParseRef(ref); err != nil {
		return usageErrorf("%v", err)
	}
	model, isONNX, err := readPushModel(modelPath)
	if err != nil {
		return err
	}
	config := []byte("{}")
	if configPath != "" {
		if config, err = readPushConfig(configPath); err != nil {
			return err
		}
	}
	if login.User == "" || login.Token == "" {
		return fmt.Errorf("%w: no registry login to push with", client.ErrPermission)
	}
	host, _, _ := strings.Cut(ref, "/")
	digest, err := modelartifact.Push(cmd.Context(), modelartifact.Remote{User: login.User, Token: login.Token, UserAgent: "faas-cli"}, ref, config, model, isONNX)
	switch {
	case errors.Is(err, modelartifact.ErrDenied):
		return fmt.Errorf("%w: %v", client.ErrPermission, err)
	case isUnreachable(err):
		return fmt.Errorf("registry %s: %w: %v", host, client.ErrUnavailable, err)
	case err != nil:
		return failed(err)
	}
	kind := "program"
	if isONNX {
		kind = "onnx"
	}
	if jsonOutput(cmd) {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"ref": ref, "digest": digest, "kind": kind,
			"model_bytes": len(model), "config_bytes": len(config)})
	}
	fmt.Fprintln(cmd.OutOrStdout(), digest)
	return nil
}

// withRegistry prefixes ref with the host of the login's registry when its
// first component names none (NAMESPACE/REPOSITORY:TAG).
func withRegistry(ref, registry string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok || strings.ContainsAny(first, ".:") || first == "localhost" || registry == "" {
		return ref
	}
	u, err := url.Parse(registry)
	if err != nil || u.Host == "" {
		return ref
	}
	return u.Host + "/" + ref
}

// readPushModel reads an ONNX model (a .onnx file) or a program file of
// faas model compile (any other name: .alidnn, .prog), and checks that it
// decodes.
func readPushModel(path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	if filepath.Ext(path) == ".onnx" {
		if _, err := onnx.Decode(b); err != nil {
			return nil, false, usageErrorf("%s: not an ONNX model: %v", path, err)
		}
		return b, true, nil
	}
	if _, err := alidnn.ReadFile(path); err != nil {
		return nil, false, usageErrorf("%s: not a program of faas model compile (name an ONNX model *.onnx): %v", path, err)
	}
	return b, false, nil
}

// readPushConfig reads a config.json: one JSON object, within the model
// server's size bound. Its fields are the model server's to check.
func readPushConfig(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxPushConfigBytes {
		return nil, usageErrorf("%s: %d bytes, more than %d", path, len(b), maxPushConfigBytes)
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&obj); err != nil || dec.More() {
		return nil, usageErrorf("%s: not one JSON object: %v", path, err)
	}
	return b, nil
}

// isUnreachable reports a network failure: no registry answered.
func isUnreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne)
}
