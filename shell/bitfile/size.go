package bitfile

// FileSize returns the size of the whole file, header and configuration
// data, once the header has been received. The PR controller uses it to tell
// the end of the file from the alignment padding of the last DMA chunk.
func (p *Parser) FileSize() (int64, bool) {
	if !p.hd.done() {
		return 0, false
	}
	return p.dataEnd, true
}
