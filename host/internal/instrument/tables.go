package instrument

import (
	"errors"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
)

// MaxTableEntries is the most entries the tables of a module may ever have
// in all: 8 MiB of the host's memory, at 8 bytes an entry.
const MaxTableEntries = 1 << 20

// BoundTables returns wasm with a maximum on every table it defines, so
// that the tables together can never hold more than MaxTableEntries: each
// may grow by an equal share of what the minimums leave, or less if it
// declares a smaller maximum. It returns wasm itself when it has no table
// section. It fails with ErrTableTooLarge when the minimums alone add up to
// more, and with ErrUnsupported or wasmbin.ErrMalformed for a table section
// it cannot read.
//
// The runtime keeps a table in the host's memory, outside the guest's
// linear memory and its limit, and grows it on table.grow up to the table's
// maximum or four billion entries: a guest could take the host's memory
// (a test of one grow of 2^30 entries left the host with 8.4 GB resident).
// With a maximum, a grow past it fails in the guest as a memory.grow past
// the memory limit does. A module may define many tables, so the bound is
// on all of them. A Go module's one table has no maximum and never grows.
func BoundTables(wasm []byte) ([]byte, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(wasm)+8), wasmbin.Header...)
	changed := false
	for _, s := range secs {
		body := s.Body
		if s.ID == wasmbin.SectionTable {
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

// boundTables returns a table section body whose maximums add up to at
// most MaxTableEntries.
func boundTables(body []byte) ([]byte, error) {
	type table struct {
		ref       byte
		low, high uint32
		hasMax    bool
	}
	r := &wasmbin.Reader{B: body}
	n := r.U32()
	if uint64(n) > uint64(len(body)) {
		return nil, fmt.Errorf("%w: table section: %d tables in %d bytes", wasmbin.ErrMalformed, n, len(body))
	}
	tables := make([]table, 0, n)
	var lows uint64
	for i := uint32(0); i < n && r.Err == nil; i++ {
		t := table{ref: r.Byte()}
		flags := r.Byte()
		t.low = r.U32()
		switch flags {
		case 0x00:
		case 0x01:
			t.high, t.hasMax = r.U32(), true
		default:
			return nil, fmt.Errorf("%w: table %d has limits flags %#x (shared, or 64-bit indexes), which the runtime does not run", ErrUnsupported, i, flags)
		}
		tables = append(tables, t)
		lows += uint64(t.low)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("%w: table section: %v", wasmbin.ErrMalformed, r.Err)
	}
	if r.Off != len(body) {
		return nil, fmt.Errorf("%w: table section: %d bytes after its tables", wasmbin.ErrMalformed, len(body)-r.Off)
	}
	if lows > MaxTableEntries {
		return nil, fmt.Errorf("%w: the module's tables start with %d entries; its tables may have at most %d in all", ErrTableTooLarge, lows, MaxTableEntries)
	}
	share := uint32(0)
	if n > 0 {
		share = uint32((MaxTableEntries - lows) / uint64(n))
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(body)+8*len(tables)), n)
	for _, t := range tables {
		high := t.low + share
		// A maximum under the minimum stays, for the runtime to refuse.
		if t.hasMax && (t.high < high || t.high < t.low) {
			high = t.high
		}
		out = append(out, t.ref, 0x01)
		out = wasmbin.AppendU32(out, t.low)
		out = wasmbin.AppendU32(out, high)
	}
	return out, nil
}

// ErrTableTooLarge: a module's tables start with more than MaxTableEntries
// entries in all.
var ErrTableTooLarge = errors.New("table too large")
