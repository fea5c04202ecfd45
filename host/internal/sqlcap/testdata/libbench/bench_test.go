// Package libbench compares SQLite libraries on the history workload: insert
// one turn of three ~500-byte messages in a transaction, and select the last
// 20 messages of one session through an index.
package libbench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	ncruces "github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/embed"
	_ "modernc.org/sqlite"
)

const (
	sessions = 1000
	preload  = 100_000
	schema   = `CREATE TABLE IF NOT EXISTS messages (
		session TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL, body TEXT NOT NULL,
		PRIMARY KEY (session, seq)) WITHOUT ROWID`
	insertQ = `INSERT INTO messages(session, seq, role, body) VALUES (?, ?, ?, ?)`
	maxQ    = `SELECT coalesce(max(seq), 0) FROM messages WHERE session = ?`
	lastQ   = `SELECT seq, role, body FROM messages WHERE session = ? ORDER BY seq DESC LIMIT 20`
	pragmas = `PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000`
)

var body = strings.Repeat("x", 500)

func sessionName(i int) string { return fmt.Sprintf("session-%04d", i) }

// databaseSQL benchmarks a database/sql driver on one connection.
func databaseSQL(b *testing.B, driver, dsnFmt string) {
	dir := b.TempDir()
	db, err := sql.Open(driver, fmt.Sprintf(dsnFmt, filepath.Join(dir, "h.db")))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	for _, q := range strings.Split(pragmas, ";") {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		b.Fatal(err)
	}
	tx, _ := db.Begin()
	st, _ := tx.Prepare(insertQ)
	for i := range preload {
		if _, err := st.Exec(sessionName(i%sessions), i/sessions+1, "user", body); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.Run("store-turn", func(b *testing.B) {
		for b.Loop() {
			s := sessionName(rand.IntN(sessions))
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			var seq int
			if err := tx.QueryRow(maxQ, s).Scan(&seq); err != nil {
				b.Fatal(err)
			}
			for j := range 3 {
				if _, err := tx.Exec(insertQ, s, seq+j+1, "assistant", body); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("last-20", func(b *testing.B) {
		for b.Loop() {
			rows, err := db.Query(lastQ, sessionName(rand.IntN(sessions)))
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				var seq int
				var role, bd string
				if err := rows.Scan(&seq, &role, &bd); err != nil {
					b.Fatal(err)
				}
				n++
			}
			rows.Close()
			if n != 20 {
				b.Fatalf("got %d rows", n)
			}
		}
	})
}

func BenchmarkModernc(b *testing.B)  { databaseSQL(b, "sqlite", "file:%s") }
func BenchmarkMattnCgo(b *testing.B) { databaseSQL(b, "sqlite3", "file:%s") }

// BenchmarkNcrucesDirect uses ncruces' own API with prepared statements.
func BenchmarkNcrucesDirect(b *testing.B) {
	c, err := ncruces.Open(filepath.Join(b.TempDir(), "h.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(c.Exec(pragmas))
	must(c.Exec(schema))
	ins, _, err := c.Prepare(insertQ)
	must(err)
	must(c.Exec("BEGIN"))
	for i := range preload {
		ins.BindText(1, sessionName(i%sessions))
		ins.BindInt(2, i/sessions+1)
		ins.BindText(3, "user")
		ins.BindText(4, body)
		must(ins.Exec())
	}
	must(c.Exec("COMMIT"))
	mx, _, err := c.Prepare(maxQ)
	must(err)
	last, _, err := c.Prepare(lastQ)
	must(err)
	b.Run("store-turn", func(b *testing.B) {
		for b.Loop() {
			s := sessionName(rand.IntN(sessions))
			must(c.Exec("BEGIN"))
			mx.BindText(1, s)
			mx.Step()
			seq := mx.ColumnInt(0)
			must(mx.Reset())
			for j := range 3 {
				ins.BindText(1, s)
				ins.BindInt(2, seq+j+1)
				ins.BindText(3, "assistant")
				ins.BindText(4, body)
				must(ins.Exec())
			}
			must(c.Exec("COMMIT"))
		}
	})
	b.Run("last-20", func(b *testing.B) {
		for b.Loop() {
			last.BindText(1, sessionName(rand.IntN(sessions)))
			n := 0
			for last.Step() {
				_ = last.ColumnInt(0)
				_ = last.ColumnText(1)
				_ = last.ColumnText(2)
				n++
			}
			must(last.Reset())
			if n != 20 {
				b.Fatalf("got %d rows", n)
			}
		}
	})
}
