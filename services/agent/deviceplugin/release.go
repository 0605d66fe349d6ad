package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/fpga-faas/faas/services/agent/server"
)

// maxPodResources bounds the kubelet's answer: a node of hundreds of pods
// stays far below it (the kubelet's own client allows 16 MiB).
const maxPodResources = 16 << 20

// held reads from the kubelet which of our devices its containers hold:
// by resource, one device list per container. The kubelet lists a
// container's devices of one resource in one entry or in one entry per
// device (the real kubelet does the latter); either way they are one
// allocation, as Allocate made them.
func (p *Plugin) held(ctx context.Context) ([numKinds][][]string, error) {
	var out [numKinds][][]string
	if _, err := os.Stat(p.cfg.PodResources); err != nil {
		return out, fmt.Errorf("deviceplugin: pod resources: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+p.cfg.PodResources, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodResources)))
	if err != nil {
		return out, fmt.Errorf("deviceplugin: pod resources: %w", err)
	}
	defer conn.Close()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := podresources.NewPodResourcesListerClient(conn).List(lctx, &podresources.ListPodResourcesRequest{})
	if err != nil {
		return out, fmt.Errorf("deviceplugin: pod resources: %w", err)
	}
	for _, pod := range resp.GetPodResources() {
		for _, c := range pod.GetContainers() {
			var ids [numKinds][]string
			for _, d := range c.GetDevices() {
				for k, name := range kindNames {
					if d.GetResourceName() == name {
						ids[k] = append(ids[k], d.GetDeviceIds()...)
					}
				}
			}
			for k := range numKinds {
				if len(ids[k]) > 0 {
					out[k] = append(out[k], ids[k])
				}
			}
		}
	}
	return out, nil
}

// release reads what the kubelet's containers hold, releases allocations
// none of whose devices is held any more (and older than ReleaseGrace),
// revoking their credentials, and adopts held devices no allocation owns
// (containers that outlived a restart of faasd).
func (p *Plugin) release(ctx context.Context) error {
	held, err := p.held(ctx)
	if err != nil {
		return err
	}
	inUse := [numKinds]map[string]bool{}
	for k := range numKinds {
		inUse[k] = map[string]bool{}
		for _, c := range held[k] {
			for _, d := range c {
				inUse[k][d] = true
			}
		}
	}
	var gone []string
	for _, a := range p.inv.snapshot() {
		if time.Since(a.at) < p.cfg.ReleaseGrace {
			continue
		}
		used := false
		for _, d := range a.devices {
			used = used || inUse[a.kind][d]
		}
		if !used {
			gone = append(gone, a.id)
		}
	}
	p.inv.remove(gone)
	for _, id := range gone {
		p.cfg.Grants.Revoke(id)
	}
	if len(gone) > 0 {
		p.log.Info("released allocations of ended containers", "allocations", gone)
	}
	for k := range numKinds {
		for _, c := range held[k] {
			owned := false
			for _, d := range c {
				owned = owned || p.inv.owned(k, d)
			}
			if owned {
				continue
			}
			a, err := p.inv.newAllocation(server.NewGrantID(), k, c)
			if err != nil {
				p.log.Warn("pod resources name a device we do not have", "resource", k, "devices", c, "err", err)
				continue
			}
			if _, err := p.inv.add(a); err != nil {
				p.log.Warn("pod resources hold conflicting devices", "resource", k, "devices", c, "err", err)
				continue
			}
			p.log.Info("adopted devices held by a container", "resource", k, "devices", c, "allocation", a.id)
		}
	}
	return nil
}

// releaseLoop runs release every ReleaseEvery until ctx ends.
func (p *Plugin) releaseLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.ReleaseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := p.release(ctx); err != nil {
				p.log.Debug("pod resources", "err", err)
			}
			if p.cfg.Engines != nil {
				p.sweepEngines(ctx)
			}
		}
	}
}
