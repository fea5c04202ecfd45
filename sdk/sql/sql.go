// Package sql is the plugin-side client of the host's sql capability
// (abi.CapabilitySQL): parameterised SQL against an SQLite database that the
// host owns and the operator chose for the plugin.
//
// Everything a plugin runs during one export call (provide, store, ...)
// belongs to one transaction, which the host commits when the call returns
// successfully and rolls back when it fails; a plugin never writes BEGIN or
// COMMIT (the host refuses them). Return an error from the export and
// nothing the call wrote is kept.
//
// A call that writes should write first, or use Exec first: the first
// request of a call that is an Exec (or a Batch holding one) takes the
// database's write lock up front. A call that only reads first and writes
// later may otherwise fail with abi.ErrUnavailable when another call wrote in
// between.
//
// The database is SQLite or PostgreSQL, as the operator granted it; Dialect
// says which, and Rebind turns the ?NNN parameters SQLite takes into the $N
// PostgreSQL takes, so one plugin can serve both (see plugins/sqlite).
//
// The plugin must list abi.CapabilitySQL in PluginInfo.Capabilities.
// Failures are errors wrapping an *abi.Error: abi.ErrPermissionDenied for a
// statement the host refuses (ATTACH, extensions, PRAGMAs outside a short
// list) or a plugin without the grant, abi.ErrResourceExhausted for a
// request over the host's row, byte or time limits, abi.ErrInvalidArgument
// for SQL errors, abi.ErrFailedPrecondition for constraint violations.
package sql

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// call reaches the host; tests replace it.
var call = func(request []byte) ([]byte, error) {
	return sdk.CallCapability(abi.SQLFunction, request)
}

// dialect is the host's answer in its latest response, "" before any.
var dialect string

// Dialect returns the SQL dialect of the database the operator granted:
// abi.DialectSQLite or abi.DialectPostgres. The host names it in every
// response and it does not change for a loaded plugin, so Dialect asks the
// host (with "SELECT 1", which every dialect runs) only when this instance
// has not had a response yet.
func Dialect() (string, error) {
	if dialect == "" {
		if _, err := Query("SELECT 1"); err != nil {
			return "", err
		}
	}
	return dialect, nil
}

// Rebind returns query with its parameters written for dialect: for
// abi.DialectPostgres, each ?NNN becomes $NNN and each bare ? becomes $N,
// N counting the parameters from 1; for SQLite the query is returned
// unchanged. Question marks inside quoted strings, quoted identifiers and
// comments are left alone. It is meant for a plugin's own constant SQL.
func Rebind(dialect, query string) string {
	if dialect != abi.DialectPostgres || !strings.Contains(query, "?") {
		return query
	}
	rebound.Lock()
	q, ok := rebound.m[query]
	rebound.Unlock()
	if ok {
		return q
	}
	q = rebindPostgres(query)
	if len(q) <= maxReboundBytes { // no shorter than query
		rebound.Lock()
		if len(rebound.m) < maxRebound {
			if rebound.m == nil {
				rebound.m = make(map[string]string)
			}
			rebound.m[query] = q
		}
		rebound.Unlock()
	}
	return q
}

// rebound keeps Rebind's PostgreSQL answers by query. A plugin's SQL is its
// own constants, and rewriting them byte by byte on every call costs a
// WebAssembly guest more than the rest of its request (0.55 M of a 3.1 M
// instruction turn of the sqlite sample on PostgreSQL). It keeps at most
// maxRebound queries whose rewrite is up to maxReboundBytes, so a plugin
// that builds its SQL as it goes holds at most 1 MiB here (each query and
// its rewrite) and rewrites the rest.
var rebound struct {
	sync.Mutex
	m map[string]string
}

const (
	maxRebound      = 64
	maxReboundBytes = 8 << 10
)

// rebindPostgres is Rebind's rewrite for PostgreSQL.
func rebindPostgres(query string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			end := len(query)
			if j := strings.IndexByte(query[i+1:], c); j >= 0 {
				end = i + 1 + j + 1
			}
			b.WriteString(query[i:end])
			i = end - 1
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			end := len(query)
			if j := strings.IndexByte(query[i:], '\n'); j >= 0 {
				end = i + j
			}
			b.WriteString(query[i:end])
			i = end - 1
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(query[i+1 : j])
			} else {
				n++
				b.WriteString(strconv.Itoa(n))
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Result is what a statement without result columns reports.
type Result struct {
	RowsAffected int64
	LastInsertID int64
}

// Exec runs one statement that returns no rows (INSERT, UPDATE, DDL, ...).
func Exec(query string, args ...any) (Result, error) {
	var b Batch
	b.Exec(query, args...)
	res, err := b.Run()
	if err != nil {
		return Result{}, err
	}
	return res[0].Result, nil
}

// Query runs one statement that returns rows (SELECT, or ... RETURNING).
func Query(query string, args ...any) (*Rows, error) {
	var b Batch
	b.Query(query, args...)
	res, err := b.Run()
	if err != nil {
		return nil, err
	}
	return res[0].Rows, nil
}

// QueryJSON is Query for statements with columns holding JSON documents
// (stored messages, say): the host puts those columns' values in the result
// as JSON, so scanning one into a *json.RawMessage copies it instead of
// unescaping a string, which matters in a WebAssembly guest where JSON work
// is slow. A value that is not valid JSON fails the query.
func QueryJSON(jsonColumns []string, query string, args ...any) (*Rows, error) {
	var b Batch
	b.QueryJSON(jsonColumns, query, args...)
	res, err := b.Run()
	if err != nil {
		return nil, err
	}
	return res[0].Rows, nil
}

// Batch is several statements sent to the host in one request, which saves
// a boundary crossing per statement. They run in order; the first failure
// stops the batch and is returned.
type Batch struct {
	req abi.SQLRequest
	err error
	// value is 1 + the index of the last QueryJSONValue statement, 0 for
	// none.
	value int
}

// Exec adds a statement that returns no rows.
func (b *Batch) Exec(query string, args ...any) {
	b.add(query, args)
	b.req.Write = true
}

// Query adds a statement that returns rows.
func (b *Batch) Query(query string, args ...any) { b.add(query, args) }

// QueryJSON adds a statement that returns rows, with jsonColumns as
// QueryJSON describes.
func (b *Batch) QueryJSON(jsonColumns []string, query string, args ...any) {
	b.add(query, args)
	b.req.Statements[len(b.req.Statements)-1].JSONColumns = jsonColumns
}

// QueryJSONValue adds a statement whose result is one JSON document: query
// returns one column, whose value on its first row is JSON text, such as an
// aggregate that builds an array of stored messages in SQL:
//
//	SELECT '[' || string_agg(body, ',' ORDER BY seq) || ']' FROM messages WHERE ...
//
// It runs as the scalar subquery SELECT (query), so its result is exactly
// one row of one column: the document, checked and compacted by the host
// as QueryJSON describes, or null when query returns no row (or NULL).
// Scan it into a *json.RawMessage. As the batch's last statement its value
// is taken from the host's response without being scanned: a guest then
// pays nothing per byte of the document, however large.
func (b *Batch) QueryJSONValue(query string, args ...any) {
	b.add(valueQuery(query), args)
	b.req.Statements[len(b.req.Statements)-1].JSONColumns = valueColumns
	b.value = len(b.req.Statements)
}

var valueColumns = []string{valueColumn}

// valueJSON is Rows.json of a QueryJSONValue result: its one column is JSON.
var valueJSON = []bool{true}

// valueQuery returns SELECT (query) AS v, the same string for the same
// query, so that appendSQL finds its literal.
func valueQuery(query string) string {
	valueQueries.Lock()
	defer valueQueries.Unlock()
	for i := range valueQueries.q {
		if q := valueQueries.q[i]; len(q) == len(query) && unsafe.StringData(q) == unsafe.StringData(query) {
			return valueQueries.wrapped[i]
		}
	}
	w := "SELECT (" + query + ") AS " + valueColumn
	i := valueQueries.next
	valueQueries.q[i], valueQueries.wrapped[i] = query, w
	valueQueries.next = (i + 1) % len(valueQueries.q)
	return w
}

var valueQueries struct {
	sync.Mutex
	q, wrapped [4]string
	next       int
}

func (b *Batch) add(query string, args []any) {
	wire := make([]any, len(args))
	for i, a := range args {
		v, err := wireArg(a)
		if err != nil && b.err == nil {
			b.err = sdk.Wrap("sql: statement "+strconv.Itoa(len(b.req.Statements))+" argument "+strconv.Itoa(i+1), err)
		}
		wire[i] = v
	}
	b.req.Statements = append(b.req.Statements, abi.SQLStatement{SQL: query, Args: wire})
}

// Len is the number of statements in the batch.
func (b *Batch) Len() int { return len(b.req.Statements) }

// StatementResult is the outcome of one statement of a batch: Rows for a
// statement added with Query, Result for one added with Exec.
type StatementResult struct {
	Result
	Rows *Rows
}

// Run sends the batch and returns one result per statement.
func (b *Batch) Run() ([]StatementResult, error) {
	if b.err != nil {
		return nil, b.err
	}
	if len(b.req.Statements) == 0 {
		return nil, nil
	}
	reqJSON, err := encodeRequest(&b.req)
	if err != nil {
		return nil, sdk.Wrap("sql: encode request", err) // an *abi.Error, invalid_argument
	}
	out, err := call(reqJSON)
	if err != nil {
		return nil, err
	}
	n := len(b.req.Statements)
	resp, err := decodeResponse(out, b.value == n, n)
	if err != nil {
		return nil, sdk.Wrap("sql: decode response", &abi.Error{Code: abi.CodeInternal, Message: err.Error()})
	}
	dialect = resp.Dialect
	if dialect == "" {
		dialect = abi.DialectSQLite // a host before ABI 1.2 serves SQLite only
	}
	if len(resp.Results) != len(b.req.Statements) {
		return nil, sdk.Wrap("sql", &abi.Error{Code: abi.CodeInternal,
			Message: "host answered " + strconv.Itoa(len(resp.Results)) + " results for " + strconv.Itoa(len(b.req.Statements)) + " statements"})
	}
	res := make([]StatementResult, len(resp.Results))
	for i, r := range resp.Results {
		rows := &Rows{Columns: r.Columns, rows: r.Rows}
		if jc := b.req.Statements[i].JSONColumns; b.value == i+1 && len(r.Columns) == 1 && r.Columns[0] == valueColumn {
			rows.json = valueJSON // never written to
		} else if len(jc) > 0 {
			rows.json = make([]bool, len(r.Columns))
			for c, name := range r.Columns {
				rows.json[c] = slices.Contains(jc, name)
			}
		}
		res[i] = StatementResult{
			Result: Result{RowsAffected: r.RowsAffected, LastInsertID: r.LastInsertID},
			Rows:   rows,
		}
	}
	return res, nil
}

// wireArg converts a Go value to its JSON form in a request.
func wireArg(a any) (any, error) {
	switch v := a.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint8, uint16, uint32, float32, float64:
		return v, nil
	case uint:
		if uint64(v) > 1<<63-1 {
			return nil, errUnsigned(uint64(v))
		}
		return v, nil
	case uint64:
		if v > 1<<63-1 {
			return nil, errUnsigned(v)
		}
		return v, nil
	case []byte:
		return abi.SQLBlob(v), nil
	case abi.SQLBlob:
		return v, nil
	case json.RawMessage:
		// Stored as TEXT: a message kept verbatim, escaped into the
		// request without a copy of its own.
		return v, nil
	}
	return nil, errUnsupported(a)
}

// errUnsigned is an unsigned argument beyond INTEGER's range.
func errUnsigned(v uint64) error {
	return &abi.Error{Code: abi.CodeInvalidArgument, Message: "unsigned value " + strconv.FormatUint(v, 10) + " overflows INTEGER"}
}

// errUnsupported is an argument of a type the request cannot carry.
func errUnsupported(a any) error {
	return &abi.Error{Code: abi.CodeInvalidArgument, Message: "unsupported type " + typeName(a)}
}
