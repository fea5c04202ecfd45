// Command chatserver is a whole HTTP chat service: one conversation per
// user, kept by the sqlite plugin in its own database with the session row
// beside it (so a turn commits in one transaction), replies streamed as
// they arrive, a tool defined by a Go function, and retries made safe by an
// Idempotency-Key header. It talks to any OpenAI-compatible service.
//
//	make plugins
//	OPENAI_API_KEY=sk-... go run ./examples/chatserver
//	curl -d 'message=What is the weather in Paris?' -H 'Idempotency-Key: 1' localhost:8080/chat/ann
//	curl localhost:8080/chat/ann   # the stored history, one JSON message a line
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

func main() {
	addr := flag.String("addr", "localhost:8080", "listen `address`")
	db := flag.String("db", "chat.db", "SQLite `file` of the histories and the sessions")
	flag.Parse()
	h, err := host.New(context.Background(), host.Config{})
	if err != nil {
		log.Fatal(err)
	}
	m := openai.NewChat(openai.Options{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("OPENAI_MODEL")})
	handler, err := newHandler(context.Background(), h, "plugins/sqlite/sqlite.wasm", *db, m)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(*addr, handler))
}

// forecastArgs are the forecast tool's arguments; the model is sent their
// JSON Schema.
type forecastArgs struct {
	City string `json:"city" jsonschema:"description=a city name"`
}

func newHandler(ctx context.Context, h *host.Host, pluginPath, dbPath string, m model.Client) (http.Handler, error) {
	// The plugin's database keeps the sessions too.
	p, err := h.Load(ctx, host.File(pluginPath), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: dbPath})}})
	if err != nil {
		return nil, err
	}
	sessions, err := sqlitestore.Open(dbPath)
	if err != nil {
		return nil, err
	}
	forecast := agent.NewTool("forecast", "today's weather in a city", func(_ context.Context, a forecastArgs) (any, error) {
		return map[string]string{"city": a.City, "sky": "sunny"}, nil
	})
	users, err := agent.NewSessions(agent.Config{Model: m, Tools: []agent.Tool{forecast}, Saver: sessions,
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}}}) // one turn at a time per user
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /chat/{user}", func(w http.ResponseWriter, r *http.Request) {
		in := []abi.Message{abi.NewMessage(abi.RoleUser, r.FormValue("message"))}
		retry := &agent.RunOptions{RunID: r.Header.Get("Idempotency-Key")} // a repeated key replays the reply
		for u, err := range users.RunStream(r.Context(), r.PathValue("user"), in, retry) {
			if err != nil { // 400 for a bad user id, 502 for the model; once text went out, the client sees the line
				http.Error(w, "\nerror: "+err.Error(), agent.HTTPStatus(err))
				return
			}
			io.WriteString(w, u.Text())
			http.NewResponseController(w).Flush()
		}
	})
	mux.HandleFunc("GET /chat/{user}", func(w http.ResponseWriter, r *http.Request) {
		for m, err := range users.History(r.Context(), r.PathValue("user")) {
			if err != nil {
				http.Error(w, err.Error(), agent.HTTPStatus(err))
				return
			}
			json.NewEncoder(w).Encode(m)
		}
	})
	return mux, nil
}
