package faas_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
)

// Load an image into slot 0 of this host's faasd, printing each phase as it
// starts, and tell a refused signature from other failures.
func Example() {
	ctx := context.Background()
	c, err := faas.Dial(ctx, "", faas.WithToken(os.Getenv("FAAS_TOKEN"))) // $FAAS_AGENT or /run/faas/faasd.sock
	if err != nil {
		log.Fatal(err) // faasd is not running at /run/faas/faasd.sock: …
	}
	defer c.Close()

	phase := ""
	l, err := c.Load(ctx, "registry.example/acme/aes:1.2", faas.OnSlot(0),
		faas.WithProgress(func(ev agentapi.Event) {
			if ev.Phase != "" && ev.Phase != phase {
				phase = ev.Phase
				fmt.Println(phase)
			}
		}))
	switch {
	case errors.Is(err, faas.ErrSignature):
		log.Fatalf("refused: %v (%s)", err, faas.Hint(err))
	case err != nil:
		log.Fatal(err)
	}
	fmt.Printf("%s loaded into slots %v\n", l.Image.Digest, l.Slots)
}
