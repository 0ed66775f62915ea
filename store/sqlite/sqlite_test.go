package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/internal/sqlstore"
	"github.com/vigilhq/vigil/store/sqlite"
	"github.com/vigilhq/vigil/store/storetest"
)

func openPath(t testing.TB, path string, opt *sqlite.Options) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openTemp(t testing.TB) store.Store {
	return openPath(t, filepath.Join(t.TempDir(), "vigil.db"), nil)
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

// TestTwoStoresOneFile runs the shared-database suite on two stores opened
// on the same file (two writer pools contending through busy_timeout).
func TestTwoStoresOneFile(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (store.Store, store.Store) {
		path := filepath.Join(t.TempDir(), "vigil.db")
		return openPath(t, path, nil), openPath(t, path, nil)
	})
}

// TestReopen checks that data and schema survive closing and reopening,
// and that reopening applies no migration twice.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &store.User{Username: "u"}
	if err := s.CreateUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	res, err := s.PushTraces(t.Context(), store.PushRequest{OwnerID: u.ID, DatasetName: "d", CreateIfMissing: true,
		Traces: []store.NewTrace{{Messages: []store.Message{{ID: "m", Data: []byte(`{"role":"user"}`)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	v1, _ := s.SchemaVersion(t.Context())
	s.Close()

	s2 := openPath(t, path, &sqlite.Options{Synchronous: "normal", Readers: 1, BusyTimeout: time.Second})
	v2, err := s2.SchemaVersion(t.Context())
	if err != nil || v2 != v1 || v1 < 1 {
		t.Fatalf("schema version %d after reopen, %d before (%v)", v2, v1, err)
	}
	got, err := s2.GetTrace(t.Context(), res.Traces[0].ID, true)
	if err != nil || string(got.Messages[0].Data) != `{"role":"user"}` {
		t.Fatalf("trace after reopen: %+v, %v", got, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&rows); err != nil || rows != v1 {
		t.Errorf("schema_migrations rows = %d (%v), want %d", rows, err, v1)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := openPath(t, path, nil)
	v, _ := s.SchemaVersion(t.Context())
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, v+1); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(t.Context(), path, nil)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		opt        *sqlite.Options
		want       string
	}{
		{"empty path", "", nil, "want a file path"},
		{"memory", ":memory:", nil, "want a file path"},
		{"query in path", filepath.Join(dir, "a?mode=ro"), nil, "want a file path"},
		{"bad synchronous", filepath.Join(dir, "b.db"), &sqlite.Options{Synchronous: "OFF"}, `synchronous "OFF"`},
		{"missing directory", filepath.Join(dir, "no", "such", "c.db"), nil, filepath.Join(dir, "no", "such", "c.db")},
		{"not a database", writeFile(t, dir, "junk.db", strings.Repeat("not sqlite ", 1000)), nil, "junk.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), tc.path, tc.opt)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) = %v, want it to mention %q", tc.path, err, tc.want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// crashChildEnv makes the test binary act as the crashing writer of
// TestCrashKeepsAcknowledgedPushes.
const crashChildEnv = "VIGIL_SQLITE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild pushes traces forever, printing each acknowledged trace id.
func crashChild(path string) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	u := &store.User{Username: "crash"}
	if err := s.CreateUser(ctx, u); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		req := store.PushRequest{OwnerID: u.ID, DatasetName: "crash", CreateIfMissing: true}
		for j := range 10 {
			req.Traces = append(req.Traces, store.NewTrace{Messages: []store.Message{
				{ID: fmt.Sprintf("m%d", j), Data: fmt.Appendf(nil, `{"role":"user","content":"push %d trace %d"}`, i, j)}}})
		}
		res, err := s.PushTraces(ctx, req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, tr := range res.Traces {
			fmt.Fprintln(w, tr.ID)
		}
		w.Flush() // acknowledged: the push returned
	}
}

// TestCrashKeepsAcknowledgedPushes kills a writing process with SIGKILL
// and checks that every push it acknowledged is in the reopened database.
func TestCrashKeepsAcknowledgedPushes(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	path := filepath.Join(t.TempDir(), "vigil.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var acked []string
	for sc.Scan() {
		acked = append(acked, sc.Text())
		if len(acked) == 200 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if len(acked) < 200 {
		t.Fatalf("child acknowledged %d traces before dying: %s", len(acked), stderr.String())
	}
	s := openPath(t, path, nil)
	for _, id := range acked {
		if _, err := s.GetTrace(t.Context(), id, true); err != nil {
			t.Fatalf("acknowledged trace %s lost after SIGKILL: %v", id, err)
		}
	}
	u, err := s.GetUserByName(t.Context(), "crash")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.GetDatasetByName(t.Context(), u.ID, "crash")
	if err != nil {
		t.Fatal(err)
	}
	if ds.NumTraces < len(acked) || ds.NumTraces%10 != 0 || int(ds.NextIndex) != ds.NumTraces {
		t.Errorf("after crash: %d traces, next index %d, %d acknowledged (pushes are all-or-nothing)", ds.NumTraces, ds.NextIndex, len(acked))
	}
}

// BenchmarkPush measures PushTraces of 100 traces × 20 events with
// receipts (reported as events/s).
func BenchmarkPush(b *testing.B) {
	storetest.BenchPush(b, func(b *testing.B) store.Store { return openTemp(b) })
}

// BenchmarkStore runs every shared benchmark.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store { return openTemp(b) })
}

// BenchmarkStoreNormal runs the shared benchmarks with synchronous=NORMAL,
// to show what the power-loss guarantee of the default FULL costs.
func BenchmarkStoreNormal(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		return openPath(b, filepath.Join(b.TempDir(), "vigil.db"), &sqlite.Options{Synchronous: "NORMAL"})
	})
}

// TestMigrateSDKSessionIDs: migration 7 moves the id of each existing SDK
// session into sdk_id (unique per owner) and leaves server sessions alone,
// so sessions recorded before the upgrade keep answering by their id.
func TestMigrateSDKSessionIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ms := sqlstore.Migrations("sqlite")
	for i, m := range ms[:5] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, 0)`, i+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, row := range []struct{ id, extra string }{{"sdk-old", `{"sdk":true,"created_by":"x"}`}, {"run-old", ""}} {
		var extra any
		if row.extra != "" {
			extra = row.extra
		}
		if _, err := db.Exec(`INSERT INTO ledger_sessions (id, owner_id, name, agent, signer, created_at, receipt_count, extra, tail_hash, tail_timestamp)
			VALUES (?, 'u1', '', 'a', 'server', 0, 0, ?, '0', 0)`, row.id, extra); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s := openPath(t, path, nil)
	got, err := s.GetSDKSession(t.Context(), "u1", "sdk-old")
	if err != nil || got.ID != "sdk-old" || got.LedgerID() != "sdk-old" {
		t.Fatalf("migrated SDK session: %+v %v", got, err)
	}
	if _, err := s.GetSDKSession(t.Context(), "u1", "run-old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("server session found as an SDK session: %v", err)
	}
	if got, err := s.GetSession(t.Context(), "run-old"); err != nil || got.SDKID != "" {
		t.Errorf("server session after migration: %+v %v", got, err)
	}
}

// BenchmarkSearch measures a 2-term text query plus a meta: filter
// (storetest.BenchSearch; VIGIL_BENCH_SEARCH_TRACES=50000 for 1M events).
func BenchmarkSearch(b *testing.B) {
	storetest.BenchSearch(b, func(b *testing.B) store.Store { return openTemp(b) })
}
