package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

func asmCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "asm FILE.s -o FILE.bin",
		Short: "Assemble AliDNN instructions from text into a binary program (16 bytes each)",
		Long:  "asm assembles the text form of bitstreams/alidnn/isa/ISA.md. Errors name the line and column; exit code 1.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			prog, err := isa.Assemble(string(src))
			if err != nil {
				return fmt.Errorf("%w: %s: %w", errCheck, args[0], err)
			}
			bin, err := isa.EncodeProgram(prog)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", errCheck, args[0], err)
			}
			if err := os.WriteFile(out, bin, 0o644); err != nil {
				return err
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"instructions": len(prog), "bytes": len(bin), "output": out})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d instructions, %d bytes\n", out, len(prog), len(bin))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "binary program to write")
	cmd.MarkFlagRequired("output")
	return cmd
}

func disasmCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "disasm FILE.bin",
		Short: "Print a binary AliDNN program in the assembler's text form",
		Long:  "disasm decodes a binary program; an illegal instruction is an error naming its index and byte offset (exit code 1).",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bin, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			prog, err := isa.DecodeProgram(bin)
			if err != nil {
				return fmt.Errorf("%w: %s: %w", errCheck, args[0], err)
			}
			fmt.Fprint(cmd.OutOrStdout(), isa.Disassemble(prog))
			return nil
		},
	}
}
