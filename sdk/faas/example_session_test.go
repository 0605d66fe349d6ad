package faas_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

// Open a session on slot 0 (loaded with the AliDNN engine), put data in a
// buffer, run a program that reads it, and read the result back. On this
// host's socket buffers and job rings are shared memory with faasd; the
// same code runs against https://host:port with WithToken and WithTLSConfig.
// (These examples need a running faasd, so they are compiled, not run; the
// agent's tests in services/agent/server run the same calls.)
func ExampleClient_Open() {
	ctx := context.Background()
	c, err := faas.Dial(ctx, "") // $FAAS_AGENT or /run/faas/faasd.sock
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Open(ctx, 0)
	if err != nil {
		log.Fatal(err) // errors.Is(err, faas.ErrPermission): not your slot
	}
	defer dev.Close() // frees everything the session holds on the device

	in, err := dev.Alloc(ctx, 4096)
	if err != nil {
		log.Fatal(err) // errors.Is(err, faas.ErrQuota): over the tenant's quota
	}
	if err := in.Write(ctx, make([]byte, 4096), 0); err != nil {
		log.Fatal(err)
	}
	prog, err := dev.Program(ctx, []isa.Insn{
		{Op: isa.OpLoad, Mem: isa.MemInp, DType: isa.Int8, DRAM: in.Addr(), YSize: 1, XSize: 1, XStride: 1},
		{Op: isa.OpFinish, JobID: 1},
	})
	if errors.Is(err, faas.ErrRefused) {
		log.Fatal(err) // an address outside the session's buffers
	}
	job, err := dev.Queue().Submit(ctx, prog)
	if err != nil {
		log.Fatal(err)
	}
	st, err := job.Wait(ctx)
	var ee *alidnn.EngineError
	switch {
	case errors.As(err, &ee):
		log.Fatalf("the engine stopped at instruction %d: %v", ee.PC, ee.Cause)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Printf("job %d: %d instructions, %d ns on the device\n", job.ID(), st.Insns, st.DeviceNS())
}

// Use a buffer's shared memory directly and move it with Sync, as with
// XRT's bo.sync: no copy in the SDK.
func ExampleBuffer_Sync() {
	ctx := context.Background()
	c, err := faas.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Open(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	buf, err := dev.Alloc(ctx, 1<<20)
	if err != nil {
		log.Fatal(err)
	}
	host := buf.Bytes() // nil over https: use Write and Read there
	for i := range host {
		host[i] = byte(i)
	}
	if err := buf.Sync(ctx, faas.ToDevice, 0, buf.Size()); err != nil {
		log.Fatal(err)
	}
	// … run jobs that write the buffer …
	if err := buf.Sync(ctx, faas.FromDevice, 0, buf.Size()); err != nil {
		log.Fatal(err)
	}
	fmt.Println(host[:4])
}

// Keep many jobs in flight and collect them in order.
func ExampleQueue_Submit() {
	ctx := context.Background()
	c, err := faas.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Open(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	prog, err := dev.Program(ctx, []isa.Insn{{Op: isa.OpFinish, JobID: 1}})
	if err != nil {
		log.Fatal(err)
	}
	var jobs []*faas.Job
	for range 1000 {
		j, err := dev.Queue().Submit(ctx, prog) // blocks while the rings are full
		if err != nil {
			log.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	for _, j := range jobs {
		if _, err := j.Wait(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(len(jobs), "jobs done")
}
