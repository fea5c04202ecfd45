package abi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// SQLFunction is the import name, inside CapabilityModule, of the function
// that serves CapabilitySQL. Its request is an SQLRequest and its result an
// SQLResponse; see SPEC.md "Capability sql".
const SQLFunction = "sql"

// SQLRequest is one call of the sql capability: statements run in order, in
// the transaction of the current export call, and the call stops at the first
// failing statement.
type SQLRequest struct {
	Statements []SQLStatement `json:"statements"`
	// Write, on the first request of an export call, begins the call's
	// transaction holding the write lock (BEGIN IMMEDIATE). A call that reads
	// first and writes later can otherwise fail with CodeUnavailable when
	// another call wrote in between. Ignored on later requests.
	Write bool `json:"write,omitempty"`
}

// SQLStatement is one SQL statement and its arguments. Args bind to the
// statement's parameters (?, ?NNN, :name) by position. Each argument is JSON
// null, a boolean (stored as 0 or 1), a number (an integer when it has no
// fraction or exponent and fits in 64 bits, else a double), a string (TEXT),
// or an SQLBlob.
type SQLStatement struct {
	SQL  string `json:"sql"`
	Args []any  `json:"args,omitempty"`
	// JSONColumns names result columns whose TEXT values are JSON
	// documents (e.g. stored messages). The host checks each and puts it in
	// the row as JSON rather than as a string, so the plugin can pass it on
	// without unescaping it; a value that is not valid JSON fails the
	// statement with CodeInvalidArgument, and NULL stays null.
	JSONColumns []string `json:"json_columns,omitempty"`
}

// SQLResponse carries one result per statement, in request order.
type SQLResponse struct {
	Results []SQLResult `json:"results"`
	// Dialect is the SQL dialect of the database that ran the request,
	// DialectSQLite or DialectPostgres (ABI 1.2; a 1.1 host sends none,
	// which means SQLite). It is the same for every request of one grant,
	// so a plugin can choose its DDL from its first response.
	Dialect string `json:"dialect,omitempty"`
}

// SQL dialects of SQLResponse.Dialect.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// SQLResult is the outcome of one statement. A statement that returns no
// columns reports RowsAffected and LastInsertID; one that returns columns
// (SELECT, or RETURNING) reports Columns and Rows, each row holding one JSON
// value per column: null, a number (INTEGER or REAL; an infinite REAL is the
// string "+Inf" or "-Inf"), a string (TEXT) or an SQLBlob object (BLOB).
type SQLResult struct {
	Columns      []string            `json:"columns,omitempty"`
	Rows         [][]json.RawMessage `json:"rows,omitempty"`
	RowsAffected int64               `json:"rows_affected,omitempty"`
	LastInsertID int64               `json:"last_insert_id,omitempty"`
}

// SQLBlob is a BLOB value; on the wire it is {"blob": "<standard base64>"},
// so that it cannot be mistaken for TEXT.
type SQLBlob []byte

type sqlBlobWire struct {
	Blob string `json:"blob"`
}

// MarshalJSON encodes the blob as {"blob": "<base64>"}.
func (b SQLBlob) MarshalJSON() ([]byte, error) {
	return json.Marshal(sqlBlobWire{Blob: base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON decodes {"blob": "<base64>"}.
func (b *SQLBlob) UnmarshalJSON(data []byte) error {
	var w sqlBlobWire
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("abi: sql blob: %w", err)
	}
	v, err := base64.StdEncoding.DecodeString(w.Blob)
	if err != nil {
		return fmt.Errorf("abi: sql blob: %w", err)
	}
	*b = v
	return nil
}
