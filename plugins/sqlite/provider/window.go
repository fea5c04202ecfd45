package provider

import (
	"encoding/json"
	"slices"

	"github.com/wasmhist/wasmhist/sdk/sql"
)

// stored is one selected message with its header columns.
type stored struct {
	seq            int64
	role           string
	calls, results []string
	body           json.RawMessage
}

// scanWindow reads selectNewest's rows: ordered by seq, the system message
// possibly twice.
func scanWindow(rows *sql.Rows) ([]stored, error) {
	out := make([]stored, 0, rows.Len())
	for i := range rows.Len() {
		var m stored
		var calls, results []byte // NULL (nil) for a message without tool calls or results
		if err := rows.Row(i).Scan(&m.seq, &m.role, &calls, &results, &m.body); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].seq == m.seq {
			continue
		}
		if err := ids(calls, &m.calls); err != nil {
			return nil, err
		}
		if err := ids(results, &m.results); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func ids(list []byte, dst *[]string) error {
	if list == nil {
		return nil
	}
	return json.Unmarshal(list, dst)
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
