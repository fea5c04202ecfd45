package pgtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Proxy is a Unix socket in front of a Server that forwards every byte
// both ways and reads what the clients send, message by message, to count
// the round trips they make: each Sync of the extended protocol and each
// simple Query is one point where the client waits for the server's
// ReadyForQuery. Tests use it to bound the round trips of a piece of work.
type Proxy struct {
	dir string
	srv *Server
	ln  net.Listener

	mu    sync.Mutex
	trips []string
	conns int
}

// Proxy starts a proxy in front of s, closed when tb ends.
func (s *Server) Proxy(tb testing.TB) *Proxy {
	tb.Helper()
	// A directory of its own under /tmp: a socket's path is short.
	dir, err := os.MkdirTemp("", "wasmhist-pgproxy-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", port)))
	if err != nil {
		tb.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{dir: dir, srv: s, ln: ln}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns++
			p.mu.Unlock()
			go p.serve(c)
		}
	}()
	return p
}

// DSN is Server.DSN through the proxy.
func (p *Proxy) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", p.dir, port, Superuser, db)
}

// Trips returns the round trips made since the last call (or the start),
// each described by the statements sent in it: a simple query's text, the
// text of each statement parsed ("parse: ..."), "execute <name>" for a
// statement prepared earlier, and "cancel" for a cancel request.
func (p *Proxy) Trips() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.trips
	p.trips = nil
	return t
}

// Conns is the number of connections the proxy accepted so far.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

func (p *Proxy) trip(s string) {
	p.mu.Lock()
	p.trips = append(p.trips, s)
	p.mu.Unlock()
}

// Protocol codes of the untyped messages a client may open with.
const (
	sslRequest    = 80877103
	gssRequest    = 80877104
	cancelRequest = 80877102
)

func (p *Proxy) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("unix", filepath.Join(p.srv.Dir, fmt.Sprintf(".s.PGSQL.%d", port)))
	if err != nil {
		return
	}
	defer u.Close()
	go func() {
		io.Copy(c, u)
		c.Close()
	}()
	r := bufio.NewReader(c)
	// The untyped opening messages, then typed ones.
	for {
		msg, err := readUntyped(r)
		if err != nil {
			return
		}
		if _, err := u.Write(msg); err != nil {
			return
		}
		code := binary.BigEndian.Uint32(msg[4:8])
		if code == cancelRequest {
			p.trip("cancel")
			return
		}
		if code != sslRequest && code != gssRequest {
			break
		}
	}
	var group []string
	for {
		typ, msg, err := readTyped(r)
		if err != nil {
			return
		}
		body := msg[5:]
		switch typ {
		case 'Q':
			p.trip(strings.TrimSuffix(string(body), "\x00"))
		case 'P':
			name, rest, _ := strings.Cut(string(body), "\x00")
			q, _, _ := strings.Cut(rest, "\x00")
			if name != "" {
				q = name + ": " + q
			}
			group = append(group, "parse: "+q)
		case 'B':
			_, rest, _ := strings.Cut(string(body), "\x00")
			name, _, _ := strings.Cut(rest, "\x00")
			if name != "" && !parsed(group, name) {
				group = append(group, "execute "+name)
			}
		case 'S':
			p.trip(strings.Join(group, "; "))
			group = nil
		}
		if _, err := u.Write(msg); err != nil {
			return
		}
	}
}

func parsed(group []string, name string) bool {
	for _, g := range group {
		if strings.HasPrefix(g, "parse: "+name+": ") {
			return true
		}
	}
	return false
}

func readUntyped(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := binary.BigEndian.Uint32(n[:])
	if l < 8 || l > 1<<20 {
		return nil, errors.New("pgtest: proxy: bad opening message")
	}
	msg := make([]byte, l)
	copy(msg, n[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

func readTyped(r *bufio.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	l := binary.BigEndian.Uint32(h[1:])
	if l < 4 || l > 1<<30 {
		return 0, nil, errors.New("pgtest: proxy: bad message")
	}
	msg := make([]byte, 1+l)
	copy(msg, h[:])
	_, err := io.ReadFull(r, msg[5:])
	return h[0], msg, err
}
