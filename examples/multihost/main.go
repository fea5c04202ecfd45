// Command multihost is a stateless chat host: any number of them, on any
// number of machines, serve the same conversations through one PostgreSQL
// database, which holds both the sessions (host/store/pgstore) and the
// plugin's messages (host/pggrant), committed in one transaction per turn.
//
//	make plugins
//	export WASMHIST_POSTGRES_DSN='postgres://admin@db.internal/chat'
//	go run ./examples/multihost -listen :8081 -plugin plugins/sqlite/sqlite.wasm &
//	go run ./examples/multihost -listen :8082 -plugin plugins/sqlite/sqlite.wasm &
//	curl -d '{"text":"hello","run_id":"r1"}' 'localhost:8081/turn?session=demo'
//	curl -d '{"text":"and again","run_id":"r2"}' 'localhost:8082/turn?session=demo'
//	curl 'localhost:8081/history?session=demo'
//
// A load balancer in front of them needs nothing: no sticky sessions, no
// shared disk. A turn that lands on a host while another host commits the
// same session is run again on the newer session (a stale revision), up to
// five times; a client that did not see the answer to a turn repeats it
// with the same run_id and gets the stored answer ("replayed": true)
// instead of a second copy of the turn, for any of the session's last 64
// run ids. A run_id sent again with another text is refused (422).
// /history answers a session no turn has created with 404 and a JSON
// body {"error": ...}.
//
// The model is the offline one (host/agent/model/offline), so the example
// runs without an API key.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
)

// dbName names the database in the session store and in the grant: the
// same name puts a turn's session row and its messages in one transaction.
const dbName = "main"

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	plugin := flag.String("plugin", "plugins/sqlite/sqlite.wasm", "the history plugin")
	flag.Parse()
	if err := run(*listen, *plugin); err != nil {
		fmt.Fprintln(os.Stderr, "multihost:", err)
		os.Exit(1)
	}
}

type server struct {
	store  *pgstore.Store
	agent  *agent.Agent
	plugin *host.Plugin
}

func run(listen, plugin string) error {
	dsn := os.Getenv("WASMHIST_POSTGRES_DSN")
	if dsn == "" {
		return errors.New("set WASMHIST_POSTGRES_DSN to the database's connection string (a role that may create roles and schemas)")
	}
	ctx := context.Background()
	store, err := pgstore.OpenConfig(ctx, pgstore.Config{DSN: dsn, Name: dbName})
	if err != nil {
		return err
	}
	defer store.Close()
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	grant := pggrant.New(pggrant.Config{Name: dbName, AdminDSN: dsn, Schema: "history"})
	p, err := h.Load(ctx, host.File(plugin), host.LoadOptions{Grants: []host.Grant{grant}})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		Model:     offline.New(),
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     store,
	})
	if err != nil {
		return err
	}
	s := &server{store: store, agent: a, plugin: p}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /turn", s.turn)
	mux.HandleFunc("GET /history", s.history)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	// The address goes to stdout first, for whoever started the host.
	fmt.Println("listening on", ln.Addr())
	return (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

type turnRequest struct {
	Text  string `json:"text"`
	RunID string `json:"run_id"`
}

type turnResponse struct {
	Reply    string `json:"reply,omitempty"`
	Revision int64  `json:"revision"`
	Replayed bool   `json:"replayed,omitempty"`
}

// load returns the stored session, or a new one with that id.
func (s *server) load(ctx context.Context, id string) (*session.Session, error) {
	sess, err := s.store.Load(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		sess, err = session.New(), nil
		sess.SessionID = id
	}
	return sess, err
}

func (s *server) turn(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session")
	var req turnRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || id == "" || req.Text == "" {
		http.Error(w, "want ?session=ID and a JSON body {\"text\": ..., \"run_id\": ...}", http.StatusBadRequest)
		return
	}
	for attempt := 1; ; attempt++ {
		sess, err := s.load(r.Context(), id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		res, err := s.agent.Run(r.Context(), sess, []abi.Message{abi.NewMessage(abi.RoleUser, req.Text)}, &agent.RunOptions{RunID: req.RunID})
		if errors.Is(err, session.ErrStaleRevision) && attempt < 5 {
			// Another host committed this session meanwhile: run the
			// turn again on its version.
			time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
			continue
		}
		if errors.Is(err, session.ErrStaleRevision) {
			http.Error(w, "the session kept changing under this turn; send it again", http.StatusConflict)
			return
		}
		if errors.Is(err, agent.ErrRunIDReused) {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		if err != nil {
			log.Printf("turn on session %s: %v", id, err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(turnResponse{Reply: res.Text(), Revision: sess.Revision, Replayed: res.Replayed})
		return
	}
}

// errorResponse is the body of a /history error: what failed, and what
// to do about it.
type errorResponse struct {
	Error string `json:"error"`
}

// jsonError answers status with an errorResponse.
func jsonError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorResponse{Error: fmt.Sprintf(format, args...)})
}

// history answers the session's stored messages as a JSON array, or 404
// with a JSON error for a session no turn has created.
func (s *server) history(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("session")
	if id == "" {
		jsonError(w, http.StatusBadRequest, "want ?session=ID")
		return
	}
	sess, err := s.store.Load(r.Context(), id)
	switch {
	case errors.Is(err, session.ErrNotFound):
		jsonError(w, http.StatusNotFound, "no session %q: POST /turn?session=%s starts it", id, id)
		return
	case err != nil:
		jsonError(w, http.StatusInternalServerError, "loading session %q: %v", id, err)
		return
	}
	out := []string{}
	cursor := ""
	for {
		msgs, next, err := s.plugin.List(r.Context(), sess, "history", cursor, 100)
		if err != nil {
			jsonError(w, http.StatusBadGateway, "listing session %q: %v", id, err)
			return
		}
		for _, m := range msgs {
			out = append(out, string(m.Role)+": "+m.TextContent())
		}
		if next == "" {
			break
		}
		cursor = next
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}
