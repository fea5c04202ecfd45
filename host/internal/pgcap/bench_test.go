package pgcap

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// BenchmarkCall is one export call storing a turn (3 messages of ~500
// bytes in one request) and one reading the newest 20 messages, through
// the capability on a Unix socket: the cost of the per-statement
// savepoints, the commit guard and the connection reset included.
func BenchmarkCall(b *testing.B) {
	srv := pgtest.Start(b)
	e := &env{dsn: srv.DSN("postgres"), store: NewStore()}
	b.Cleanup(func() { e.store.Close() })
	var err error
	if e.admin, err = pgx.Connect(context.Background(), e.dsn); err != nil {
		b.Fatal(err)
	}
	g := e.grant("bench", Limits{})
	e.oneCall(b, g, "CREATE TABLE m (session text, seq bigint, body text, PRIMARY KEY (session, seq))")
	body := strings.Repeat("x", 500)
	ctx := context.Background()
	seq := 0
	b.Run("store-turn", func(b *testing.B) {
		for b.Loop() {
			var stmts []abi.SQLStatement
			for range 3 {
				seq++
				stmts = append(stmts, abi.SQLStatement{SQL: "INSERT INTO m VALUES ($1, $2, $3)", Args: []any{fmt.Sprint("s", seq%100), seq, body}})
			}
			c := e.begin(ctx, b, g)
			if _, err := c.do(ctx, stmts...); err != nil {
				b.Fatal(err)
			}
			if err := c.end(ctx, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("last-20", func(b *testing.B) {
		for b.Loop() {
			c := e.begin(ctx, b, g)
			if _, err := c.do(ctx, abi.SQLStatement{SQL: "SELECT seq, body FROM m WHERE session = $1 ORDER BY seq DESC LIMIT 20", Args: []any{"s7"}}); err != nil {
				b.Fatal(err)
			}
			if err := c.end(ctx, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
