module github.com/fpga-faas/faas

go 1.26
