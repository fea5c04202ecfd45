package sql

import (
	"encoding/json"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// decodeResponse decodes an abi.SQLResponse. encoding/json runs at about
// 1 MB/s in a preemptible WebAssembly guest, and a provide's rows are ten
// kilobytes and more, so the rows are split with the guest side's scanner
// (internal/guestjson), which checks each value and slices it out without
// decoding it. Field names are exact, as the host writes them; a member of
// another name is skipped, a repeated one replaces the earlier.
func decodeResponse(b []byte) (abi.SQLResponse, error) {
	var resp abi.SQLResponse
	d := guestjson.NewDecoder(b)
	err := d.Object(func(key []byte) error {
		if string(key) == "dialect" {
			resp.Dialect = ""
			if d.Peek() == 'n' {
				return d.ReadNull()
			}
			s, err := d.ReadString()
			resp.Dialect = s
			return err
		}
		if string(key) != "results" {
			return d.Skip()
		}
		resp.Results = nil
		if d.Peek() == 'n' {
			return d.ReadNull()
		}
		resp.Results = []abi.SQLResult{}
		return d.Array(func() error {
			r, err := decodeResult(&d)
			resp.Results = append(resp.Results, r)
			return err
		})
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return abi.SQLResponse{}, err
	}
	return resp, nil
}

func decodeResult(d *guestjson.Decoder) (abi.SQLResult, error) {
	var r abi.SQLResult
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "columns":
			r.Columns = nil
			err = d.Array(func() error {
				name, err := d.ReadString()
				r.Columns = append(r.Columns, name)
				return err
			})
		case "rows":
			r.Rows = nil
			err = d.Array(func() error {
				if d.Peek() == 'n' {
					r.Rows = append(r.Rows, nil)
					return d.ReadNull()
				}
				row := make([]json.RawMessage, 0, len(r.Columns))
				err := d.Array(func() error {
					v, err := d.ReadValue()
					row = append(row, v)
					return err
				})
				r.Rows = append(r.Rows, row)
				return err
			})
		case "rows_affected":
			r.RowsAffected, err = d.ReadInt64()
		case "last_insert_id":
			r.LastInsertID, err = d.ReadInt64()
		default:
			err = d.Skip()
		}
		return err
	})
	return r, err
}
