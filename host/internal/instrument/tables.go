package instrument

import (
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// MaxTableEntries is the most entries a table of a module may ever have:
// 8 MiB of the host's memory, at 8 bytes an entry.
const MaxTableEntries = 1 << 20

// sectionTable is the table section's id.
const sectionTable = 4

// BoundTables returns wasm with a maximum of at most MaxTableEntries on
// every table it defines (a table without a maximum gets that one), or
// wasm itself when every table has one already. It fails for a table whose
// minimum is larger, and with ErrUnsupported or wasmbin.ErrMalformed for a
// table section it cannot read.
//
// The runtime keeps a table in the host's memory, outside the guest's
// linear memory and its limit, and grows it on table.grow up to the table's
// maximum or four billion entries: a guest could take the host's memory
// (a test of one grow of 2^30 entries left the host with 8.4 GB resident).
// With a maximum, a grow past it fails in the guest as a memory.grow past
// the memory limit does. A Go module's one table has no maximum and never
// grows.
func BoundTables(wasm []byte) ([]byte, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(wasm)+8), wasmbin.Header...)
	changed := false
	for _, s := range secs {
		body := s.Body
		if s.ID == sectionTable {
			if body, err = boundTables(body); err != nil {
				return nil, err
			}
			changed = true
		}
		out = append(out, s.ID)
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if !changed {
		return wasm, nil
	}
	return out, nil
}

// boundTables returns a table section body with every maximum at most
// MaxTableEntries.
func boundTables(body []byte) ([]byte, error) {
	r := &wasmbin.Reader{B: body}
	n := r.U32()
	out := wasmbin.AppendU32(make([]byte, 0, len(body)+8), n)
	for i := uint32(0); i < n && r.Err == nil; i++ {
		ref, flags, low := r.Byte(), r.Byte(), r.U32()
		high := uint32(MaxTableEntries)
		switch flags {
		case 0x00:
		case 0x01:
			// A maximum under the minimum stays, for the runtime to refuse.
			if high = r.U32(); high >= low {
				high = min(high, MaxTableEntries)
			}
		default: // shared, or 64-bit indexes
			return nil, fmt.Errorf("%w: table %d: limits flags %#x", ErrUnsupported, i, flags)
		}
		if r.Err != nil {
			break
		}
		if low > MaxTableEntries {
			return nil, fmt.Errorf("%w: table %d has %d entries; a table may have at most %d", ErrTableTooLarge, i, low, MaxTableEntries)
		}
		out = append(out, ref, 0x01)
		out = wasmbin.AppendU32(out, low)
		out = wasmbin.AppendU32(out, high)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: table section: %v", wasmbin.ErrMalformed, r.Err)
	}
	if r.Off != len(body) {
		return nil, fmt.Errorf("%w: table section: %d bytes after its tables", wasmbin.ErrMalformed, len(body)-r.Off)
	}
	return out, nil
}

// ErrTableTooLarge: a table's minimum is over MaxTableEntries.
var ErrTableTooLarge = errors.New("table too large")
