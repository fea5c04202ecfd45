package host

import (
	"encoding/json"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/bulk"
)

// request builds an export's request JSON by hand. The state and the
// messages are already valid JSON, and encoding/json would scan every
// byte of them again to check that; for a history kept in the state that
// scan would cost more than the call.
type request struct{ b []byte }

func newRequest(size int) *request {
	r := &request{b: make([]byte, 0, size+128)}
	r.b = append(r.b, '{')
	return r
}

func (r *request) key(k string) {
	if len(r.b) > 1 {
		r.b = append(r.b, ',')
	}
	r.b = strconv.AppendQuote(r.b, k)
	r.b = append(r.b, ':')
}

// raw adds a field whose value is trusted JSON; an empty value is omitted.
func (r *request) raw(k string, v json.RawMessage) {
	if len(v) == 0 {
		return
	}
	r.key(k)
	r.b = bulk.Append(r.b, v)
}

func (r *request) array(k string, vs []json.RawMessage) {
	r.key(k)
	r.b = append(r.b, '[')
	for i, v := range vs {
		if i > 0 {
			r.b = append(r.b, ',')
		}
		r.b = bulk.Append(r.b, v)
	}
	r.b = append(r.b, ']')
}

func (r *request) value(k string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only host-built values of fixed types reach here.
		panic("host: encoding request field " + k + ": " + err.Error())
	}
	r.raw(k, b)
}

func (r *request) bytes() []byte { return append(r.b, '}') }

func rawSize(vs ...[]json.RawMessage) int {
	n := 0
	for _, l := range vs {
		for _, v := range l {
			n += len(v) + 1
		}
	}
	return n
}

// common adds the fields every state-carrying request has.
// stateSize is how many bytes the state adds to an export's request: none
// when the plugin asked for the state to be left out, which is the point of
// omit_state for a history kept in the state.
func (p *Plugin) stateSize(export string, state json.RawMessage) int {
	if p.omitState[export] {
		return 0
	}
	return len(state)
}

func (p *Plugin) common(r *request, export string, facts abi.SessionFacts, state json.RawMessage) {
	if !p.omitState[export] {
		r.raw("state", state)
	}
	r.raw("config", p.config)
	r.value("session", facts)
}
