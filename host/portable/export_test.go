package portable

// PeakReadAhead is the most bytes the Reader's decoder held ahead of what
// it had consumed: what it buffers, bounded by Limits.
func (r *Reader) PeakReadAhead() int64 { return r.win.peak }
