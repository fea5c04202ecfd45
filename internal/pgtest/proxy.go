package pgtest

import (
	"encoding/binary"
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
// the round trips they make. A sync point is a Sync of the extended
// protocol or a simple Query: the client reads the server's
// ReadyForQuery for each. A round trip is a write of the client's that
// ends with one or more sync points: a client that waits for an answer
// before it writes again makes one per wait, and sync points it sends
// together (a pipeline) count once. Tests use it to bound the round trips
// of a piece of work.
type Proxy struct {
	dir string
	srv *Server
	ln  net.Listener

	mu    sync.Mutex
	trips []string
	syncs int
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
// each described by its sync points, " | " between them, and those by the
// statements sent in them: a simple query's text, the text of each
// statement parsed ("parse: ..."), "execute <name>" for a statement
// prepared earlier; "cancel" is a cancel request. syncs is the number of
// sync points.
func (p *Proxy) Trips() (trips []string, syncs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	trips, syncs = p.trips, p.syncs
	p.trips, p.syncs = nil, 0
	return trips, syncs
}

// Conns is the number of connections the proxy accepted so far.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

func (p *Proxy) trip(syncs []string) {
	p.mu.Lock()
	p.trips = append(p.trips, strings.Join(syncs, " | "))
	p.syncs += len(syncs)
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
	// Each read returns what the client wrote since the last one: all of
	// a write it made before waiting for an answer.
	buf, pending := make([]byte, 1<<20), []byte(nil)
	opening := true
	var group, syncs []string
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, err := u.Write(buf[:n]); err != nil {
				return
			}
			pending = append(pending, buf[:n]...)
		}
		for {
			if opening {
				if len(pending) < 8 {
					break
				}
				l := int(binary.BigEndian.Uint32(pending))
				if l < 8 || l > 1<<20 {
					return
				}
				if len(pending) < l {
					break
				}
				code := binary.BigEndian.Uint32(pending[4:8])
				pending = pending[l:]
				if code == cancelRequest {
					p.trip([]string{"cancel"})
				}
				opening = code == sslRequest || code == gssRequest
				continue
			}
			if len(pending) < 5 {
				break
			}
			l := int(binary.BigEndian.Uint32(pending[1:5]))
			if l < 4 {
				return
			}
			if len(pending) < 1+l {
				break
			}
			typ, body := pending[0], string(pending[5:1+l])
			pending = pending[1+l:]
			switch typ {
			case 'Q':
				syncs = append(syncs, strings.TrimSuffix(body, "\x00"))
			case 'P':
				name, rest, _ := strings.Cut(body, "\x00")
				q, _, _ := strings.Cut(rest, "\x00")
				if name != "" {
					q = name + ": " + q
				}
				group = append(group, "parse: "+q)
			case 'B':
				_, rest, _ := strings.Cut(body, "\x00")
				name, _, _ := strings.Cut(rest, "\x00")
				if name != "" && !parsed(group, name) {
					group = append(group, "execute "+name)
				}
			case 'S':
				syncs = append(syncs, strings.Join(group, "; "))
				group = nil
			}
		}
		if len(syncs) > 0 {
			p.trip(syncs)
			syncs = nil
		}
		if err != nil {
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
