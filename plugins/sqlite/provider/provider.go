// Package provider is the logic of the sqlite plugin: a history provider
// that keeps messages in the database the host grants it (SQLite, or a
// PostgreSQL schema: its SQL runs on both, DDL chosen by the dialect the
// host names), keyed by a
// random session key that lives in the session's state, {"session_key": ...}.
//
// The state carries only that key, so sessions stay small however long the
// history grows, and two providers of one plugin (a primary and an audit
// copy) get different keys and never see each other's rows. The key is
// created on the first store and returned as a state change; provide on a
// state without a key returns nothing and touches no database.
//
// Each message is stored verbatim, with a per-session sequence number, its
// role and the call ids of its tool calls and results in columns, so that
// provide can select the newest messages through the (session, seq) index
// and keep tool calls with their results without decoding any message.
package provider

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sql"
)

// Name is the plugin's name in PluginInfo and in session state slots.
const Name = "sqlite"

// Version is the plugin's own version.
const Version = "0.1.0"

// StateVersion is the version of the state layout {"session_key": ...}.
const StateVersion = 1

// DefaultMaxMessages is how many messages provide returns when the config
// names no bound.
const DefaultMaxMessages = 50

// DefaultPageSize is how many messages list returns when the host names no
// limit.
const DefaultPageSize = 100

// Config is the operator's configuration of the plugin.
type Config struct {
	// MaxMessages bounds how many messages provide returns (default 50).
	MaxMessages int `json:"max_messages,omitempty"`
}

// State is the plugin's session state.
type State struct {
	// SessionKey names the session's rows; empty until the first store.
	SessionKey string `json:"session_key,omitempty"`
}

var (
	stateSchema = json.RawMessage(`{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"title": "sqlite plugin state",
	"type": "object",
	"properties": {
		"session_key": {"type": "string", "pattern": "^[0-9a-f]{32}$"}
	},
	"additionalProperties": false
}`)
	configSchema = json.RawMessage(`{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"title": "sqlite plugin config",
	"type": "object",
	"properties": {
		"max_messages": {"type": "integer", "minimum": 1}
	},
	"additionalProperties": false
}`)
)

// Provider is the sqlite history provider. Its zero value is ready to use.
type Provider struct{}

var (
	_ sdk.Provider = Provider{}
	_ sdk.Lister   = Provider{}
	_ sdk.Clearer  = Provider{}
)

// Describe implements sdk.Provider.
func (Provider) Describe() abi.PluginInfo {
	return abi.PluginInfo{
		Name:         Name,
		Version:      Version,
		ABI:          abi.Version,
		StateVersion: StateVersion,
		StateSchema:  stateSchema,
		InitialState: json.RawMessage(`{}`),
		ConfigSchema: configSchema,
		Capabilities: []abi.Capability{abi.CapabilitySQL},
	}
}

// Provide implements sdk.Provider: the newest messages of the session, at
// most max_messages, oldest first, with the session's leading system message
// kept and no tool result whose call fell outside the window.
func (Provider) Provide(_ context.Context, req *abi.ProvideRequest) (*abi.ProvideResponse, error) {
	st, cfg, err := decode(req.State, req.Config)
	if err != nil || st.SessionKey == "" {
		return &abi.ProvideResponse{}, err
	}
	rows, err := withSchema(func(d string) (*sql.Rows, error) {
		var b sql.Batch
		b.QueryJSONValue(sql.Rebind(d, selectWindow), st.SessionKey, cfg.MaxMessages)
		res, err := b.Run()
		if err != nil {
			return nil, err
		}
		return res[0].Rows, nil
	})
	if err != nil {
		return nil, sdk.Wrap("sqlite: provide", err)
	}
	var doc json.RawMessage
	if err := rows.Row(0).Scan(&doc); err != nil {
		return nil, sdk.Wrap("sqlite: provide", err)
	}
	window, err := readWindow(doc, cfg.MaxMessages+1)
	if err != nil {
		return nil, sdk.Wrap("sqlite: provide", err)
	}
	window = trim(window, cfg.MaxMessages)
	resp := &abi.ProvideResponse{Messages: make([]json.RawMessage, len(window))}
	for i, m := range window {
		resp.Messages[i] = m.body
	}
	return resp, nil
}

// Store implements sdk.Provider: the request messages, then the response
// messages, appended with the next sequence numbers, in one request.
func (Provider) Store(_ context.Context, req *abi.StoreRequest) (*abi.StoreResponse, error) {
	st, _, err := decode(req.State, req.Config)
	if err != nil {
		return nil, err
	}
	msgs := slices.Concat(req.RequestMessages, req.ResponseMessages)
	resp := &abi.StoreResponse{}
	if len(msgs) == 0 {
		return resp, nil
	}
	if st.SessionKey == "" {
		if st.SessionKey, err = newKey(req.Session); err != nil {
			return nil, err
		}
		// The key is hexadecimal: nothing to escape.
		resp.State = json.RawMessage(`{"session_key":"` + st.SessionKey + `"}`)
	}
	headers := make([]header, len(msgs))
	for i, raw := range msgs {
		if headers[i], err = headerOf(raw); err != nil {
			return nil, err
		}
	}
	// The key is put in an interface once, and a role known by name is a
	// constant's: each conversion of another string allocates, which in a
	// WebAssembly guest costs thousands of instructions.
	key := any(st.SessionKey)
	store := func(d string) (*sql.Rows, error) {
		var b sql.Batch
		// The counter moves first: a write, so the call holds the write
		// lock before anything reads, and the inserts below take their
		// numbers from it.
		b.Exec(sql.Rebind(d, bumpSequence), key, len(msgs))
		for start := 0; start < len(msgs); start += rowsPerInsert {
			end := min(start+rowsPerInsert, len(msgs))
			args := make([]any, 0, 1+5*(end-start))
			args = append(args, key)
			for i := start; i < end; i++ {
				h := headers[i]
				args = append(args, len(msgs)-i, roleArg(h.Role), h.calls, h.results, msgs[i])
			}
			b.Exec(sql.Rebind(d, insertRows(end-start)), args...)
		}
		_, err := b.Run()
		return nil, err
	}
	if _, err := withSchema(store); err != nil {
		return nil, sdk.Wrap("sqlite: store", err)
	}
	return resp, nil
}

// List implements sdk.Lister. The cursor is the sequence number of the
// last message of the previous page.
func (Provider) List(_ context.Context, req *abi.ListRequest) (*abi.ListResponse, error) {
	st, _, err := decode(req.State, req.Config)
	if err != nil {
		return nil, err
	}
	resp := &abi.ListResponse{Messages: []json.RawMessage{}}
	if st.SessionKey == "" {
		return resp, nil
	}
	after := int64(0)
	if req.Cursor != "" {
		if after, err = strconv.ParseInt(req.Cursor, 10, 64); err != nil || after < 0 {
			return nil, &abi.Error{Code: abi.CodeInvalidArgument, Message: "sqlite: list: cursor " + strconv.Quote(req.Cursor) + " is not a sequence number"}
		}
	}
	limit := req.Limit
	if limit <= 0 {
		limit = DefaultPageSize
	}
	// One more than the page, to know whether another page follows.
	rows, err := withSchema(func(d string) (*sql.Rows, error) {
		return sql.QueryJSON(bodyColumn, sql.Rebind(d, selectPage), st.SessionKey, after, limit+1)
	})
	if err != nil {
		return nil, sdk.Wrap("sqlite: list", err)
	}
	var seq int64
	for i := 0; i < rows.Len() && i < limit; i++ {
		var body json.RawMessage
		if err := rows.Row(i).Scan(&seq, &body); err != nil {
			return nil, sdk.Wrap("sqlite: list", err)
		}
		resp.Messages = append(resp.Messages, body)
	}
	if rows.Len() > limit {
		resp.NextCursor = strconv.FormatInt(seq, 10)
	}
	return resp, nil
}

// Clear implements sdk.Clearer: the session's rows are deleted; the key
// stays, so the state does not change.
func (Provider) Clear(_ context.Context, req *abi.ClearRequest) (*abi.ClearResponse, error) {
	st, _, err := decode(req.State, req.Config)
	if err != nil || st.SessionKey == "" {
		return &abi.ClearResponse{}, err
	}
	clear := func(d string) (*sql.Rows, error) {
		var b sql.Batch
		b.Exec(sql.Rebind(d, deleteSession), st.SessionKey)
		b.Exec(sql.Rebind(d, deleteMessages), st.SessionKey)
		_, err := b.Run()
		return nil, err
	}
	if _, err := withSchema(clear); err != nil {
		return nil, sdk.Wrap("sqlite: clear", err)
	}
	return &abi.ClearResponse{}, nil
}

// bodyColumn comes back as JSON, so a stored message crosses into the guest
// and back out without being unescaped or re-escaped.
var bodyColumn = []string{"body"}

// lastDecoded is the state and config decode last decoded, by their
// bytes: an instance serves calls one at a time, mostly of the same session
// and always with the same config, and comparing the bytes costs less than
// scanning them again.
var lastDecoded struct {
	state, config string
	st            State
	cfg           Config
}

func decode(state, config json.RawMessage) (State, Config, error) {
	if len(state) > 0 && string(state) == lastDecoded.state && string(config) == lastDecoded.config {
		return lastDecoded.st, lastDecoded.cfg, nil
	}
	st, err := parseState(state)
	if err != nil {
		return st, Config{}, err
	}
	cfg, err := parseConfig(config)
	if err != nil {
		return st, cfg, err
	}
	if cfg.MaxMessages < 0 {
		return st, cfg, sdk.Wrap("sqlite: config", abi.ErrInvalidArgument, errNotPositive)
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	if len(state) > 0 {
		lastDecoded.state, lastDecoded.config, lastDecoded.st, lastDecoded.cfg = string(state), string(config), st, cfg
	}
	return st, cfg, nil
}

var errNotPositive = errors.New("max_messages must be positive")

// The state and the config are read with the guest side's scanner
// (sdk.JSONDecoder) rather than with sdk.DecodeState and
// sdk.DecodeConfig, whose encoding/json would link its reflective codec
// into the plugin: it would be about 1.4 MB larger, and the host validates,
// and on a first use compiles, the whole module. Both are objects of one
// member; as with encoding/json, unknown members are ignored and null is
// the zero value.

// parseState decodes the state. An absent one is sdk.ErrStateOmitted, as
// sdk.DecodeState has it: the host sends the state to every export.
func parseState(raw json.RawMessage) (State, error) {
	var st State
	if len(raw) == 0 || string(raw) == "null" {
		return st, sdk.ErrStateOmitted
	}
	d := sdk.NewJSONDecoder(raw)
	err := d.Object(func(key []byte) (err error) {
		if string(key) != "session_key" {
			return d.Skip()
		}
		st.SessionKey, err = d.ReadStringAs(lastDecoded.st.SessionKey)
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return State{}, sdk.Wrap("sqlite: decode state", abi.ErrInvalidArgument, err)
	}
	return st, nil
}

// parseConfig decodes the config; an absent one is the zero Config.
func parseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if len(raw) == 0 || string(raw) == "null" {
		return cfg, nil
	}
	d := sdk.NewJSONDecoder(raw)
	err := d.Object(func(key []byte) (err error) {
		if string(key) != "max_messages" {
			return d.Skip()
		}
		cfg.MaxMessages, err = d.ReadInt()
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return Config{}, sdk.Wrap("sqlite: decode config", abi.ErrInvalidArgument, err)
	}
	return cfg, nil
}

// newKey returns a new session key: 128 bits of a hash of random bytes and
// the slot's session id and state key. The random source of a WebAssembly
// instance is whatever its host configured (wazero's default is a fixed
// seed, the same in every instance), so the slot's identity keeps keys of
// different slots apart even then.
func newKey(facts abi.SessionFacts) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", sdk.Wrap("sqlite: session key", err)
	}
	h := sha256.New()
	h.Write(b[:])
	h.Write([]byte(facts.SessionID))
	h.Write([]byte{0})
	h.Write([]byte(facts.StateKey))
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// roleArg returns role as a statement argument, without an allocation for
// the roles of ABI section 6.
func roleArg(role string) any {
	switch role {
	case string(abi.RoleUser):
		return string(abi.RoleUser)
	case string(abi.RoleAssistant):
		return string(abi.RoleAssistant)
	case string(abi.RoleSystem):
		return string(abi.RoleSystem)
	case string(abi.RoleTool):
		return string(abi.RoleTool)
	}
	return role
}

// header is the part of a message stored in columns: its role, and the
// call ids of its tool calls and results as JSON arrays (as TEXT), or nil.
type header struct {
	Role           string
	calls, results any
}

// headerOf reads a message's header with the guest side's scanner rather
// than encoding/json, which costs several times more in a WebAssembly
// guest. The ids are kept as the JSON strings the message holds them in.
func headerOf(raw json.RawMessage) (header, error) {
	var h header
	var calls, results []byte
	d := sdk.NewJSONDecoder(raw)
	err := d.Object(func(key []byte) (err error) {
		switch string(key) {
		case "role":
			h.Role, err = d.ReadString()
		case "contents":
			err = d.Array(func() error {
				var typ string
				var id []byte
				err := d.Object(func(key []byte) (err error) {
					switch string(key) {
					case "type":
						typ, err = d.ReadString()
					case "call_id":
						if d.Peek() != '"' {
							return d.Fail("call_id is not a string")
						}
						id, err = d.ReadValue()
					default:
						err = d.Skip()
					}
					return err
				})
				switch abi.ContentType(typ) {
				case abi.ContentFunctionCall:
					calls = appendID(calls, id)
				case abi.ContentFunctionResult:
					results = appendID(results, id)
				}
				return err
			})
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil {
		err = d.End()
	}
	if err != nil {
		return h, &abi.Error{Code: abi.CodeInvalidArgument, Message: "sqlite: store: message is not an object: " + err.Error()}
	}
	h.calls, h.results = idList(calls), idList(results)
	return h, nil
}

// appendID adds the JSON string id to the list being built in list, the
// ids without their closing bracket. A content without a call_id has the
// id "", as it had when headers were decoded with encoding/json.
func appendID(list, id []byte) []byte {
	if id == nil {
		id = []byte(`""`)
	}
	if list == nil {
		list = append(list, '[')
	} else {
		list = append(list, ',')
	}
	return append(list, id...)
}

func idList(list []byte) any {
	if list == nil {
		return nil
	}
	return string(append(list, ']'))
}
