package sqlcap

import (
	"strconv"
	"strings"
	"sync/atomic"

	sqlite "modernc.org/sqlite"

	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// policy is the authorizer of one connection. It applies the plugin rules
// only while a plugin's statement runs (the host's own BEGIN, COMMIT and
// bookkeeping statements pass), and remembers why it last refused, because
// SQLite reports every refusal as the same "not authorized".
type policy struct {
	plugin atomic.Bool
	// denied is written and read on the goroutine that runs the statement:
	// SQLite calls the authorizer synchronously while preparing it.
	denied string
	// altered is set when the statement alters a table: SQLite then reads
	// and rewrites the schema tables of main and temp itself, and a rename
	// must be checked afterwards (see session.checkRenames), since the
	// authorizer is never told the new name. Reset with denied.
	altered bool
}

// Pragmas a plugin may run. Those taking a table or index name read the
// schema; user_version is the plugin's own schema version and the only one it
// may set (application_id is read-only, it identifies the file's owner).
var (
	pragmasWithArg = map[string]bool{
		"table_info": true, "table_xinfo": true, "table_list": true,
		"index_list": true, "index_info": true, "index_xinfo": true,
		"foreign_key_list": true, "foreign_key_check": true,
	}
	pragmasReadOnly = map[string]bool{
		"application_id": true, "data_version": true, "schema_version": true,
		"page_count": true, "page_size": true, "freelist_count": true,
		"foreign_keys": true, "journal_mode": true, "encoding": true,
	}
	pragmasSettable = map[string]bool{"user_version": true}
)

// Functions no plugin may call: load_extension opens shared objects (it is
// also disabled on the connection), fts3_tokenizer takes raw pointers.
var deniedFunctions = map[string]bool{"load_extension": true, "fts3_tokenizer": true}

// Eponymous virtual tables that read or write database pages directly,
// bypassing the b-tree layer (and any constraint the schema enforces).
var deniedTables = map[string]bool{
	"sqlite_dbpage": true, "sqlite_dbdata": true, "sqlite_dbptr": true, "dbstat": true,
}

// Virtual table modules a plugin may create tables with.
var allowedModules = map[string]bool{"fts5": true, "rtree": true, "rtree_i32": true}

func (p *policy) authorize(action sqlite.AuthorizerActionCode, arg1, arg2, dbName, _ string) sqlite.AuthorizerReturnCode {
	if !p.plugin.Load() {
		return sqlite.AuthorizerOK
	}
	if reason := p.check(action, arg1, arg2, dbName); reason != "" {
		p.denied = reason
		return sqlite.AuthorizerDeny
	}
	return sqlite.AuthorizerOK
}

// check returns why the action is refused, or "" to allow it. Unknown actions
// are refused: a new SQLite feature stays closed until reviewed.
func (p *policy) check(action sqlite.AuthorizerActionCode, arg1, arg2, dbName string) string {
	switch {
	case action == sqlite.AuthAlterTable:
		// arg1 is the schema, arg2 the table; the fourth argument,
		// elsewhere the schema, names the column DROP COLUMN drops.
		if arg1 != "main" {
			return "only the main schema of the plugin's own database is accessible, not " + quote(arg1)
		}
		if r := hostTable(arg2); r != "" {
			return r
		}
		p.altered = true
		return ""
	case p.altered && dbName == "temp" && strings.EqualFold(arg1, "sqlite_temp_master") &&
		(action == sqlite.AuthRead || action == sqlite.AuthUpdate):
		// ALTER TABLE's own rewrite of the temp schema's catalog, which
		// holds nothing of a plugin's (temporary objects are refused).
		return ""
	}
	// Everything that names a schema must name the plugin's own main schema;
	// "temp" objects would outlive the call on a pooled connection.
	if dbName != "" && dbName != "main" {
		return "only the main schema of the plugin's own database is accessible, not " + quote(dbName)
	}
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRecursive:
		return ""
	case sqlite.AuthRead, sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete:
		if deniedTables[strings.ToLower(arg1)] {
			return "table " + quote(arg1) + " is not accessible"
		}
		return hostTable(arg1)
	case sqlite.AuthCreateTable, sqlite.AuthCreateIndex, sqlite.AuthCreateView, sqlite.AuthCreateTrigger,
		sqlite.AuthDropTable, sqlite.AuthDropIndex, sqlite.AuthDropView, sqlite.AuthDropTrigger,
		sqlite.AuthAnalyze, sqlite.AuthReindex:
		// arg1 names the object, arg2 the table it belongs to (if any).
		if r := hostTable(arg1); r != "" {
			return r
		}
		return hostTable(arg2)
	case sqlite.AuthCreateVTable, sqlite.AuthDropVTable:
		if r := hostTable(arg1); r != "" {
			return r
		}
		if !allowedModules[strings.ToLower(arg2)] {
			return "virtual table module " + quote(arg2) + " is not allowed"
		}
		return ""
	case sqlite.AuthFunction:
		if deniedFunctions[strings.ToLower(arg2)] {
			return "function " + arg2 + " is not allowed"
		}
		return ""
	case sqlite.AuthPragma:
		return checkPragma(strings.ToLower(arg1), arg2)
	case sqlite.AuthAttach, sqlite.AuthDetach:
		return "ATTACH and DETACH are not allowed: the host chooses the database"
	case sqlite.AuthTransaction, sqlite.AuthSavepoint:
		return "transaction control is not allowed: each export call runs in one transaction the host commits"
	case sqlite.AuthCreateTempTable, sqlite.AuthCreateTempIndex, sqlite.AuthCreateTempView, sqlite.AuthCreateTempTrigger,
		sqlite.AuthDropTempTable, sqlite.AuthDropTempIndex, sqlite.AuthDropTempView, sqlite.AuthDropTempTrigger:
		return "temporary objects are not allowed"
	}
	return "operation " + actionName(action) + " is not allowed"
}

// hostTable refuses the tables the host keeps in the plugin's database
// (the sessions and the commit journal): their names start with
// txn.Prefix, which a plugin may neither use nor reach.
func hostTable(name string) string {
	if strings.HasPrefix(strings.ToLower(name), txn.Prefix) {
		return "names starting with " + quote(txn.Prefix) + " are the host's: " + quote(name) + " is not accessible"
	}
	return ""
}

func checkPragma(name, arg string) string {
	switch {
	case pragmasWithArg[name], pragmasSettable[name]:
		return ""
	case pragmasReadOnly[name] && arg == "":
		return ""
	case pragmasReadOnly[name]:
		return "PRAGMA " + name + " may only be read"
	}
	return "PRAGMA " + name + " is not allowed"
}

func quote(s string) string { return `"` + s + `"` }

func actionName(a sqlite.AuthorizerActionCode) string {
	return "with authorizer code " + strconv.Itoa(int(a))
}
