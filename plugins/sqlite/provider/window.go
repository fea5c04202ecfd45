package provider

import (
	"encoding/json"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// stored is one selected message with its header columns.
type stored struct {
	seq            int64
	size           int // the body's length in bytes, as stored
	role           string
	calls, results []string
	body           json.RawMessage
}

// readWindow takes selectWindow's document apart: its headers, ordered by
// seq (the system message possibly twice), and the array of their bodies,
// which it slices by the stored lengths without scanning them. A body the
// host's compaction shortened (a message stored with white space, by an
// older plugin or another writer) moves every later boundary, so the
// slices are used only when they end exactly where the array does, the
// host's compaction only ever removing bytes; otherwise the array is split
// by scanning it. Duplicates are dropped once the bodies are assigned.
func readWindow(doc json.RawMessage) ([]stored, error) {
	if doc == nil {
		return nil, nil // no message
	}
	if len(doc) < 2 || doc[0] != '[' || doc[len(doc)-1] != ']' {
		return nil, abi.Errorf(abi.CodeInternal, "sqlite: window: not an array")
	}
	d := guestjson.NewDecoder(doc[1 : len(doc)-1])
	var w []stored
	err := d.Array(func() error {
		var m stored
		i := 0
		err := d.Array(func() (err error) {
			switch i {
			case 0:
				m.seq, err = d.ReadInt64()
			case 1:
				m.size, err = d.ReadInt()
			case 2:
				m.role, err = d.ReadString()
			case 3:
				m.calls, err = ids(&d)
			case 4:
				m.results, err = ids(&d)
			default:
				err = d.Fail("a header has more than five values")
			}
			i++
			return err
		})
		w = append(w, m)
		return err
	})
	if err == nil && d.Peek() != ',' {
		err = d.Fail("want the bodies after the headers")
	}
	if err != nil {
		return nil, abi.Errorf(abi.CodeInternal, "sqlite: window: %v", err)
	}
	bodies := doc[1+d.Offset()+1 : len(doc)-1]
	if !slice(bodies, w) {
		if err := split(bodies, w); err != nil {
			return nil, abi.Errorf(abi.CodeInternal, "sqlite: window: %v", err)
		}
	}
	out := w[:0]
	for _, m := range w {
		if n := len(out); n > 0 && out[n-1].seq == m.seq {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// slice assigns each message its body from the array bodies by the stored
// lengths, and reports whether they account for the array exactly.
func slice(bodies []byte, w []stored) bool {
	pos := 1
	for i := range w {
		end := pos + w[i].size
		if w[i].size <= 0 || end >= len(bodies) {
			return false
		}
		if sep := bodies[end]; sep != ',' && (sep != ']' || i != len(w)-1) {
			return false
		}
		w[i].body = bodies[pos:end:end]
		pos = end + 1
	}
	return len(bodies) > 0 && bodies[0] == '[' && pos == len(bodies)
}

// split assigns each message its body by scanning the array bodies.
func split(bodies []byte, w []stored) error {
	d := guestjson.NewDecoder(bodies)
	i := 0
	err := d.Array(func() error {
		v, err := d.ReadValue()
		if err == nil && i >= len(w) {
			err = d.Fail("more bodies than headers")
		}
		if err == nil {
			w[i].body = v
		}
		i++
		return err
	})
	if err == nil && i != len(w) {
		err = d.Fail("fewer bodies than headers")
	}
	return err
}

// ids reads a list of call ids: a JSON array of strings, or null.
func ids(d *guestjson.Decoder) ([]string, error) {
	if d.Peek() == 'n' {
		return nil, d.ReadNull()
	}
	var list []string
	err := d.Array(func() error {
		id, err := d.ReadString()
		list = append(list, id)
		return err
	})
	return list, err
}

// trim bounds the window to max messages, keeping a leading system message,
// and drops tool results at its start whose calls fell outside it: a tool
// call is never returned without its results, nor results without their
// call.
func trim(w []stored, max int) []stored {
	var sys []stored
	if len(w) > 0 && w[0].role == "system" {
		sys, w = w[:1], w[1:]
		max--
	}
	if len(w) > max {
		w = w[len(w)-max:]
	}
	called := map[string]bool{}
	for _, m := range w {
		for _, id := range m.calls {
			called[id] = true
		}
	}
	for len(w) > 0 && len(w[0].results) > 0 && !slices.ContainsFunc(w[0].results, func(id string) bool { return called[id] }) {
		w = w[1:]
	}
	return append(sys, w...)
}
