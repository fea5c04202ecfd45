package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/internal/pgtest"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// BenchmarkSQLTurn is the cost of the sandbox on a database turn: one turn
// through the sqlite plugin as wasm (agent.Run: load the session row,
// provide the newest 20 messages, an echo model, store the user message
// and the reply, the session row, one commit) against the same statements
// written in Go without a plugin, on the same data, with the same
// durability and transaction shape, on SQLite (database/sql and
// modernc.org/sqlite: WAL, synchronous=FULL, BEGIN IMMEDIATE) and on
// PostgreSQL (pgx, on the server internal/pgtest starts), with 20, 1k and
// 100k messages in the session.
//
// Each size has three sub-benchmarks: plugin and native alone (for
// profiles and instruction counts) and alternated, which runs one turn of
// each per iteration, in alternating order, and reports both times, the
// process's CPU time of each, and their ratios: the figure of the
// target, from one command:
//
//	go test -run '^$' -bench 'SQLTurn/.*/.*/alternated' -benchtime 200x -count 3 ./host/agent/
func BenchmarkSQLTurn(b *testing.B) {
	ctx := context.Background()
	h, err := host.New(ctx, host.Config{})
	require.NoError(b, err)
	defer h.Close(ctx)
	wasm := sdktest.BuildPlugin(b, "../../plugins/sqlite")
	sizes := []struct {
		name string
		n    int
	}{{"20", 20}, {"1k", 1_000}, {"100k", 100_000}}
	b.Run("sqlite", func(b *testing.B) {
		for _, size := range sizes {
			b.Run(size.name, func(b *testing.B) {
				plugin, native := sqliteTurns(b, h, wasm, size.n)
				benchTurnPair(b, plugin, native)
			})
		}
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := pgtest.Start(b).DSN("postgres")
		for i, size := range sizes {
			b.Run(size.name, func(b *testing.B) {
				plugin, native := postgresTurns(b, h, wasm, dsn, i, size.n)
				benchTurnPair(b, plugin, native)
			})
		}
	})
}

// turnFunc runs the i-th turn of a benchmark.
type turnFunc func(i int) error

func benchTurnPair(b *testing.B, plugin, native turnFunc) {
	// Each side warms its caches (and the plugin its instances) first.
	for i := range 5 {
		require.NoError(b, plugin(-1-i))
		require.NoError(b, native(-1-i))
	}
	for _, side := range []struct {
		name string
		turn turnFunc
	}{{"plugin", plugin}, {"native", native}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := side.turn(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("alternated", func(b *testing.B) {
		var wall, cpu [2]time.Duration
		sides := [2]turnFunc{plugin, native}
		for i := 0; b.Loop(); i++ {
			for k := range 2 {
				j := (i + k) % 2 // plugin first on even iterations
				w0, c0 := time.Now(), processCPU()
				if err := sides[j](i); err != nil {
					b.Fatal(err)
				}
				wall[j] += time.Since(w0)
				cpu[j] += processCPU() - c0
			}
		}
		n := float64(b.N)
		b.ReportMetric(float64(wall[0].Microseconds())/n, "plugin-µs/turn")
		b.ReportMetric(float64(wall[1].Microseconds())/n, "native-µs/turn")
		b.ReportMetric(float64(wall[0])/float64(wall[1]), "x-wall")
		b.ReportMetric(float64(cpu[0].Microseconds())/n, "plugin-cpu-µs/turn")
		b.ReportMetric(float64(cpu[1].Microseconds())/n, "native-cpu-µs/turn")
		b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "x-cpu")
	})
}

// processCPU is the CPU time (user and system) the process has used. On
// PostgreSQL it leaves out the server's, which both sides share alike.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// turnConfig is the plugin's configuration in the benchmark: the window
// of the native turn.
var turnConfig = json.RawMessage(`{"max_messages":20}`)

// turnAgent returns an agent on the plugin p (state key "history"), with an
// echo model, saving into st, and the turn that runs one line on session
// "s" as loaded from st.
func turnAgent(b *testing.B, p *host.Plugin, st store.Store) turnFunc {
	a, err := agent.New(agent.Config{
		Model:     echoModel{},
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     st,
	})
	require.NoError(b, err)
	ctx := context.Background()
	return func(i int) error {
		s, err := st.Load(ctx, "s")
		if errors.Is(err, session.ErrNotFound) {
			s, err = session.New(), nil
			s.SessionID = "s"
		}
		if err != nil {
			return err
		}
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprint("line ", i))}, nil)
		return err
	}
}

// turnFixtureBody is the text of a fixture message: about the size of a
// short chat message.
var turnFixtureBody = strings.Repeat("lorem ipsum dolor sit amet ", 16)

func turnFixtureMessage(seq int) (role, body string) {
	role = "user"
	if seq%2 == 0 {
		role = "assistant"
	}
	return role, fmt.Sprintf(`{"role":%q,"contents":[{"type":"text","text":"%d %s"}]}`, role, seq, turnFixtureBody)
}

// sqliteTurns returns the plugin's turn and the native turn, each on a
// database of its own holding session "s" with n messages: the plugin's,
// made by its first turn and then filled, and a copy of it.
func sqliteTurns(b *testing.B, h *host.Host, wasm string, n int) (plugin, native turnFunc) {
	ctx := context.Background()
	dir := b.TempDir()
	db := filepath.Join(dir, "history.db")
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Config: turnConfig, Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: db})}})
	require.NoError(b, err)
	// A never-seen build's first turns run on the interpreter while it
	// compiles: every turn measured runs the compiled code.
	require.NoError(b, p.Compiled(ctx))
	b.Cleanup(func() { p.Close(ctx) })
	st, err := sqlitestore.Open(db)
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	plugin = turnAgent(b, p, st)
	require.NoError(b, plugin(0))

	// Replace the first turn's messages with n of the fixture's.
	fill, err := sql.Open("sqlite", "file:"+db)
	require.NoError(b, err)
	fill.SetMaxOpenConns(1)
	tx, err := fill.Begin()
	require.NoError(b, err)
	var key string
	require.NoError(b, tx.QueryRow(`SELECT key FROM sessions`).Scan(&key))
	_, err = tx.Exec(`DELETE FROM messages`)
	require.NoError(b, err)
	ins, err := tx.Prepare(`INSERT INTO messages (session, seq, role, body) VALUES (?, ?, ?, ?)`)
	require.NoError(b, err)
	for seq := 1; seq <= n; seq++ {
		role, body := turnFixtureMessage(seq)
		_, err := ins.Exec(key, seq, role, body)
		require.NoError(b, err)
	}
	_, err = tx.Exec(`UPDATE sessions SET last_seq = ?`, n)
	require.NoError(b, err)
	require.NoError(b, tx.Commit())
	_, err = fill.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	require.NoError(b, err)
	require.NoError(b, fill.Close())

	copyPath := filepath.Join(dir, "native.db")
	copyFile(b, db, copyPath)
	return plugin, nativeSQLite(b, copyPath)
}

func copyFile(b *testing.B, from, to string) {
	src, err := os.Open(from)
	require.NoError(b, err)
	defer src.Close()
	dst, err := os.Create(to)
	require.NoError(b, err)
	_, err = io.Copy(dst, src)
	require.NoError(b, err)
	require.NoError(b, dst.Close())
}

// The native turn's statements, ?N parameters: the plugin's writes as
// plugins/sqlite/provider makes them, and for provide the plain query a Go
// program would scan (the plugin's selectWindow reads the same rows, the
// newest and a leading system message, but has SQLite write them as one
// JSON document, which its guest slices without scanning).
const (
	nativeSelectNewest = `SELECT seq, role, call_ids, result_ids, body FROM (
			SELECT seq, role, call_ids, result_ids, body FROM messages
			WHERE session = ?1 ORDER BY seq DESC LIMIT ?2) AS newest
		UNION ALL
		SELECT seq, role, call_ids, result_ids, body FROM messages
		WHERE session = ?1 AND role = 'system'
			AND seq = (SELECT min(seq) FROM messages WHERE session = ?1)
		ORDER BY seq`
	nativeBump = `INSERT INTO sessions (key, last_seq) VALUES (?1, ?2)
		ON CONFLICT (key) DO UPDATE SET last_seq = sessions.last_seq + excluded.last_seq`
	// insertMessages for a turn's two messages, as provider.insertRows
	// writes it.
	nativeInsert = `INSERT INTO messages (session, seq, role, call_ids, result_ids, body)
		SELECT ?1, s.last_seq - v.column1 + 1, v.column2, v.column3, v.column4, v.column5
		FROM sessions AS s, (VALUES (CAST(?2 AS INTEGER), ?3, ?4, ?5, ?6), (?7, ?8, ?9, ?10, ?11)) AS v WHERE s.key = ?1`
)

// nativeSession is what a native turn reads and writes of the session: its
// row, decoded, and the plugin's session key in its one state slot.
func nativeSession(data []byte) (*session.Session, string, error) {
	s, err := session.Decode(data)
	if err != nil {
		return nil, "", err
	}
	var st struct {
		SessionKey string `json:"session_key"`
	}
	if err := json.Unmarshal(s.State["history"].Data, &st); err != nil {
		return nil, "", err
	}
	return s, st.SessionKey, nil
}

// nativeMessages are the native turn's user message and echo reply.
func nativeMessages(window []json.RawMessage, i int) ([2][]byte, error) {
	msgs := make([]abi.Message, 0, len(window)+1)
	for _, w := range window {
		var m abi.Message
		if err := json.Unmarshal(w, &m); err != nil {
			return [2][]byte{}, err
		}
		msgs = append(msgs, m)
	}
	user := abi.NewMessage(abi.RoleUser, fmt.Sprint("line ", i))
	msgs = append(msgs, user)
	reply := abi.NewMessage(abi.RoleAssistant, "echo "+msgs[len(msgs)-1].TextContent())
	var out [2][]byte
	var err error
	if out[0], err = json.Marshal(user); err != nil {
		return out, err
	}
	out[1], err = json.Marshal(reply)
	return out, err
}

// nativeSQLite is the plugin's turn in Go: one BEGIN IMMEDIATE
// transaction that reads the session row, the newest 20 messages, stores
// the user message and the reply and the session row, and commits.
func nativeSQLite(b *testing.B, path string) turnFunc {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + url.Values{
		"_pragma": {"busy_timeout(30000)", "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	return func(i int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var data []byte
		var rev int64
		if err := tx.QueryRowContext(ctx, txn.SQLiteSelect(txn.SessionsTable), "s").Scan(&rev, &data); err != nil {
			return err
		}
		s, key, err := nativeSession(data)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, nativeSelectNewest, key, 20)
		if err != nil {
			return err
		}
		var window []json.RawMessage
		for rows.Next() {
			var seq int64
			var role string
			var calls, results sql.NullString
			var body []byte
			if err := rows.Scan(&seq, &role, &calls, &results, &body); err != nil {
				return err
			}
			window = append(window, body)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		msgs, err := nativeMessages(window, i)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, nativeBump, key, 2); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, nativeInsert, key, 2, "user", nil, nil, msgs[0], 1, "assistant", nil, nil, msgs[1]); err != nil {
			return err
		}
		s.Revision++
		out, err := session.Encode(s)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, txn.SQLiteUpsert(txn.SessionsTable), "s", s.Revision, time.Now().UnixMicro(), string(out))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("native: session row: %d rows, %v", n, err)
		}
		return tx.Commit()
	}
}

// turnCallTimeout raises the plugin's call deadline on PostgreSQL for
// runs under valgrind, where the plugin's first store (its migration)
// runs past the default 5 s; zero keeps the host's default.
var turnCallTimeout = flag.Duration("sqlturn.calltimeout", 0, "the plugin's call deadline in BenchmarkSQLTurn/postgres (0: the default)")

// postgresTurns is sqliteTurns on PostgreSQL: the plugin in schema
// data<i> with the session store in host<i> (one transaction), the native
// turn on copies of both tables in native<i>.
func postgresTurns(b *testing.B, h *host.Host, wasm, dsn string, i, n int) (plugin, native turnFunc) {
	ctx := context.Background()
	name, data, hostSchema, nat := fmt.Sprint("turn", i), fmt.Sprint("data", i), fmt.Sprint("host", i), fmt.Sprint("native", i)
	grant := pggrant.New(pggrant.Config{Name: name, AdminDSN: dsn, Schema: data, HostSchema: hostSchema})
	p, err := h.Load(ctx, host.File(wasm), host.LoadOptions{Config: turnConfig, Grants: []host.Grant{grant},
		Limits: host.Limits{CallTimeout: *turnCallTimeout}})
	require.NoError(b, err)
	require.NoError(b, p.Compiled(ctx))
	b.Cleanup(func() { p.Close(ctx) })
	st, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: name, Schema: hostSchema})
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	plugin = turnAgent(b, p, st)
	require.NoError(b, plugin(0))

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(b, err)
	defer conn.Close(ctx)
	exec := func(q string, args ...any) {
		_, err := conn.Exec(ctx, q, args...)
		require.NoError(b, err, q)
	}
	var key string
	require.NoError(b, conn.QueryRow(ctx, `SELECT key FROM `+data+`.sessions`).Scan(&key))
	exec(`DELETE FROM ` + data + `.messages`)
	exec(`INSERT INTO `+data+`.messages (session, seq, role, body)
		SELECT $1, g, CASE WHEN g % 2 = 0 THEN 'assistant' ELSE 'user' END,
			format('{"role":"%s","contents":[{"type":"text","text":"%s %s"}]}', CASE WHEN g % 2 = 0 THEN 'assistant' ELSE 'user' END, g, $3::text)
		FROM generate_series(1, $2::int) AS g`, key, n, turnFixtureBody)
	exec(`UPDATE `+data+`.sessions SET last_seq = $1`, n)
	exec(`CREATE SCHEMA ` + nat)
	for _, t := range []struct{ from, to string }{
		{data + ".sessions", nat + ".sessions"}, {data + ".messages", nat + ".messages"}, {hostSchema + ".sessions", nat + ".host_sessions"},
	} {
		exec(`CREATE TABLE ` + t.to + ` (LIKE ` + t.from + ` INCLUDING ALL)`)
		exec(`INSERT INTO ` + t.to + ` SELECT * FROM ` + t.from)
	}
	exec(`VACUUM (ANALYZE) ` + data + `.messages`)
	exec(`VACUUM (ANALYZE) ` + nat + `.messages`)
	return plugin, nativePostgres(b, dsn, nat)
}

// nativePostgres is nativeSQLite with pgx on one connection: the same
// statements in $N form, in one transaction, the session row written with
// pgstore's revision-checked upsert.
func nativePostgres(b *testing.B, dsn, schema string) turnFunc {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(b, err)
	cfg.RuntimeParams["search_path"] = schema
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(func() { conn.Close(context.Background()) })
	dollar := strings.NewReplacer("?10", "$10", "?11", "$11", "?1", "$1", "?2", "$2", "?3", "$3", "?4", "$4", "?5", "$5", "?6", "$6", "?7", "$7", "?8", "$8", "?9", "$9")
	selectNewest, bump, insert := dollar.Replace(nativeSelectNewest), dollar.Replace(nativeBump), dollar.Replace(nativeInsert)
	return func(i int) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		var data []byte
		var rev int64
		if err := tx.QueryRow(ctx, `SELECT revision, data FROM host_sessions WHERE id = $1`, "s").Scan(&rev, &data); err != nil {
			return err
		}
		s, key, err := nativeSession(data)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, selectNewest, key, 20)
		if err != nil {
			return err
		}
		var window []json.RawMessage
		for rows.Next() {
			var seq int64
			var role string
			var calls, results *string
			var body string
			if err := rows.Scan(&seq, &role, &calls, &results, &body); err != nil {
				return err
			}
			window = append(window, json.RawMessage(body))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		msgs, err := nativeMessages(window, i)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, bump, key, 2); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, insert, key, 2, "user", nil, nil, string(msgs[0]), 1, "assistant", nil, nil, string(msgs[1])); err != nil {
			return err
		}
		s.Revision++
		out, err := session.Encode(s)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO host_sessions AS s (id, revision, updated, data) VALUES ($1, $2, pg_catalog.now(), $3)
			ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, updated = excluded.updated, data = excluded.data
			WHERE s.revision < excluded.revision`, "s", s.Revision, string(out))
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("native: session row: %d rows", tag.RowsAffected())
		}
		return tx.Commit(ctx)
	}
}
