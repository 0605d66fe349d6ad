package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

// A tenant's session on a slot with the AliDNN engine, against a real
// agent over a simulated board: the SDK calls of sdk/faas's examples, run
// and checked. The agent here takes tenant tokens "tok-<name>".
func Example_session() {
	env := &exampleTB{}
	defer env.done()
	agent := startSessAgent(env, sessOptions{})
	ctx := context.Background()

	c, err := faas.Dial(ctx, agent.socket, faas.WithToken(tenantToken("alice")))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Open(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	fmt.Println("tenant:", dev.Tenant(), "shared memory:", dev.Local())

	buf, err := dev.Alloc(ctx, 4096)
	if err != nil {
		log.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 4096)
	if err := buf.Write(ctx, data, 0); err != nil {
		log.Fatal(err)
	}
	prog, err := dev.Program(ctx, []isa.Insn{
		{Op: isa.OpLoad, Mem: isa.MemInp, DType: isa.Int8, DRAM: buf.Addr(), YSize: 1, XSize: 1, XStride: 1},
		{Op: isa.OpFinish, JobID: 42},
	})
	if err != nil {
		log.Fatal(err)
	}
	job, err := dev.Queue().Submit(ctx, prog)
	if err != nil {
		log.Fatal(err)
	}
	st, err := job.Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job %d: %d instructions, FINISH %d\n", job.ID(), st.Insns, st.JobID)

	back := make([]byte, 4096)
	if err := buf.Read(ctx, back, 0); err != nil {
		log.Fatal(err)
	}
	fmt.Println("read back intact:", bytes.Equal(back, data))
	// Output:
	// tenant: alice shared memory: true
	// job 1: 2 instructions, FINISH 42
	// read back intact: true
}
