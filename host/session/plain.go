package session

import (
	"errors"
	"math"

	"github.com/wasmhist/wasmhist/host/internal/schema"
	"github.com/wasmhist/wasmhist/internal/guestjson"
)

// errNotPlain stops plainSession at what it leaves to the schema.
var errNotPlain = errors.New("not a plain session")

// plainSession reports whether doc is a session of the shape a turn
// commits, which schemas/session.json accepts without a doubt: one object
// with schema_version 1 (written so), the strings session_id and
// service_session_id, revision, state, recent_runs and provenance, each
// member once and each as the schema wants it. Anything else, and anything
// it is unsure of (pending_tool_calls, last_run_id, compactions, a
// duplicate key, a string longer in bytes than a maxLength in characters),
// it leaves to the schema (false): FuzzPlainSession checks that the schema
// accepts whatever it accepts.
//
// A turn commits a session whose bytes are new (its revision and runs
// change), and the schema library allocated about 280 objects a turn to
// accept it; this one pass allocates none.
func plainSession(doc []byte) bool {
	d := guestjson.NewDecoder(doc)
	if d.Peek() != '{' {
		return false
	}
	var seen guestjson.Members
	err := d.Object(func(key []byte) error {
		switch string(key) {
		case "schema_version":
			if !seen.Take(&d, 1, '1') {
				return errNotPlain
			}
			if !d.SkipIf([]byte("1")) {
				return errNotPlain
			}
			return nil
		case "session_id":
			if !seen.Take(&d, 2, '"') {
				return errNotPlain
			}
			return d.Skip()
		case "revision":
			if !seen.Take(&d, 4, 0) {
				return errNotPlain
			}
			return readIntIn(&d, 0, MaxRevision)
		case "service_session_id":
			if !seen.Take(&d, 8, '"') {
				return errNotPlain
			}
			return d.Skip()
		case "state":
			if !seen.Take(&d, 16, '{') {
				return errNotPlain
			}
			return plainMap(&d, false)
		case "recent_runs":
			if !seen.Take(&d, 32, '[') {
				return errNotPlain
			}
			n := 0
			return d.Array(func() error {
				if n++; n > 64 {
					return errNotPlain
				}
				return plainRunRecord(&d)
			})
		case "provenance":
			if !seen.Take(&d, 64, '{') {
				return errNotPlain
			}
			return plainMap(&d, true)
		}
		return errNotPlain
	})
	return err == nil && d.End() == nil && seen&7 == 7
}

// readIntIn reads an integer written as one (no fraction, no exponent)
// within [lo, hi].
func readIntIn(d *guestjson.Decoder, lo, hi int64) error {
	if c := d.Peek(); c != '-' && (c < '0' || c > '9') {
		return errNotPlain
	}
	n, err := d.ReadInt64()
	if err != nil || n < lo || n > hi {
		return errNotPlain
	}
	return nil
}

// plainString reads a string of at least min characters and at most max,
// by its bytes as written: an escape is never shorter than what it
// decodes to, and a byte of invalid UTF-8 decodes to one character, so the
// written length bounds the characters from above; only an empty string is
// written "" (without allocating, unlike ReadString).
func plainString(d *guestjson.Decoder, min, max int) error {
	s, err := rawString(d)
	if err != nil || len(s) < min || len(s) > max {
		return errNotPlain
	}
	return nil
}

// rawString reads a string and returns it as written, between its quotes.
func rawString(d *guestjson.Decoder) ([]byte, error) {
	if d.Peek() != '"' {
		return nil, errNotPlain
	}
	v, err := d.ReadValue()
	if err != nil || len(v) < 2 {
		return nil, errNotPlain
	}
	return v[1 : len(v)-1], nil
}

// plainMap reads an object whose keys are non-empty and distinct, each
// value a provenance entry or, without provenance set, a slot's state.
// (A function value to read them would move the Decoder to the heap.)
func plainMap(d *guestjson.Decoder, provenance bool) error {
	var keys [8][]byte // each aliases the document or is a copy of its own
	n := 0
	return d.Object(func(key []byte) error {
		if len(key) == 0 || n == len(keys) {
			return errNotPlain
		}
		for _, k := range keys[:n] {
			if string(k) == string(key) {
				return errNotPlain
			}
		}
		keys[n] = key
		n++
		if provenance {
			return plainProvenance(d)
		}
		return plainProviderState(d)
	})
}

// members reads an object whose members are each read by one of read, by
// name, at most once, and which has every member whose bit is in required.
func members(d *guestjson.Decoder, required uint8, names []string, read func(i int) error) error {
	if d.Peek() != '{' {
		return errNotPlain
	}
	var seen uint8
	err := d.Object(func(key []byte) error {
		for i, name := range names {
			if string(key) == name {
				if seen&(1<<i) != 0 {
					return errNotPlain
				}
				seen |= 1 << i
				return read(i)
			}
		}
		return errNotPlain
	})
	if err != nil || seen&required != required {
		return errNotPlain
	}
	return nil
}

var providerStateNames = []string{"provider", "state_version", "data"}

func plainProviderState(d *guestjson.Decoder) error {
	return members(d, 7, providerStateNames, func(i int) error {
		switch i {
		case 0:
			return plainString(d, 1, math.MaxInt)
		case 1:
			return readIntIn(d, 0, math.MaxInt32)
		}
		return d.Skip()
	})
}

var runRecordNames = []string{"run_id", "input_sha256", "revision", "partial", "reply", "reply_dropped"}

func plainRunRecord(d *guestjson.Decoder) error {
	dropped := false
	var seen uint8
	err := members(d, 7, runRecordNames, func(i int) error {
		seen |= 1 << i
		switch i {
		case 0:
			return plainString(d, 1, 256)
		case 1:
			return plainDigest(d, true)
		case 2:
			return readIntIn(d, 1, math.MaxInt64)
		case 3:
			return plainBool(d, nil)
		case 4:
			if d.Peek() != '[' {
				return errNotPlain
			}
			return d.Array(func() error {
				if d.Peek() != '{' {
					return errNotPlain
				}
				return d.Skip()
			})
		}
		return plainBool(d, &dropped)
	})
	if err != nil || seen&(1<<4) != 0 && dropped {
		return errNotPlain
	}
	return nil
}

var provenanceNames = []string{"plugin", "version", "sha256", "storage", "session", "revision"}

func plainProvenance(d *guestjson.Decoder) error {
	return members(d, 1, provenanceNames, func(i int) error {
		switch i {
		case 0, 3, 4:
			return plainString(d, 1, math.MaxInt)
		case 1:
			return plainString(d, 0, math.MaxInt)
		case 2:
			return plainDigest(d, false)
		}
		return readIntIn(d, 1, math.MaxInt64)
	})
}

// plainDigest reads a hex sha256 in lower case, or with empty set an
// empty string too, written without escapes.
func plainDigest(d *guestjson.Decoder, empty bool) error {
	s, err := rawString(d)
	if err != nil || !(empty && len(s) == 0 || schema.IsSHA256Hex(s)) {
		return errNotPlain
	}
	return nil
}

func plainBool(d *guestjson.Decoder, v *bool) error {
	switch {
	case d.SkipIf([]byte("true")):
		if v != nil {
			*v = true
		}
	case d.SkipIf([]byte("false")):
	default:
		return errNotPlain
	}
	return nil
}
