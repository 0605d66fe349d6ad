// Package demo brings the whole platform up on one machine, as separate
// processes, and walks through it the way its users would: a throwaway
// PostgreSQL cluster, the registry (directory blob store), faasd on two
// simulated dual-chip boards; the ISV "acme" publishes the reference images
// with hdk, the tenant "alice" subscribes, loads the AliDNN image with
// `faas load` and classifies the MNIST reference digits on it with the
// examples/mnist program, through the SDK and the agent; and the model
// server (services/modelserver) serves MNIST on the same accelerator, a
// digit classified through it with curl; and examples/ocr, on a host
// without faasd, attaches an accelerator from the pool and reads a page it
// renders with PP-OCR's models.
//
// The recipe — commands, flags, API calls and their order — is the
// end-to-end test's (internal/e2e). Run prints each step as it goes; unless
// told not to wait, it then leaves the services running and prints how to
// reach them until its context ends (Ctrl-C), and stops them in reverse
// order.
package demo
