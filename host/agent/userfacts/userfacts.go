// Package userfacts is a sample context provider that learns: it remembers
// the facts a user states about themselves ("I like green tea", "my name is
// Ann", "remember that the meeting is on Friday") and hands them to every
// later run of that user, in any of their sessions. It shows the agent's
// after-run hook (agent.AfterRunner): facts are learned from what a run
// committed, and only once the run is committed.
//
// The user is named by the run's context (WithUser), since one agent serves
// many users and a session does not say whose it is. Facts are kept in
// memory, per Memory; an embedder that needs them to survive a restart
// keeps them in its own database, written the same way.
package userfacts

import (
	"context"
	"regexp"
	"strings"
	"sync"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/agent"
	"github.com/wasmhist/wasmhist/host/session"
)

// Name is the provider's name (agent.ContextProvider.Name).
const Name = "user-facts"

// Lead starts the message that carries a user's facts into a run.
const Lead = "What I told you about myself in earlier conversations:"

// MaxFacts bounds the facts kept per user; the oldest go first.
const MaxFacts = 100

type userKey struct{}

// WithUser returns ctx naming the user whose run it carries.
func WithUser(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userKey{}, id)
}

func userOf(ctx context.Context) string {
	id, _ := ctx.Value(userKey{}).(string)
	return id
}

// Memory remembers facts by user id. It is safe for concurrent use.
type Memory struct {
	mu    sync.Mutex
	facts map[string][]string
}

var (
	_ agent.ContextProvider = (*Memory)(nil)
	_ agent.AfterRunner     = (*Memory)(nil)
)

// New returns an empty memory.
func New() *Memory { return &Memory{facts: map[string][]string{}} }

// Name implements agent.ContextProvider.
func (m *Memory) Name() string { return Name }

// Facts returns what the user stated, oldest first.
func (m *Memory) Facts(user string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.facts[user]...)
}

// Context implements agent.ContextProvider: one user message with the
// user's facts, in their own words, or nothing. A run without a user in its
// context gets nothing.
func (m *Memory) Context(ctx context.Context, _ *session.Session, _ []abi.Message) ([]abi.Message, error) {
	facts := m.Facts(userOf(ctx))
	if userOf(ctx) == "" || len(facts) == 0 {
		return nil, nil
	}
	return []abi.Message{abi.NewMessage(abi.RoleUser, Lead+"\n"+strings.Join(facts, ".\n")+".")}, nil
}

// statement is a clause in which the user states a fact about themselves.
var statement = regexp.MustCompile(`(?i)^(?:i (?:really |also |do |still )?(?:like|love|enjoy|adore|prefer) .+|my name is .+|call me .+|my favou?rite [\p{L} ]+ is .+|(?:please )?remember (?:that )?.+)$`)

// clauseSep splits text at sentence ends and at " and I" / " and my".
var clauseSep = regexp.MustCompile(`[.!?;]+(?:\s+|$)|\n+|,? and (?i:(?:i|my) )`)

// statements returns the statements among the user messages of msgs.
func statements(msgs []abi.Message) []string {
	var out []string
	for _, msg := range msgs {
		if msg.Role != abi.RoleUser {
			continue
		}
		text := msg.TextContent()
		for _, loc := range splitKeep(text) {
			if c := strings.TrimSpace(loc); statement.MatchString(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// splitKeep splits text into clauses; a separator that swallowed "I" or
// "my" gives it back to the clause it starts.
func splitKeep(text string) []string {
	var out []string
	last := 0
	for _, ix := range clauseSep.FindAllStringIndex(text, -1) {
		out = append(out, text[last:ix[0]])
		sep := strings.ToLower(text[ix[0]:ix[1]])
		switch last = ix[1]; {
		case strings.HasSuffix(sep, " and my "):
			last -= len("my ")
		case strings.HasSuffix(sep, " and i "):
			last -= len("i ")
		}
	}
	return append(out, text[last:])
}

// AfterRun implements agent.AfterRunner: the statements among what the run
// committed are remembered for the run's user once the commit is through,
// so a run that fails, or whose commit does, teaches nothing.
func (m *Memory) AfterRun(ctx context.Context, c *agent.RunCommit) error {
	user := userOf(ctx)
	if user == "" {
		return nil
	}
	learned := statements(c.Messages)
	if len(learned) == 0 {
		return nil
	}
	c.OnCommit(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		known := m.facts[user]
		for _, f := range learned {
			if !contains(known, f) {
				known = append(known, f)
			}
		}
		if len(known) > MaxFacts {
			known = known[len(known)-MaxFacts:]
		}
		m.facts[user] = known
	})
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
