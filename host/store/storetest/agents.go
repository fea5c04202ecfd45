package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/wasmhist/wasmhist/host/store"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/agent/model/offline"
	"github.com/wasmhist/wasmhist/host/session"
)

// host is what one process running the agent holds: its own agent and its
// own handle on the store.
type host struct {
	store store.Store
	agent *agent.Agent
}

func newHost(store store.Store, saver store.Saver) (*host, error) {
	if saver == nil {
		saver = store
	}
	a, err := agent.New(agent.Config{
		Model:     offline.New(),
		Providers: []agent.ProviderConfig{{Provider: agent.NewMemoryProvider("history")}},
		Saver:     saver,
	})
	if err != nil {
		return nil, err
	}
	return &host{store: store, agent: a}, nil
}

// turn loads the session (or starts it), runs one user message and
// returns the model's reply.
func (h *host) turn(ctx context.Context, id, text string) (string, error) {
	s, err := h.store.Load(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		s = session.New()
		s.SessionID = id
	} else if err != nil {
		return "", fmt.Errorf("load: %w", err)
	}
	res, err := h.agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, nil)
	if err != nil {
		return "", fmt.Errorf("run %q at revision %d: %w", text, s.Revision, err)
	}
	return res.Text(), nil
}

func history(s *session.Session) (string, error) {
	msgs, err := agent.NewMemoryProvider("history").Messages(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.TextContent())
	}
	return b.String(), nil
}

// twoHosts returns two hosts, each with a store open will give it.
func twoHosts(open func() store.Store) ([2]*host, error) {
	var hosts [2]*host
	for i := range hosts {
		h, err := newHost(open(), nil)
		if err != nil {
			return hosts, err
		}
		hosts[i] = h
	}
	return hosts, nil
}

func caseAgentsAlternate(ctx context.Context, open func() store.Store) error {
	const id = "alternate"
	hosts, err := twoHosts(open)
	if err != nil {
		return err
	}
	// Each host answers from what the other one stored: the offline model
	// keeps nothing between calls.
	turns := []struct {
		host      int
		say, want string
	}{
		{0, "My name is Ada.", "Nice to meet you, Ada."},
		{1, "I like tea.", "Noted: you like tea. I'll remember that."},
		{0, "What do I like?", "You told me you like tea."},
		{1, "What is my name?", "Your name is Ada."},
	}
	for i, tu := range turns {
		got, err := hosts[tu.host].turn(ctx, id, tu.say)
		if err != nil {
			return fmt.Errorf("turn %d on host %d: %w", i+1, tu.host, err)
		}
		if got != tu.want {
			return fmt.Errorf("turn %d on host %d: %q: want reply %q, got %q", i+1, tu.host, tu.say, tu.want, got)
		}
	}
	final, err := open().Load(ctx, id)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if final.Revision != int64(len(turns)) {
		return fmt.Errorf("after %d turns the stored revision is %d", len(turns), final.Revision)
	}
	got, err := history(final)
	if err != nil {
		return err
	}
	var want strings.Builder
	for _, tu := range turns {
		fmt.Fprintf(&want, "user: %s\nassistant: %s\n", tu.say, tu.want)
	}
	if got != want.String() {
		return fmt.Errorf("stored history:\nwant\n%sgot\n%s", want.String(), got)
	}
	return nil
}

// gate holds each agent's first Save until both agents have reached it,
// so that both commits are in flight together, each over the revision
// both loaded.
type gate struct {
	next    store.Saver
	arrived *sync.WaitGroup
	once    sync.Once
}

func (g *gate) Save(ctx context.Context, s *session.Session) error {
	g.once.Do(func() {
		g.arrived.Done()
		g.arrived.Wait()
	})
	return g.next.Save(ctx, s)
}

func caseRacingCommits(ctx context.Context, open func() store.Store) error {
	const id = "race"
	first, err := newHost(open(), nil)
	if err != nil {
		return err
	}
	if _, err := first.turn(ctx, id, "My name is Ada."); err != nil {
		return err
	}
	var arrived sync.WaitGroup
	arrived.Add(2)
	type racer struct {
		host   *host
		s      *session.Session
		before []byte
		err    error
		say    string
	}
	racers := [2]*racer{}
	for i := range racers {
		st := open()
		h, err := newHost(st, &gate{next: st, arrived: &arrived})
		if err != nil {
			return err
		}
		s, err := st.Load(ctx, id)
		if err != nil {
			return fmt.Errorf("load: %w", err)
		}
		before, err := json.Marshal(s)
		if err != nil {
			return err
		}
		racers[i] = &racer{host: h, s: s, before: before, say: fmt.Sprintf("I like racer %d.", i)}
	}
	var wg sync.WaitGroup
	for _, r := range racers {
		wg.Go(func() {
			_, r.err = r.host.agent.Run(ctx, r.s, []abi.Message{abi.NewMessage(abi.RoleUser, r.say)}, nil)
		})
	}
	wg.Wait()
	var winner, loser *racer
	for _, r := range racers {
		switch {
		case r.err == nil && winner == nil:
			winner = r
		case errors.Is(r.err, session.ErrStaleRevision) && loser == nil:
			loser = r
		}
	}
	if winner == nil || loser == nil {
		return fmt.Errorf("want one commit to win and one to fail with session.ErrStaleRevision, got %v and %v", racers[0].err, racers[1].err)
	}
	if after, _ := json.Marshal(loser.s); string(after) != string(loser.before) {
		return fmt.Errorf("the losing agent's session changed:\nbefore %s\nafter  %s", loser.before, after)
	}
	stored, err := open().Load(ctx, id)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if err := same(winner.s, stored); err != nil {
		return fmt.Errorf("the store does not hold the winner's session: %w", err)
	}
	if stored.Revision != 2 {
		return fmt.Errorf("stored revision: want 2, got %d", stored.Revision)
	}
	return nil
}

// run loads the session (or starts it) and runs one user message with a
// run id, returning the result and the session as the run left it.
func (h *host) run(ctx context.Context, id, text, runID string) (*agent.RunResult, *session.Session, error) {
	s, err := h.store.Load(ctx, id)
	if errors.Is(err, session.ErrNotFound) {
		s = session.New()
		s.SessionID = id
	} else if err != nil {
		return nil, nil, fmt.Errorf("load: %w", err)
	}
	res, err := h.agent.Run(ctx, s, []abi.Message{abi.NewMessage(abi.RoleUser, text)}, &agent.RunOptions{RunID: runID})
	return res, s, err
}

// stored returns the stored session's revision and history.
func stored(ctx context.Context, st store.Store, id string) (int64, string, error) {
	s, err := st.Load(ctx, id)
	if err != nil {
		return 0, "", fmt.Errorf("load: %w", err)
	}
	h, err := history(s)
	return s.Revision, h, err
}

func caseRunIDsRecognised(ctx context.Context, open func() store.Store) error {
	const id = "runids"
	hosts, err := twoHosts(open)
	if err != nil {
		return err
	}
	first, _, err := hosts[0].run(ctx, id, "I like cake.", "r3")
	if err != nil {
		return fmt.Errorf("run r3: %w", err)
	}
	if _, _, err := hosts[1].run(ctx, id, "What do I like?", "r4"); err != nil {
		return fmt.Errorf("run r4: %w", err)
	}
	rev, hist, err := stored(ctx, open(), id)
	if err != nil {
		return err
	}
	// check runs r3 again, with text, on a host's own handle: the run
	// changes nothing, whatever it returns.
	check := func(h *host, text string) (*agent.RunResult, error) {
		res, _, err := h.run(ctx, id, text, "r3")
		r, got, serr := stored(ctx, open(), id)
		if serr != nil {
			return nil, serr
		}
		if r != rev || got != hist {
			return nil, fmt.Errorf("repeating run r3 (%q) changed the stored session: revision %d, now %d; history\n%s\nnow\n%s", text, rev, r, hist, got)
		}
		return res, err
	}
	for i, h := range hosts {
		res, err := check(h, "I like cake.")
		switch {
		case err != nil:
			return fmt.Errorf("repeating run r3 after r4 on host %d: %w", i, err)
		case !res.Replayed || res.Text() != first.Text():
			return fmt.Errorf("repeating run r3 after r4 on host %d: want the recorded reply %q, replayed, got %q (replayed %v)", i, first.Text(), res.Text(), res.Replayed)
		}
	}
	if _, err := check(hosts[1], "I like tea."); !errors.Is(err, agent.ErrRunIDReused) {
		return fmt.Errorf("run r3 with another input: want agent.ErrRunIDReused, got %v", err)
	}

	// The window holds session.MaxRecentRuns ids: r3 is recognised until
	// that many later runs committed.
	for i := 2; i < session.MaxRecentRuns; i++ {
		if _, _, err := hosts[i%2].run(ctx, id, fmt.Sprintf("I like number %d.", i), fmt.Sprintf("w%d", i)); err != nil {
			return fmt.Errorf("run w%d: %w", i, err)
		}
	}
	if rev, hist, err = stored(ctx, open(), id); err != nil {
		return err
	}
	if res, err := check(hosts[0], "I like cake."); err != nil || !res.Replayed {
		return fmt.Errorf("run r3, the oldest of %d run ids, was not recognised: %v", session.MaxRecentRuns, err)
	}
	if _, _, err := hosts[0].run(ctx, id, "I like soup.", "w64"); err != nil {
		return fmt.Errorf("run w64: %w", err)
	}
	res, s, err := hosts[1].run(ctx, id, "I like cake.", "r3")
	if err != nil {
		return fmt.Errorf("run r3 after %d later run ids: %w", session.MaxRecentRuns, err)
	}
	if res.Replayed || s.Revision != rev+2 {
		return fmt.Errorf("run r3 after %d later run ids: want it run again (revision %d), got replayed %v at revision %d", session.MaxRecentRuns, rev+2, res.Replayed, s.Revision)
	}
	return nil
}
