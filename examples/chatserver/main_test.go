package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/agent/model/openai"
	"github.com/wasmhist/wasmhist/host/agent/model/openai/openaitest"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store/sqlitestore"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// fakeModel answers as a model would, from the request alone, so that
// concurrent users each get their own answers from one strict fake: a
// question about the weather calls the forecast tool, the tool's result is
// turned into a sentence, and anything else is thanked with the number of
// messages the model was sent (the history proves itself loaded).
func fakeModel(r openaitest.Request) openaitest.Reply {
	msgs := r.Chat.Messages
	last := msgs[len(msgs)-1]
	if last.Role == "tool" {
		var f struct{ City, Sky string }
		if err := json.Unmarshal([]byte(last.Text()), &f); err != nil {
			return openaitest.Fail(400, "tool result: "+err.Error())
		}
		return openaitest.Text(fmt.Sprintf("It is %s in %s.", f.Sky, f.City))
	}
	if city, ok := strings.CutPrefix(last.Text(), "weather in "); ok {
		return openaitest.Calls(openaitest.ToolCall{Name: "forecast", Arguments: fmt.Sprintf(`{"city":%q}`, city)})
	}
	return openaitest.Text(fmt.Sprintf("You are welcome (%d messages).", len(msgs)))
}

// post sends one chat message and returns the streamed reply.
func post(web, user, key, message string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, web+"/chat/"+user, strings.NewReader(url.Values{"message": {message}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || strings.Contains(string(b), "error:")) {
		err = fmt.Errorf("POST %s %q: %s: %s", user, message, resp.Status, b)
	}
	return string(b), err
}

// stored reads a user's history from the service, rendered one message a
// string.
func stored(t *testing.T, web, user string) []string {
	t.Helper()
	resp, err := http.Get(web + "/chat/" + user)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var m abi.Message
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		s := string(m.Role) + ":" + m.TextContent()
		for _, c := range m.Contents {
			switch c.Type {
			case abi.ContentFunctionCall:
				s += fmt.Sprintf("call %s %s", c.Name, c.Arguments)
			case abi.ContentFunctionResult:
				s += "result " + string(c.Result)
			}
		}
		out = append(out, s)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestChatServer drives 20 users at once against the strict fake OpenAI
// service. Each asks about the weather twice at once with one
// idempotency key (a client retrying while its first request still runs),
// once more with that key after the answer, and then thanks the model.
// Every reply is right, every stored history holds each turn once (the
// tool call and its result among them), and every session is at revision 2
// in the plugin's database.
func TestChatServer(t *testing.T) {
	const users = 20
	ctx := context.Background()
	wasm := sdktest.BuildPlugin(t, "github.com/wasmhist/wasmhist/plugins/sqlite")
	// The users' calls run the compiled plugin, as after `make install`: a
	// first host loads it and waits until it is compiled into the shared
	// compile cache (a never-seen plugin's first calls run on the
	// interpreter, whose calls 20 users at once under the race detector
	// can push past the 5 s call deadline).
	warm, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	wp, err := warm.Load(ctx, host.File(wasm), host.LoadOptions{Grants: []host.Grant{sqlgrant.New(sqlgrant.Config{Path: filepath.Join(t.TempDir(), "warm.db")})}})
	require.NoError(t, err)
	require.NoError(t, wp.Compiled(ctx))
	require.NoError(t, warm.Close(ctx))
	h, err := host.New(ctx, host.Config{})
	require.NoError(t, err)
	defer h.Close(ctx)
	srv := openaitest.NewServer(t)
	srv.Handle(fakeModel)
	db := filepath.Join(t.TempDir(), "chat.db")
	handler, err := newHandler(ctx, h, wasm, db, openai.NewChat(openai.Options{BaseURL: srv.URL, APIKey: "sk-test", Model: "test-model"}))
	require.NoError(t, err)
	web := httptest.NewServer(handler)
	defer web.Close()

	var wg sync.WaitGroup
	errs := make(chan error, users*5)
	for i := range users {
		user, city := fmt.Sprint("user-", i), fmt.Sprint("City", i)
		wg.Go(func() {
			expect := func(key, message, want string) {
				got, err := post(web.URL, user, key, message)
				if err == nil && got != want {
					err = fmt.Errorf("%s %q (key %s): want %q, got %q", user, message, key, want, got)
				}
				errs <- err
			}
			sunny := "It is sunny in " + city + "."
			var twice sync.WaitGroup
			for range 2 {
				twice.Go(func() { expect(user+"-1", "weather in "+city, sunny) })
			}
			twice.Wait()
			expect(user+"-1", "weather in "+city, sunny)
			expect(user+"-2", "thanks", "You are welcome (5 messages).")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	for i := range users {
		user, city := fmt.Sprint("user-", i), fmt.Sprint("City", i)
		assert.Equal(t, []string{
			"user:weather in " + city,
			fmt.Sprintf(`assistant:call forecast {"city":%q}`, city),
			fmt.Sprintf(`tool:result {"city":%q,"sky":"sunny"}`, city),
			"assistant:It is sunny in " + city + ".",
			"user:thanks",
			"assistant:You are welcome (5 messages).",
		}, stored(t, web.URL, user), user)
	}
	sessions, err := sqlitestore.Open(db)
	require.NoError(t, err)
	defer sessions.Close()
	infos, err := sessions.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, users)
	for _, info := range infos {
		assert.EqualValues(t, 2, info.Revision, info.SessionID)
	}
	assert.Equal(t, users*3, len(srv.Requests()), "model requests: three per user, none for a replay")

	// A user id no session can have is the client's error, on either
	// route, and costs no model request.
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, err := http.NewRequest(method, web.URL+"/chat/a%5Cb", strings.NewReader("message=hi"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", method, body)
		assert.Contains(t, string(body), "invalid session id", method)
	}
	assert.Equal(t, users*3, len(srv.Requests()))
}

// TestMainIsShort: the service is at most 60 lines of Go, not counting the
// import block, blank lines and comment lines.
func TestMainIsShort(t *testing.T) {
	b, err := os.ReadFile("main.go")
	require.NoError(t, err)
	lines, inImport := 0, false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "import (":
			inImport = true
		case inImport:
			inImport = l != ")"
		case l == "", strings.HasPrefix(l, "//"):
		default:
			lines++
		}
	}
	assert.LessOrEqual(t, lines, 60)
	t.Logf("main.go: %d lines of code", lines)
}
