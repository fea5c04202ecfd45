// Package sqlgrant is the sql capability (abi.CapabilitySQL): plugins run
// parameterised SQL against SQLite databases the host owns, one file per
// grant chosen by the operator, never by the plugin.
//
// Importing the package links SQLite into the program and registers the
// capability with package host, as importing a database/sql driver does; a
// program that grants no sql does not import it and does not link SQLite.
// The databases a grant opens belong to the Host serving the call: each
// Host keeps its own connections and closes them in Host.Close.
//
//	opts := host.LoadOptions{Grants: []host.Grant{
//		sqlgrant.New(sqlgrant.Config{Path: "/var/lib/app/history.db"}),
//	}}
//
// Plugins reach only the main schema of that file: ATTACH, extension
// loading, transaction control and all but a few PRAGMAs are refused by
// SQLite's authorizer. All statements of one export call run in one
// transaction, committed (with synchronous=FULL, so durably) only when the
// call succeeds. Within a run (every agent run of package host/agent, or
// host.InRun) the calls share one transaction, each call in a savepoint,
// which commits with the session when the run commits, or is rolled back
// when the run fails, even after the call succeeded. Give each plugin its
// own file: two plugins sharing one share their tables.
//
// A Host keeps at most 64 files open, closing the least recently used one
// no call is using, and closes a file's idle connections after a minute.
// Two Hosts of one process serving one file queue their writers on
// SQLite's lock, each waiting up to 5 s.
package sqlgrant

import (
	"context"
	"errors"
	"time"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/sqlcap"
	"github.com/wasmhist/wasmhist/host/internal/sqlwire"
)

func init() {
	if err := capability.Register(sqlcap.Kind); err != nil {
		panic(err)
	}
}

// Config chooses a grant's database and bounds.
type Config struct {
	// Path is the database file; it and its directory are created on
	// first use. Ignored when PathFunc is set.
	Path string
	// PathFunc, when set, chooses the file for each export call, e.g. per
	// tenant from a value the embedder put in the context passed to the
	// plugin call. It must not depend on anything the plugin controls.
	PathFunc func(ctx context.Context) (string, error)
	// Limits bound each request of the plugin; zero fields take defaults.
	Limits Limits
}

// Limits bound one sql request of a plugin. Zero fields take defaults.
// Its fields are sqlwire.Limits's, in the same order: New converts one
// to the other.
type Limits struct {
	// MaxRows bounds the rows one request returns (10000).
	MaxRows int
	// MaxResultBytes bounds the encoded result of one request (4 MiB).
	MaxResultBytes int
	// MaxRequestBytes bounds the request (4 MiB).
	MaxRequestBytes int
	// MaxStatements bounds the statements of one request (256).
	MaxStatements int
	// Timeout bounds one request (2 s); a statement still running then is
	// interrupted and the plugin sees a resource_exhausted error. The
	// plugin call's own deadline bounds the whole call as well.
	Timeout time.Duration
}

// errNoPath is the error of the first call of a grant naming no file.
var errNoPath = errors.New("sqlgrant: no Path or PathFunc")

// New returns a grant of the sql capability on the database cfg chooses.
// A Config with neither Path nor PathFunc fails every call that uses sql.
func New(cfg Config) host.Grant {
	path := cfg.PathFunc
	if path == nil {
		p := cfg.Path
		path = func(context.Context) (string, error) {
			if p == "" {
				return "", errNoPath
			}
			return p, nil
		}
	}
	g := sqlcap.NewGrant(path, sqlwire.Limits(cfg.Limits))
	return capability.Seal(g).(host.Grant)
}
