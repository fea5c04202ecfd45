// Command commitchild runs agent turns on one session for the process tests
// of package agent: killed at random points, or many at once.
//
//	commitchild -wasm P -db DB|postgres:DSN -store KIND[:PATH] -session ID -mode loop|once -line N
//
// A -db of postgres:DSN grants the plugin schema "history" of that
// PostgreSQL database (host/pggrant, named "main"); a -store of
// postgres:DSN keeps sessions there too (pgstore, named "main"), so a
// turn's rows and its session commit in one transaction.
// loop runs lines N, N+1, ... until killed, printing "ack I" after each
// committed run; once runs line N, reloading and retrying on a stale
// revision or a busy database, and prints "ack N" or "refused N". Line I's run id is "line-I",
// so a line repeated after a kill is recognised if it was committed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/pggrant"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
	"github.com/wasmhist/wasmhist/host/store/pgstore"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
)

type echo struct{}

func (echo) Complete(_ context.Context, req model.Request) (*model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	return &model.Response{Messages: []abi.Message{abi.NewMessage(abi.RoleAssistant, "echo "+last.TextContent())}}, nil
}

func (m echo) Stream(ctx context.Context, req model.Request) iter.Seq2[model.Update, error] {
	return func(yield func(model.Update, error) bool) {
		r, _ := m.Complete(ctx, req)
		yield(model.Update{Role: abi.RoleAssistant, Contents: r.Messages[0].Contents}, nil)
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "commitchild:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		wasm  = flag.String("wasm", "", "plugin")
		db    = flag.String("db", "", "plugin database")
		store = flag.String("store", "", "file:DIR, sqlite:FILE or postgres:DSN")
		id    = flag.String("session", "s", "session id")
		mode  = flag.String("mode", "loop", "loop or once")
		line  = flag.Int("line", 0, "first line")
	)
	flag.Parse()
	ctx := context.Background()
	st, err := openStore(ctx, *store)
	if err != nil {
		return err
	}
	h, err := host.New(ctx, host.Config{})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	grant := sqlgrant.New(sqlgrant.Config{Path: *db})
	if dsn, ok := strings.CutPrefix(*db, "postgres:"); ok {
		grant = pggrant.New(pggrant.Config{Name: "main", AdminDSN: dsn, Schema: "history"})
	}
	p, err := h.Load(ctx, host.File(*wasm), host.LoadOptions{Grants: []host.Grant{grant}})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		Model:     echo{},
		Providers: []agent.ProviderConfig{{Provider: p.Provider("history")}},
		Saver:     st,
	})
	if err != nil {
		return err
	}
	turn := func(i int) error {
		s, err := st.Load(ctx, *id)
		if errors.Is(err, session.ErrNotFound) {
			s, err = session.New(), nil
			s.SessionID = *id
		}
		if err != nil {
			return err
		}
		_, err = a.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, fmt.Sprintf("line %d", i))}, &agent.RunOptions{RunID: fmt.Sprintf("line-%d", i)})
		return err
	}
	fmt.Println("ready")
	switch *mode {
	case "loop":
		for i := *line; ; i++ {
			for {
				err := turn(i)
				if err == nil {
					break
				}
				if !retryable(err) {
					return err
				}
			}
			fmt.Println("ack", i)
		}
	case "once":
		for attempt := 0; attempt < 60; attempt++ {
			err := turn(*line)
			if err == nil {
				fmt.Println("ack", *line)
				return nil
			}
			if !retryable(err) {
				return err
			}
			time.Sleep(time.Duration(rand.IntN(20)+1) * time.Millisecond)
		}
		fmt.Println("refused", *line)
		return nil
	}
	return fmt.Errorf("mode %q", *mode)
}

// retryable: another process committed the session first, or kept the
// database locked past the host's wait; either way nothing of the turn
// was committed, and running it again is what the errors advise.
func retryable(err error) bool {
	return errors.Is(err, session.ErrStaleRevision) || errors.Is(err, txn.ErrBusy)
}

func openStore(ctx context.Context, spec string) (store.Store, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "file":
		return store.NewDir(arg)
	case "sqlite":
		return sqlitestore.Open(arg)
	case "postgres":
		return pgstore.OpenConfig(ctx, pgstore.Config{DSN: arg, Name: "main"})
	}
	return nil, fmt.Errorf("store %q", spec)
}
