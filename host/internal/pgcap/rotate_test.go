package pgcap

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/internal/pgtest"
)

// newEnv is a host on database db of srv whose admin connects with dsn,
// and a superuser's connection to inspect it.
func newEnv(t *testing.T, srv *pgtest.Server, db, dsn string) *env {
	e := &env{dsn: dsn, store: NewStore(), adminSuper: db == "postgres"}
	t.Cleanup(func() { e.store.Close() })
	var err error
	e.admin, err = pgx.Connect(context.Background(), srv.DSN(db))
	require.NoError(t, err)
	t.Cleanup(func() { e.admin.Close(context.Background()) })
	return e
}

// TestRotateKey rotates the host key under a host that holds the old one,
// with a superuser and with a CREATEROLE admin: the old key opens nothing,
// every plugin role's password and tenant name follow the new key with
// their data, and the running host fails a call or two, commits nothing
// of them, and then serves with the new key.
func TestRotateKey(t *testing.T) {
	srv := pgtest.Start(t)
	for _, mode := range []struct{ name, db, dsn string }{
		{"superuser admin", "postgres", srv.DSN("postgres")},
		{"createrole admin", "managed", srv.Admin(t, "managed")},
	} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, srv, mode.db, mode.dsn)

			_, err := RotateKey(ctx, e.dsn, "")
			require.ErrorContains(t, err, "no host has provisioned it", "nothing to rotate yet")

			plain := e.grant("plain", Limits{})
			tenants := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "multi", Tenant: func(ctx context.Context) (string, error) {
				return ctx.Value(tenantKey{}).(string), nil
			}})
			actx := context.WithValue(ctx, tenantKey{}, "acme")
			e.oneCall(t, plain, "CREATE TABLE m (x text)", "INSERT INTO m VALUES ('before')")
			// Another host, which serves the tenant: each host finds the
			// rotation on its own.
			et := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
			t.Cleanup(func() { et.store.Close() })
			c := et.begin(actx, t, tenants)
			c.must(actx, "CREATE TABLE m (x text)", "INSERT INTO m VALUES ('before')")
			require.NoError(t, c.end(actx, true))
			// A third, which has read the key and serves a tenant new to
			// it after the rotation.
			en := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
			t.Cleanup(func() { en.store.Close() })
			en.oneCall(t, plain, "SELECT 1")
			db, err := e.store.database(ctx, &Config{Name: "main", AdminDSN: e.dsn, Schema: "plain"})
			require.NoError(t, err)
			oldKey, oldSchema := db.key, e.tenantSchema(t, "multi", "acme")
			plainRole, oldTenantRole := roleName(db.db, "plain"), roleName(db.db, oldSchema)
			e.superExec(t, "INSERT INTO wasmhist.journal (owner, id, revision, updated, data) VALUES ('"+oldTenantRole+"', 'j', 1, now(), '{}')")

			rot, err := RotateKey(ctx, e.dsn, "")
			require.NoError(t, err)
			assert.Equal(t, 2, rot.Roles, "the plain role and the tenant's")
			assert.Equal(t, 1, rot.Tenants)
			assert.GreaterOrEqual(t, rot.Ended, 2, "each role's pool kept a connection")

			newKey := e.adminValue(t, "SELECT key FROM wasmhist.host_key")
			require.Len(t, newKey, 64)
			require.NotEqual(t, oldKey, newKey)
			_, err = e.admin.Exec(ctx, "SELECT wasmhist.check_key($1)", oldKey)
			require.ErrorContains(t, err, keyRefused, "the old key opens the host's functions")
			_, err = e.admin.Exec(ctx, "SELECT wasmhist.check_key($1)", newKey)
			require.NoError(t, err)

			newSchema := tenantSchema(newKey, "multi", "acme")
			newTenantRole := roleName(db.db, newSchema)
			require.NotEqual(t, oldSchema, newSchema)
			assert.Equal(t, newSchema, e.tenantSchema(t, "multi", "acme"))
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_namespace WHERE nspname = '"+oldSchema+"'"))
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_roles WHERE rolname = '"+oldTenantRole+"'"))
			assert.Equal(t, newTenantRole, e.adminValue(t, "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = '"+newSchema+"'"))
			assert.Equal(t, "before", e.adminValue(t, "SELECT x FROM "+newSchema+".m"))
			assert.Equal(t, newTenantRole, e.adminValue(t, "SELECT owner FROM wasmhist.journal WHERE id = 'j'"))
			for _, role := range []string{plainRole, newTenantRole} {
				v := e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = '"+role+"'")
				assert.True(t, scramMatches(t, v, password(newKey, role)), "%s: the new key's password", role)
				assert.False(t, scramMatches(t, v, password(oldKey, role)), "%s: the old key's password", role)
			}

			// The hosts that hold the old key: each one's write fails
			// while it does (its pooled connection ended, then the key or
			// the renamed role refused), commits nothing then, and
			// succeeds once it read the new key.
			for _, w := range []struct {
				name  string
				ctx   context.Context
				grant func() *testCall
				table string
			}{
				{"plain", ctx, func() *testCall { return e.begin(ctx, t, plain) }, "plain.m"},
				{"tenant", actx, func() *testCall { return et.begin(actx, t, tenants) }, newSchema + ".m"},
			} {
				var errs []error
				var fault error
				for len(errs) < 3 {
					c := w.grant()
					_, err := c.sql(w.ctx, "INSERT INTO m VALUES ('after')")
					if err == nil {
						err = c.end(w.ctx, true)
					} else {
						c.end(w.ctx, false)
					}
					if err == nil {
						break
					}
					errs = append(errs, err)
					fault = c.call.Fault()
					t.Logf("%s: %v", w.name, err)
				}
				require.Less(t, len(errs), 3, "%s: no write succeeded: %v", w.name, errs)
				require.NotEmpty(t, errs, "%s: the old key served a write", w.name)
				last := errs[len(errs)-1]
				assert.ErrorContains(t, last, "the host key was rotated after this host read it", w.name)
				// The host's fault, not the plugin's: the call fails with
				// it whatever the plugin makes of its error.
				assert.ErrorIs(t, fault, ErrKeyRotated, w.name)
				assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM "+w.table+" WHERE x = 'after'"), "%s: a failed call committed", w.name)
			}
			// Provisioning checks the key it derives from: a host holding
			// the old one makes no schema under the name it derives.
			ictx := context.WithValue(ctx, tenantKey{}, "initech")
			c = en.begin(ictx, t, tenants)
			_, err = c.sql(ictx, "CREATE TABLE m (x text)")
			require.ErrorContains(t, err, "the host key was rotated after this host read it")
			c.end(ictx, false)
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM pg_namespace WHERE nspname = '"+tenantSchema(oldKey, "multi", "initech")+"'"))
			c = en.begin(ictx, t, tenants)
			resp := c.must(ictx, "CREATE TABLE m (x text)", "SELECT current_schema()::text")
			require.NoError(t, c.end(ictx, true))
			assert.JSONEq(t, mustJSON([]string{tenantSchema(newKey, "multi", "initech")}), mustJSON(resp.Results[1].Rows[0]))
			for _, s := range []*Store{e.store, et.store, en.store} {
				now, err := s.database(ctx, &Config{Name: "main", AdminDSN: e.dsn, Schema: "plain"})
				require.NoError(t, err)
				assert.Equal(t, newKey, now.key)
			}

			// A host that started after the rotation serves both with
			// the new key at once.
			s2 := NewStore()
			t.Cleanup(func() { s2.Close() })
			e2 := &env{dsn: e.dsn, store: s2, admin: e.admin}
			assert.JSONEq(t, `[2]`, mustJSON(e2.oneCall(t, plain, "SELECT count(*) FROM m").Results[0].Rows[0]))
			c = e2.begin(actx, t, tenants)
			resp = c.must(actx, "SELECT count(*) FROM m", "SELECT current_schema()::text")
			require.NoError(t, c.end(actx, true))
			assert.JSONEq(t, `[2]`, mustJSON(resp.Results[0].Rows[0]))
			assert.JSONEq(t, mustJSON([]string{newSchema}), mustJSON(resp.Results[1].Rows[0]))
		})
	}
}

// TestRotateKeyRaces: what a plugin, an operator's own role, a host of an
// older version or a call in flight can do to a rotation, and a retired
// database's close.
func TestRotateKeyRaces(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	e := newEnv(t, srv, "postgres", srv.DSN("postgres"))
	tenants := NewGrant(Config{Name: "main", AdminDSN: e.dsn, Schema: "multi", Tenant: func(ctx context.Context) (string, error) {
		return ctx.Value(tenantKey{}).(string), nil
	}})
	actx := context.WithValue(ctx, tenantKey{}, "acme")
	c := e.begin(actx, t, tenants)
	c.must(actx, "CREATE TABLE m (x text)")
	require.NoError(t, c.end(actx, true))
	// fresh is a host that read the key as it is now.
	fresh := func(t *testing.T) *env {
		f := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
		t.Cleanup(func() { f.store.Close() })
		return f
	}
	orphans := func(t *testing.T) string {
		return e.adminValue(t, "SELECT count(*)::text FROM wasmhist.journal j WHERE NOT EXISTS (SELECT FROM pg_roles r WHERE r.rolname = j.owner)")
	}

	t.Run("a journal row written during the rotation keeps its role", func(t *testing.T) {
		rconn, err := pgx.Connect(ctx, e.dsn)
		require.NoError(t, err)
		defer rconn.Close(ctx)
		rtx, err := rconn.Begin(ctx)
		require.NoError(t, err)
		defer rtx.Rollback(ctx)
		// Its second transaction, without the first's logins off: a
		// connection that got in before them.
		_, _, err = rotate(ctx, rtx, "wasmhist")
		require.NoError(t, err)
		// The rotation is open; a run of the tenant's writes its journal
		// row (on a connection made after the rotation ended the others).
		done := make(chan error, 1)
		go func() {
			var err error
			for range 3 {
				tx := txn.New()
				tctx := txn.With(actx, tx)
				c := e.begin(tctx, t, tenants)
				if _, err = c.sql(tctx, "INSERT INTO m VALUES ('during')"); err == nil {
					if err = c.end(tctx, true); err == nil {
						if err = tx.Put(ctx, txn.PostgresTarget("main"), txn.Journal, "run-during", 1, []byte(`{}`)); err == nil {
							err = tx.Commit(ctx)
						}
					}
				}
				if err == nil {
					break
				}
				// A run that failed holds its connection until rolled
				// back, and the Store's close waits for it.
				tx.Rollback(ctx)
				if !strings.Contains(err.Error(), "connection was lost") {
					break
				}
			}
			done <- err
		}()
		// Until the run waits for a lock the rotation holds, or ended.
		waiting := func() bool {
			return e.adminValue(t, "SELECT count(*)::text FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'wasmhist sql multi%'") != "0"
		}
		var runErr error
		ended := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !waiting(); time.Sleep(20 * time.Millisecond) {
			select {
			case runErr = <-done:
				ended = true
			default:
			}
			if ended {
				break
			}
		}
		require.NoError(t, rtx.Commit(ctx))
		if !ended {
			runErr = <-done
		}
		t.Logf("the run during the rotation: %v", runErr)
		assert.Equal(t, "0", orphans(t), "a journal row names a role that is not there")
	})

	t.Run("a plugin holding its role's row does not stall it", func(t *testing.T) {
		f := fresh(t)
		evil := e.grant("evil", Limits{})
		f.oneCall(t, evil, "SELECT 1")
		c := f.begin(ctx, t, evil)
		c.must(ctx, "ALTER ROLE CURRENT_USER PASSWORD 'x'", "GRANT USAGE ON SCHEMA evil TO PUBLIC")
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		rot, err := RotateKey(rctx, e.dsn, "")
		require.NoError(t, err)
		assert.Less(t, time.Since(start), rotateLockWait, "it waited for the plugin's locks")
		assert.GreaterOrEqual(t, rot.Ended, 1)
		_, err = c.sql(ctx, "SELECT 1")
		require.Error(t, err, "the plugin's backend lives on")
		c.end(ctx, false)
		role := roleName("postgres", "evil")
		v := e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = '"+role+"'")
		assert.True(t, scramMatches(t, v, password(e.adminValue(t, "SELECT key FROM wasmhist.host_key"), role)), "the role kept a password it chose")
	})

	t.Run("an operator's role is not a plugin's", func(t *testing.T) {
		e.superExec(t, "CREATE ROLE reporter LOGIN PASSWORD 'operator-chosen'", "GRANT USAGE ON SCHEMA wasmhist TO reporter")
		rconn, err := pgx.Connect(ctx, strings.Replace(e.dsn, "user="+pgtest.Superuser, "user=reporter", 1))
		require.NoError(t, err)
		defer rconn.Close(ctx)
		before := e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = 'reporter'")
		_, err = RotateKey(ctx, e.dsn, "")
		require.NoError(t, err)
		assert.Equal(t, before, e.adminValue(t, "SELECT rolpassword FROM pg_authid WHERE rolname = 'reporter'"))
		require.NoError(t, rconn.Ping(ctx), "its connection was ended")
	})

	t.Run("a rotation that fails keeps the key and gives the logins back", func(t *testing.T) {
		// An operator's limit on a plugin role, which comes back too.
		fresh(t).oneCall(t, e.grant("plain", Limits{}), "SELECT 1")
		plainRole := roleName("postgres", "plain")
		e.superExec(t, "ALTER ROLE "+plainRole+" CONNECTION LIMIT 7")
		// A trigger that refuses the new key makes the second transaction
		// fail, after the first turned the logins off.
		e.superExec(t, `CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION 'refused by the operator'; END $f$`,
			`CREATE TRIGGER refuse BEFORE UPDATE ON wasmhist.host_key FOR EACH ROW EXECUTE FUNCTION public.refuse()`)
		before := e.adminValue(t, "SELECT key FROM wasmhist.host_key")
		_, err := RotateKey(ctx, e.dsn, "")
		require.ErrorContains(t, err, "refused by the operator")
		assert.Equal(t, before, e.adminValue(t, "SELECT key FROM wasmhist.host_key"))
		limits := func() string {
			return e.adminValue(t, `SELECT string_agg(DISTINCT rolconnlimit::text, ',' ORDER BY rolconnlimit::text) FROM pg_roles WHERE rolname LIKE 'wasmhist\_%'`)
		}
		assert.Equal(t, "-1,7", limits())
		assert.Equal(t, "7", e.adminValue(t, "SELECT rolconnlimit::text FROM pg_roles WHERE rolname = '"+plainRole+"'"))
		assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.login_limits"))
		fresh(t).oneCall(t, e.grant("plain", Limits{}), "SELECT 1")
		e.superExec(t, "DROP TRIGGER refuse ON wasmhist.host_key", "DROP FUNCTION public.refuse()")
		_, err = RotateKey(ctx, e.dsn, "")
		require.NoError(t, err)
		assert.Equal(t, "-1,7", limits(), "a rotation that succeeded")
		e.superExec(t, "ALTER ROLE "+plainRole+" CONNECTION LIMIT -1")
	})

	t.Run("a rotation stopped at a bound keeps the key and gives the logins back", func(t *testing.T) {
		fresh(t).oneCall(t, e.grant("plain", Limits{}), "SELECT 1")
		plainRole := roleName("postgres", "plain")
		e.superExec(t, "ALTER ROLE "+plainRole+" CONNECTION LIMIT 7")
		defer e.superExec(t, "ALTER ROLE "+plainRole+" CONNECTION LIMIT -1")
		key := func() string { return e.adminValue(t, "SELECT key FROM wasmhist.host_key") }
		// What each case below leaves: the old key, the operator's limit
		// and the others' back, nothing recorded, and logins that work.
		kept := func(t *testing.T, before string) {
			t.Helper()
			assert.Equal(t, before, key(), "the key changed")
			assert.Equal(t, "-1,7", e.adminValue(t, `SELECT string_agg(DISTINCT rolconnlimit::text, ',' ORDER BY rolconnlimit::text) FROM pg_roles WHERE rolname LIKE 'wasmhist\_%'`))
			assert.Equal(t, "0", e.adminValue(t, "SELECT count(*)::text FROM wasmhist.login_limits"))
			fresh(t).oneCall(t, e.grant("plain", Limits{}), "SELECT 1")
		}
		// holdJournal holds the lock a run's journal row takes, which the
		// rotation's second transaction waits for, after the first turned
		// the logins off; it returns the release.
		holdJournal := func(t *testing.T) func() {
			conn, err := pgx.Connect(ctx, e.dsn)
			require.NoError(t, err)
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, "LOCK TABLE wasmhist.journal IN ROW EXCLUSIVE MODE")
			require.NoError(t, err)
			return func() { tx.Rollback(ctx); conn.Close(ctx) }
		}

		t.Run("a lock held past the bound, three times", func(t *testing.T) {
			defer func(w time.Duration) { rotateLockWait = w }(rotateLockWait)
			rotateLockWait = 300 * time.Millisecond
			release := holdJournal(t)
			defer release()
			before := key()
			// A rotation without the bound would wait for the lock until
			// this context ends.
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err := RotateKey(rctx, e.dsn, "")
			require.ErrorContains(t, err, "a lock was held for longer than 300ms, 3 times: the old key stays; try again")
			assert.NoError(t, rctx.Err(), "the bound did not end the rotation")
			assert.LessOrEqual(t, strings.Count(err.Error(), "\n"), 1, "at most two lines")
			t.Logf("failed after %s: %v", time.Since(start), err)
			release()
			kept(t, before)
		})

		t.Run("its connection broken in the middle", func(t *testing.T) {
			// The server ends the rotation's backend as it writes the key.
			e.superExec(t, `CREATE FUNCTION public.cut() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(1); RETURN NEW; END $f$`,
				`CREATE TRIGGER cut BEFORE UPDATE ON wasmhist.host_key FOR EACH ROW EXECUTE FUNCTION public.cut()`)
			defer e.superExec(t, "DROP TRIGGER cut ON wasmhist.host_key", "DROP FUNCTION public.cut()")
			before := key()
			_, err := RotateKey(ctx, e.dsn, "")
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "logins back failed")
			t.Logf("failed with: %v", err)
			kept(t, before)
		})

		t.Run("its context ended while it waits", func(t *testing.T) {
			release := holdJournal(t)
			defer release()
			before := key()
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := RotateKey(rctx, e.dsn, "")
				done <- err
			}()
			waiting := `SELECT count(*)::text FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted AND c.relname = 'journal'`
			require.Eventually(t, func() bool { return e.adminValue(t, waiting) != "0" }, 10*time.Second, 10*time.Millisecond)
			cancel() // an operator's Ctrl-C
			select {
			case err := <-done:
				require.Error(t, err)
				t.Logf("failed with: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the rotation went on after its context ended")
			}
			release()
			kept(t, before)
		})
	})

	t.Run("a plugin's view of a retired function does not stop it", func(t *testing.T) {
		// What the versions before key rotation make and grant, and a
		// plugin's view that depends on it, which a DROP would refuse.
		evil := roleName("postgres", "evil")
		e.superExec(t, `CREATE FUNCTION wasmhist.get_row(key text, tab text, row_id text) RETURNS TABLE (revision bigint, body text) LANGUAGE sql AS 'SELECT 1::bigint, ''x''::text'`,
			"GRANT EXECUTE ON FUNCTION wasmhist.get_row(text, text, text) TO "+evil)
		fresh(t).oneCall(t, e.grant("evil", Limits{}), "CREATE VIEW keeps AS SELECT * FROM wasmhist.get_row('', '', '')")
		_, err := RotateKey(ctx, e.dsn, "")
		require.NoError(t, err)
		assert.Equal(t, "<null>", e.adminValue(t, "SELECT to_regprocedure('wasmhist.get_row(text, text, text)')::text"))
	})

	t.Run("hosts of older versions are shut out", func(t *testing.T) {
		// What the versions before key rotation create and grant.
		e.superExec(t, "CREATE FUNCTION wasmhist.fire_deferred(key text) RETURNS void LANGUAGE sql AS 'SELECT'",
			"GRANT EXECUTE ON FUNCTION wasmhist.fire_deferred(text) TO "+roleName("postgres", "evil"))
		_, err := RotateKey(ctx, e.dsn, "")
		require.NoError(t, err)
		assert.Equal(t, "<null>", e.adminValue(t, "SELECT to_regprocedure('wasmhist.fire_deferred(text)')::text"))
		assert.Equal(t, strconv.Itoa(txn.PostgresRotatedLayout), e.adminValue(t, "SELECT max(version)::text FROM wasmhist.store_version"))
		// This version serves the database after it.
		fresh(t).oneCall(t, e.grant("plain", Limits{}), "SELECT 1")
	})
	e = fresh(t)

	t.Run("a retired database closes as its calls end", func(t *testing.T) {
		cfg := &Config{Name: "main", AdminDSN: e.dsn, Schema: "p"}
		e.oneCall(t, e.grant("p", Limits{}), "SELECT 1")
		d, err := e.store.database(ctx, cfg)
		require.NoError(t, err)
		held := e.begin(ctx, t, e.grant("p", Limits{}))
		held.must(ctx, "SELECT 1")
		d.stale.Store(true)
		now, err := e.store.database(ctx, cfg)
		require.NoError(t, err)
		require.NotSame(t, d, now)
		// A call that took d before it was retired, for another schema:
		// it is refused at once, not made to wait for the close.
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = d.tenantRole(tctx, "q", "")
		require.ErrorContains(t, err, "its connections are closing")
		assert.Less(t, time.Since(start), time.Second)
		e.store.mu.Lock()
		assert.Contains(t, e.store.retired, d)
		e.store.mu.Unlock()
		require.NoError(t, held.end(ctx, true))
		require.Eventually(t, func() bool {
			e.store.mu.Lock()
			defer e.store.mu.Unlock()
			return !slices.Contains(e.store.retired, d)
		}, 10*time.Second, 10*time.Millisecond, "the retired database did not close once its call ended")
	})
}

// TestRotateKeySCRAM rotates on a server that checks passwords (SCRAM) for
// every role but the superuser: the old key's passwords are refused, the
// new key's accepted, a busy host does not keep the rotation from ending
// its backends, a plugin's lock behind a provisioning host does not stall
// it, and what hosts of the version before grant fails afterwards.
func TestRotateKeySCRAM(t *testing.T) {
	srv := pgtest.Start(t)
	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir, "data", "pg_hba.conf"), []byte("local all "+pgtest.Superuser+" trust\nlocal all all scram-sha-256\n"), 0o600))
	ctx := context.Background()
	e := newEnv(t, srv, "postgres", srv.DSN("postgres"))
	e.superExec(t, "SELECT pg_reload_conf()")
	login := func(role, pw string) error {
		c, err := pgx.Connect(ctx, strings.Replace(e.dsn, "user="+pgtest.Superuser, "user="+role+" password="+pw, 1))
		if err == nil {
			c.Close(ctx)
		}
		return err
	}
	plain := e.grant("plain", Limits{})
	e.oneCall(t, plain, "CREATE TABLE m (x text)")
	role := roleName("postgres", "plain")
	key := func() string { return e.adminValue(t, "SELECT key FROM wasmhist.host_key") }
	old := key()
	require.Eventually(t, func() bool { return login(role, password(old, role)) == nil }, 5*time.Second, 50*time.Millisecond, "the derived password logs in")
	require.Error(t, login(role, "guess"), "the server checks passwords")

	t.Run("the old key's password is refused, a busy host's backends end", func(t *testing.T) {
		// A host of this version, busy: four callers, reconnecting as
		// soon as their backends end.
		busy := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
		t.Cleanup(func() { busy.store.Close() })
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var ok atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c := &testCall{t: t, call: capability.NewCall(ctx, "test", []capability.Grant{plain}, busy.backends())}
					b, _ := json.Marshal(abi.SQLRequest{Statements: []abi.SQLStatement{{SQL: "INSERT INTO m VALUES ('busy')"}}})
					if _, err := Kind.Func.Call(ctx, c.call, b); err == nil && c.call.End(ctx, true) == nil {
						ok.Add(1)
						continue
					}
					c.call.End(ctx, false)
				}
			}()
		}
		require.Eventually(t, func() bool { return ok.Load() > 20 }, 20*time.Second, 10*time.Millisecond)
		rot, err := RotateKey(ctx, e.dsn, "")
		close(stop)
		wg.Wait()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, rot.Ended, 1)
		now := key()
		require.NotEqual(t, old, now)
		require.ErrorContains(t, login(role, password(old, role)), "password authentication failed")
		require.NoError(t, login(role, password(now, role)))
		// The host that held the old key (on the server's checks, not
		// trust's) serves again.
		var errs []string
		for range 3 {
			c := e.begin(ctx, t, plain)
			_, err := c.sql(ctx, "INSERT INTO m VALUES ('after')")
			if err == nil {
				err = c.end(ctx, true)
			} else {
				c.end(ctx, false)
			}
			if err == nil {
				break
			}
			errs = append(errs, err.Error())
		}
		require.Less(t, len(errs), 3, "%v", errs)
		assert.Equal(t, "1", e.adminValue(t, "SELECT count(*)::text FROM plain.m WHERE x = 'after'"))
	})

	t.Run("a plugin's lock behind a provisioning host does not stall it", func(t *testing.T) {
		f := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
		t.Cleanup(func() { f.store.Close() })
		evil := e.grant("evil", Limits{})
		f.oneCall(t, evil, "SELECT 1")
		c := f.begin(ctx, t, evil)
		c.must(ctx, "ALTER ROLE CURRENT_USER SET work_mem = '4MB'")
		// Another host provisions the same role: it takes the host lock,
		// then waits for the role's row the plugin holds.
		g := &env{dsn: e.dsn, store: NewStore(), admin: e.admin}
		t.Cleanup(func() { g.store.Close() })
		done := make(chan error, 1)
		go func() {
			c := g.begin(ctx, t, evil)
			_, err := c.sql(ctx, "SELECT 1")
			c.end(ctx, false)
			done <- err
		}()
		require.Eventually(t, func() bool {
			return e.adminValue(t, "SELECT count(*)::text FROM pg_locks WHERE NOT granted") != "0"
		}, 10*time.Second, 10*time.Millisecond, "the provisioning host never waited")
		start := time.Now()
		_, err := RotateKey(ctx, e.dsn, "")
		require.NoError(t, err)
		assert.Less(t, time.Since(start), rotateLockWait, "it waited for the chain of locks")
		<-done
		c.end(ctx, false)
	})

	t.Run("what the version before grants fails after it", func(t *testing.T) {
		old := []string{"guard(text, bytea)", "guard_if_wrote(text, bytea)", "release(text, bytea)",
			"put_row(text, text, text, bigint, text)", "get_row(text, text, text)", "get_rows(text, text[], text)", "delete_row(text, text, text)",
			"begin_checks(text)", "catalog_writes()", "reset_session()", "settle_deferred(text)", "before_commit(text)",
			"command_id()", "command_probes_done()"}
		for i := range old {
			old[i] = "wasmhist." + old[i]
		}
		_, err := e.admin.Exec(ctx, "GRANT EXECUTE ON FUNCTION "+strings.Join(old, ", ")+" TO "+role)
		require.ErrorContains(t, err, "wasmhist.get_row(text, text, text) does not exist")
	})
}

// scramMatches reports whether the SCRAM-SHA-256 verifier v, as
// pg_authid stores it, is that of password pw.
func scramMatches(t *testing.T, v, pw string) bool {
	t.Helper()
	// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
	head, keys, ok := strings.Cut(strings.TrimPrefix(v, "SCRAM-SHA-256$"), "$")
	require.True(t, ok, "not a SCRAM verifier")
	iter, salt64, _ := strings.Cut(head, ":")
	stored64, _, _ := strings.Cut(keys, ":")
	n, err := strconv.Atoi(iter)
	require.NoError(t, err)
	salt, err := base64.StdEncoding.DecodeString(salt64)
	require.NoError(t, err)
	stored, err := base64.StdEncoding.DecodeString(stored64)
	require.NoError(t, err)
	salted, err := pbkdf2.Key(sha256.New, pw, salt, n, sha256.Size)
	require.NoError(t, err)
	m := hmac.New(sha256.New, salted)
	m.Write([]byte("Client Key"))
	sum := sha256.Sum256(m.Sum(nil))
	return hmac.Equal(sum[:], stored)
}
