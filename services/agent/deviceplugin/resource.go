package deviceplugin

import (
	"context"
	"errors"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/server"
)

// Container side of what Allocate returns.
const (
	// ContainerDir is where the directory of faasd's pod socket appears.
	ContainerDir = "/run/faasd"
	EnvAgent     = "FAAS_AGENT"
	EnvSlots     = "FAAS_SLOTS"
	EnvToken     = "FAAS_ALLOCATION_TOKEN"
)

// resource serves the device plugin API for one resource.
type resource struct {
	pluginapi.UnimplementedDevicePluginServer
	p      *Plugin
	kind   kind
	socket string
}

func (r *resource) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return r.p.options(), nil
}

// ListAndWatch sends the resource's devices now and at every change of
// their health.
func (r *resource) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	var last []*pluginapi.Device
	for {
		changed := r.p.inv.changed()
		devs := r.p.inv.devices(r.kind)
		if !sameDevices(devs, last) {
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
			last = devs
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-changed:
		}
	}
}

func sameDevices(a, b []*pluginapi.Device) bool {
	return slices.EqualFunc(a, b, func(x, y *pluginapi.Device) bool { return x.ID == y.ID && x.Health == y.Health })
}

func (r *resource) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	out := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		ids, err := r.p.prefer(r.kind, cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		// Logged, since nothing else shows whether the kubelet asks: it
		// does only when it has more devices than it needs.
		r.p.log.Info("preferred allocation", "resource", r.kind.String(), "available", len(cr.AvailableDeviceIDs),
			"must", cr.MustIncludeDeviceIDs, "size", cr.AllocationSize, "preferred", ids)
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return out, nil
}

// Allocate gives each container its devices: one allocation, with its own
// credential, per container.
func (r *resource) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		resp, err := r.p.allocate(ctx, r.kind, cr.DevicesIds)
		if err != nil {
			code := codes.Internal
			switch {
			case errors.Is(err, ErrUnknownDevice):
				code = codes.InvalidArgument
			case errors.Is(err, ErrConflict):
				code = codes.FailedPrecondition
			}
			return nil, status.Error(code, err.Error())
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

// PreStartContainer loads the AliDNN engine on the chips of a container's
// shares, and clears engines loaded for shares off its whole chips; the
// kubelet calls it only when Config.Engines is set. Its error is what
// `kubectl describe pod` shows, so it says what went wrong.
func (r *resource) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if r.p.cfg.Engines == nil {
		return &pluginapi.PreStartContainerResponse{}, nil
	}
	if err := r.p.preStart(ctx, r.kind, req.DevicesIds); err != nil {
		r.p.log.Warn("devices not ready for a container", "resource", r.kind.String(), "devices", req.DevicesIds, "err", err)
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &pluginapi.PreStartContainerResponse{}, nil
}

// allocate records the allocation of ids under kind k and builds the
// container's response.
func (p *Plugin) allocate(ctx context.Context, k kind, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	a, err := p.inv.newAllocation(server.NewGrantID(), k, ids)
	if err != nil {
		return nil, err
	}
	if p.inv.conflicts(a) != nil {
		// The pods holding the other resource may have ended since we
		// last looked.
		if err := p.release(ctx); err != nil {
			p.log.Debug("pod resources", "err", err)
		}
	}
	tok, err := p.cfg.Grants.Issue(server.Grant{ID: a.id, Slots: a.slots, Shares: a.shares})
	if err != nil {
		return nil, err
	}
	a.granted = true
	dropped, err := p.inv.add(a)
	if err != nil {
		p.cfg.Grants.Revoke(a.id)
		p.log.Warn("allocation refused", "resource", k, "devices", ids, "err", err)
		return nil, err
	}
	for _, id := range dropped {
		p.cfg.Grants.Revoke(id)
	}
	p.log.Info("allocated", "resource", k, "devices", ids, "allocation", a.id, "superseded", dropped)
	var slotList []int
	if k == kindShare {
		for s := range a.shares {
			slotList = append(slotList, s)
			if p.cfg.Engines != nil && p.cfg.Slots.Record(s).State == agentapi.Cleared {
				p.startEngine(s) // early: the container waits for it in PreStartContainer
			}
		}
		slices.Sort(slotList)
	} else {
		slotList = a.slots
	}
	strs := make([]string, len(slotList))
	for i, s := range slotList {
		strs[i] = strconv.Itoa(s)
	}
	resp := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{
			EnvAgent: "unix://" + path.Join(ContainerDir, filepath.Base(p.cfg.PodSocket)),
			EnvSlots: strings.Join(strs, ","),
			EnvToken: tok,
		},
		Mounts: []*pluginapi.Mount{{ContainerPath: ContainerDir, HostPath: filepath.Dir(p.cfg.PodSocket), ReadOnly: true}},
	}
	if p.cdi {
		for _, d := range ids {
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: k.String() + "=" + d})
		}
	}
	return resp, nil
}
