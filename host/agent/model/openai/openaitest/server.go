package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// createdAt is the fixed creation time of every object the fake returns, so
// recorded output is deterministic.
const createdAt = 1700000000

// heldGrace bounds how long cleanup waits for clients to close held-open
// streams before reporting them as leaked.
const heldGrace = 5 * time.Second

// Server is a strict fake OpenAI-compatible service on a loopback address.
// It is safe for concurrent use.
type Server struct {
	// URL is the API base URL, ending in /v1, as clients expect it
	// (OPENAI_BASE_URL style).
	URL string

	tb  testing.TB
	srv *httptest.Server

	mu            sync.Mutex
	queue         []Reply
	handler       func(Request) Reply
	requests      []Request
	apiKey        string
	seq           int
	responses     map[string]*storedResponse
	conversations map[string]*conversation

	held        sync.WaitGroup
	closing     chan struct{}
	disconnects chan struct{}
}

// Request is one request the fake received, recorded before validation.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the raw request body, exactly as sent.
	Body []byte

	// Chat is the decoded body of a chat completions request, nil
	// otherwise or when the body does not decode.
	Chat *ChatRequest
	// Responses is the decoded body of a responses request, nil otherwise
	// or when the body does not decode.
	Responses *ResponsesRequest
}

// Field returns the raw value of a top-level field of the JSON body.
func (r Request) Field(name string) (json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Body, &m) != nil {
		return nil, false
	}
	v, ok := m[name]
	return v, ok
}

// Has reports whether the JSON body has the top-level field name, even with
// a null value; it is how a test asserts that an unset option was not sent.
func (r Request) Has(name string) bool {
	_, ok := r.Field(name)
	return ok
}

// Contains reports whether s occurs anywhere in the raw body.
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// NewServer starts a fake on loopback; it is closed when the test ends.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{
		tb:            tb,
		responses:     map[string]*storedResponse{},
		conversations: map[string]*conversation{},
		closing:       make(chan struct{}),
		disconnects:   make(chan struct{}, 64),
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL + "/v1"
	tb.Cleanup(s.close)
	return s
}

func (s *Server) close() {
	done := make(chan struct{})
	go func() { s.held.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(heldGrace):
		s.tb.Errorf("openaitest: a held-open stream was never closed by its client (leaked connection)")
	}
	close(s.closing)
	s.srv.Close()
}

// Enqueue appends scripted replies; each valid model request takes the next
// one. Requests that break a rule are answered with 400 and take none.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets a function that answers valid model requests when the queue is
// empty. Without a handler and with an empty queue the fake answers 500.
func (s *Server) Handle(h func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// RequireAPIKey makes the fake answer 401 unless requests carry
// "Authorization: Bearer key".
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastRequest returns the most recent request; it fails the test when there
// is none.
func (s *Server) LastRequest() Request {
	s.tb.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		s.tb.Fatalf("openaitest: no request received")
	}
	return reqs[len(reqs)-1]
}

// Pending returns how many queued replies are still unused.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Disconnected receives one value each time a client closes a stream that a
// HoldOpen reply kept open. A test waits on it to prove that a consumer
// that stopped early released the connection.
func (s *Server) Disconnected() <-chan struct{} { return s.disconnects }

// StoredResponse reports whether a response id is stored and can be
// continued with previous_response_id.
func (s *Server) StoredResponse(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.responses[id]
	return ok
}

// CreateConversation creates an empty conversation (as POST
// /v1/conversations does) and returns its id.
func (s *Server) CreateConversation() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newConversationLocked()
}

func (s *Server) newConversationLocked() string {
	id := s.nextIDLocked("conv_")
	s.conversations[id] = &conversation{}
	return id
}

func (s *Server) nextIDLocked(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%d", prefix, s.seq)
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextIDLocked(prefix)
}

// next takes the reply for a valid request.
func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	if len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return r
	}
	h := s.handler
	s.mu.Unlock()
	if h != nil {
		return h(req)
	}
	return Reply{Err: &APIError{
		Status:  http.StatusInternalServerError,
		Type:    "server_error",
		Message: "openaitest: no reply queued and no handler set",
	}}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, invalid("", "could not read body: %v", err))
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		var cr ChatRequest
		if json.Unmarshal(body, &cr) == nil {
			rec.Chat = &cr
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		var rr ResponsesRequest
		if json.Unmarshal(body, &rr) == nil {
			rec.Responses = &rr
		}
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	key := s.apiKey
	s.mu.Unlock()

	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, &APIError{
			Status:  http.StatusUnauthorized,
			Type:    "invalid_request_error",
			Code:    "invalid_api_key",
			Message: "Incorrect API key provided.",
		})
		return
	}

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.serveChat(w, r, rec)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		s.serveResponses(w, r, rec)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/responses/"):
		s.serveGetResponse(w, strings.TrimPrefix(r.URL.Path, "/v1/responses/"))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/conversations":
		id := s.CreateConversation()
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "conversation", "created_at": createdAt, "metadata": map[string]any{},
		})
	default:
		writeError(w, &APIError{
			Status:  http.StatusNotFound,
			Type:    "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path),
		})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *APIError) {
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	body := map[string]any{
		"message": e.Message,
		"type":    e.Type,
		"param":   nullable(e.Param),
		"code":    nullable(e.Code),
	}
	writeJSON(w, status, map[string]any{"error": body})
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// sse writes server-sent events and flushes each one, so the client sees
// deltas as they are produced.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (e *sse) send(event string, v any) {
	data, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(e.w, "event: %s\n", event)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", data)
	e.flush()
}

func (e *sse) done() {
	fmt.Fprint(e.w, "data: [DONE]\n\n")
	e.flush()
}

func (e *sse) flush() {
	if e.f != nil {
		e.f.Flush()
	}
}

// hold keeps a stream open until its client goes away (or the fake closes).
func (s *Server) hold(r *http.Request) {
	s.held.Add(1)
	defer s.held.Done()
	select {
	case <-r.Context().Done():
		select {
		case s.disconnects <- struct{}{}:
		default:
		}
	case <-s.closing:
	}
}

// deltas splits a reply's text into stream deltas.
func (rp Reply) deltas() []string {
	if rp.TextDeltas != nil {
		return rp.TextDeltas
	}
	if rp.Text == "" {
		return nil
	}
	var out []string
	rest := rp.Text
	for rest != "" {
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			out = append(out, rest)
			break
		}
		out = append(out, rest[:i+1])
		rest = rest[i+1:]
	}
	return out
}

func (rp Reply) text() string {
	if rp.TextDeltas != nil {
		return strings.Join(rp.TextDeltas, "")
	}
	return rp.Text
}

func (rp Reply) usage() Usage {
	if rp.Usage != nil {
		return *rp.Usage
	}
	return Usage{InputTokens: 10, OutputTokens: 5}
}

// calls fills in missing call ids.
func (s *Server) calls(rp Reply) []ToolCall {
	out := make([]ToolCall, len(rp.ToolCalls))
	for i, c := range rp.ToolCalls {
		if c.ID == "" {
			c.ID = s.nextID("call_")
		}
		if c.Arguments == "" {
			c.Arguments = "{}"
		}
		out[i] = c
	}
	return out
}
