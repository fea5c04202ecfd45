package host

import (
	"context"
	"errors"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/sqlcap"
)

func init() {
	if err := capability.Register(sqlcap.Kind); err != nil {
		panic(err)
	}
}

// SQLGrant grants a plugin the sql capability (abi.CapabilitySQL): an
// SQLite database the host owns, chosen here by the operator and never by
// the plugin. Put it in LoadOptions.Grants:
//
//	opts := host.LoadOptions{Grants: []host.Grant{host.SQLGrant{Path: "/var/lib/app/history.db"}}}
//
// Plugins reach only the main schema of that file: ATTACH, extension
// loading, transaction control and all but a few PRAGMAs are refused by
// SQLite's authorizer. All statements of one export call run in one
// transaction, committed (with synchronous=FULL, so durably) only when the
// call succeeds. Give each plugin its own file: two plugins sharing one
// share their tables.
type SQLGrant struct {
	// Path is the database file; it and its directory are created on
	// first use. Ignored when PathFunc is set.
	Path string
	// PathFunc, when set, chooses the file for each export call, e.g. per
	// tenant from a value the embedder put in the context passed to the
	// plugin call. It must not depend on anything the plugin controls.
	PathFunc func(ctx context.Context) (string, error)
	// Limits bound each request of the plugin; zero fields take defaults.
	Limits SQLLimits
}

// SQLLimits bound one sql request of a plugin. Zero fields take defaults.
type SQLLimits struct {
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

// Capability is abi.CapabilitySQL.
func (g SQLGrant) Capability() abi.Capability { return abi.CapabilitySQL }

// Begin starts the grant's part of one export call. The host calls it.
func (g SQLGrant) Begin(ctx context.Context, b capability.Backend) (capability.Session, error) {
	path := g.PathFunc
	if path == nil {
		if g.Path == "" {
			return nil, errors.New("host: sql grant: no Path or PathFunc")
		}
		path = sqlcap.FixedPath(g.Path)
	}
	l := g.Limits
	return sqlcap.NewGrant(path, sqlcap.Limits{
		MaxRows:         l.MaxRows,
		MaxResultBytes:  l.MaxResultBytes,
		MaxRequestBytes: l.MaxRequestBytes,
		MaxStatements:   l.MaxStatements,
		Timeout:         l.Timeout,
	}).Begin(ctx, b)
}
