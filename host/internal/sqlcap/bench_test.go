package sqlcap

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
)

// The history workload through the capability, without WebAssembly: store
// one turn (3 messages of ~500 bytes) in one call, and select the newest 20
// messages of a session, on a database of 100k messages over 1k sessions.
// These are the costs a plugin adds its own to; the library comparison that
// chose modernc.org/sqlite is in testdata/libbench.
func BenchmarkWorkload(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s := newStoreOpts(b, Options{Synchronous: sync})
			path := dbPath(b, "w.db")
			body := strings.Repeat("x", 500)
			oneCall(b, s, path,
				"CREATE TABLE m (session TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session, seq))",
				fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i < 99999)
				INSERT INTO m SELECT 's' || (i %% 1000), i / 1000 + 1, '%s' FROM c`, body))
			grant := NewGrant(FixedPath(path), Limits{})
			ctx := context.Background()
			run := func(b *testing.B, req []byte, write bool) {
				call := capability.NewCall(context.Background(), "bench", []capability.Grant{grant}, backendsOf(s))
				if _, err := Func.Call(ctx, call, req); err != nil {
					b.Fatal(err)
				}
				if err := call.End(ctx, true); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("store-turn", func(b *testing.B) {
				seq := 1000
				for b.Loop() {
					seq++
					sess := fmt.Sprintf("s%d", rand.IntN(1000))
					req := abi.SQLRequest{Write: true}
					for j := range 3 {
						req.Statements = append(req.Statements, abi.SQLStatement{
							SQL: "INSERT INTO m VALUES (?, ?, ?)", Args: []any{sess, seq*3 + j, body}})
					}
					raw, _ := json.Marshal(req)
					run(b, raw, true)
				}
			})
			b.Run("last-20", func(b *testing.B) {
				for b.Loop() {
					raw, _ := json.Marshal(req("SELECT seq, body FROM m WHERE session = ? ORDER BY seq DESC LIMIT 20", fmt.Sprintf("s%d", rand.IntN(1000))))
					run(b, raw, false)
				}
			})
		})
	}
}
