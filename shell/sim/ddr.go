package sim

import "sync"

// pageSize is the allocation unit of simulated DDR. 1 MiB keeps the page
// table of a 16 GiB DDR at 128 KiB while bulk DMA copies stay long.
const pageSize = 1 << 20

// ddr is a sparse byte-addressable memory: only pages that were written cost
// host memory; the rest read as zero. Callers check bounds.
type ddr struct {
	mu    sync.RWMutex
	size  uint64
	pages []*[pageSize]byte
}

func newDDR(size uint64) *ddr {
	return &ddr{size: size, pages: make([]*[pageSize]byte, (size+pageSize-1)/pageSize)}
}

// ReadAt copies DDR at addr into p; unwritten pages read as zero.
func (d *ddr) ReadAt(p []byte, addr uint64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for len(p) > 0 {
		pg, off := addr/pageSize, addr%pageSize
		n := min(uint64(len(p)), pageSize-off)
		if page := d.pages[pg]; page != nil {
			copy(p[:n], page[off:])
		} else {
			clear(p[:n])
		}
		p, addr = p[n:], addr+n
	}
}

// WriteAt copies p into DDR at addr, allocating pages as needed.
func (d *ddr) WriteAt(p []byte, addr uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(p) > 0 {
		pg, off := addr/pageSize, addr%pageSize
		n := min(uint64(len(p)), pageSize-off)
		page := d.pages[pg]
		if page == nil {
			page = new([pageSize]byte)
			d.pages[pg] = page
		}
		copy(page[off:], p[:n])
		p, addr = p[n:], addr+n
	}
}

// Zero drops every page: the whole DDR reads as zero again.
func (d *ddr) Zero() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.pages)
}

// Resident is the host memory the DDR holds, in bytes.
func (d *ddr) Resident() uint64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var n uint64
	for _, p := range d.pages {
		if p != nil {
			n += pageSize
		}
	}
	return n
}
