package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/services/modelserver"
)

// envSlots is what faasd's device plugin sets in a container it gives
// chips to, beside faas.AllocationEnv (services/agent/deviceplugin; not
// imported: commands of services read the environment, not each other's
// packages).
const envSlots = "FAAS_SLOTS"

// maxAttachments bounds -attachments: each holds a chip of the pool and a
// session with its buffers.
const maxAttachments = 64

// engineSource is what the flags say the engines are.
type engineSource struct {
	sim         int
	agent       string
	slots       string
	attach      string
	attachments int
	registry    string
	lease       time.Duration
}

// open makes the engines: sim simulated ones, which the caller closes
// with closeAll, or else openers of faasd slots or pool attachments,
// which the server opens (and opens again when they fail).
func (src engineSource) open() (engines []alidnn.Engine, openers []modelserver.EngineOpener, closeAll func(), err error) {
	closeAll = func() {}
	if src.sim > 0 {
		var closers []func()
		closeAll = func() {
			for _, c := range closers {
				c()
			}
		}
		for range src.sim {
			dev, err := alidnnmodel.NewLocal(0)
			if err != nil {
				closeAll()
				return nil, nil, nil, fmt.Errorf("simulated engine: %w", err)
			}
			engines, closers = append(engines, alidnn.NewLocal(dev)), append(closers, func() { dev.Close() })
		}
		return engines, nil, closeAll, nil
	}
	login, err := faas.StoredLogin()
	if err != nil {
		return nil, nil, nil, err
	}
	if src.attach != "" {
		if src.attachments > maxAttachments {
			return nil, nil, nil, fmt.Errorf("-attachments %d: at most %d", src.attachments, maxAttachments)
		}
		reg := src.registry
		if reg == "" {
			reg = login.Registry
		}
		if reg == "" {
			return nil, nil, nil, errors.New("-attach: no registry: give -registry, set $FAAS_REGISTRY or run faas login")
		}
		opts := []faas.AttachOption{faas.WithRegistryToken(login.Token), faas.WithAttachUserAgent("modelserver"), faas.WithLocalAgent(src.agent)}
		if src.lease != 0 {
			opts = append(opts, faas.WithLease(src.lease))
		}
		for range src.attachments {
			openers = append(openers, modelserver.PoolAttachment(reg, src.attach, opts...))
		}
		return nil, openers, closeAll, nil
	}
	// In a pod given chips by faasd's device plugin, the plugin names
	// them and gives a credential that opens sessions on them only.
	slots, token := src.slots, login.Token
	if v := os.Getenv(envSlots); v != "" && !isSet("slots") {
		slots = v
	}
	if v := os.Getenv(faas.AllocationEnv); v != "" {
		token = v
	}
	for _, s := range strings.Split(slots, ",") {
		slot, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || slot < 0 {
			return nil, nil, nil, fmt.Errorf("-slots %q: %q is not a slot number", slots, s)
		}
		openers = append(openers, modelserver.FaasdSlot(src.agent, slot, faas.WithToken(token), faas.WithUserAgent("modelserver")))
	}
	return nil, openers, closeAll, nil
}

// isSet reports whether the flag name was given.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
