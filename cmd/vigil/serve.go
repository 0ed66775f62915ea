package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
)

// vigil serve: the API server (spec/explorer-api.md, spec/ledger.md §10)
// on one listener, with configuration from flags and environment
// (spec/gateway.md §10: flags > environment > defaults).

func init() {
	register(command{name: "serve", summary: "run the Vigil server (API, ledger, metrics)", run: runServe})
}

// shutdownTimeout bounds how long in-flight requests may take to finish
// after a stop signal.
const shutdownTimeout = 30 * time.Second

// openPostgres opens a PostgreSQL store.
func openPostgres(ctx context.Context, dsn string) (store.Store, error) {
	return postgres.Open(ctx, dsn, nil)
}

func runServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "serve [--listen ADDR] [--data-dir DIR | --db postgres://...] [--ledger-key-file FILE]",
		"Run the Vigil server. With no flags it serves on 127.0.0.1:8080 with a SQLite database in\n~/.vigil, and prints an admin API key on first start (or registers $VIGIL_API_KEY).\nThe garbage collector runs with GOGC=400 unless GOGC is set.", stderr)
	fc, err := loadConfig(configFlag(args))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fs.String("config", "", configUsage)
	listen := fs.String("listen", envOr("VIGIL_LISTEN", fc.Listen), "listen address (env VIGIL_LISTEN; PORT sets the port)")
	dataDir := fs.String("data-dir", envOr("VIGIL_DATA_DIR", fc.DataDir), "data directory: SQLite database, ledger key (default ~/.vigil)")
	db := fs.String("db", envOr("VIGIL_DB", fc.DB), "PostgreSQL URL instead of SQLite (env VIGIL_DB)")
	keyFile := fs.String("ledger-key-file", envOr("VIGIL_LEDGER_KEY_FILE", fc.Ledger.KeyFile), "ledger signing key file (default <data-dir>/ledger.key; VIGIL_LEDGER_KEY holds the seed itself)")
	lim := fc.Limits
	bodyIdle := fs.Duration("body-idle-timeout", cmp.Or(envDuration("VIGIL_LIMITS_BODY_IDLE_TIMEOUT"), time.Duration(lim.BodyIdleTimeout), server.DefaultBodyIdleTimeout),
		"cut off a request body that sends nothing for this long (env VIGIL_LIMITS_BODY_IDLE_TIMEOUT; config limits.body_idle_timeout; 0: no limit)")
	maxConns := fs.Int("max-connections", cmp.Or(envInt("VIGIL_LIMITS_MAX_CONNECTIONS"), lim.MaxConnections, server.DefaultMaxConnections),
		"open connections at most; more get 429 (env VIGIL_LIMITS_MAX_CONNECTIONS; config limits.max_connections; -1: no limit)")
	maxInflight := fs.String("max-inflight-body-bytes", cmp.Or(os.Getenv("VIGIL_LIMITS_MAX_INFLIGHT_BODY_BYTES"), sizeString(int64(lim.MaxInflightBodyBytes)), sizeString(server.DefaultMaxInflightBodyBytes)),
		"memory all request bodies in flight may hold; more get 429 (env VIGIL_LIMITS_MAX_INFLIGHT_BODY_BYTES; config limits.max_inflight_body_bytes)")
	logFormat := fs.String("log-format", envOr("VIGIL_LOG_FORMAT", cmp.Or(fc.Log.Format, "text")), "log format: text or json")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	setServerGC()
	if *listen == "" {
		*listen = "127.0.0.1:8080"
		if port := os.Getenv("PORT"); port != "" {
			*listen = "127.0.0.1:" + port
		}
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	}
	log := slog.New(handler)

	if *dataDir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("serve: no --data-dir and no home directory: %w", err)
		}
		*dataDir = filepath.Join(home, ".vigil")
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("serve: data dir: %w", err)
	}
	st, err := openServeStore(ctx, *dataDir, *db)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	key, err := ledger.LoadServerKey(ledger.ServerKeyOptions{Hex: os.Getenv(ledger.KeyEnv), File: *keyFile, DataDir: *dataDir})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ring, err := ledger.LoadKeyRing(filepath.Join(*dataDir, ledger.KeyRingDirName))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	boot, err := server.Bootstrap(ctx, st, server.BootstrapOptions{
		AdminUsername: os.Getenv("VIGIL_AUTH_ADMIN_USERNAME"), EnvKey: os.Getenv("VIGIL_API_KEY"),
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if boot.Warning != "" {
		log.Warn(boot.Warning)
	}
	if boot.GeneratedKey != "" {
		fmt.Fprintf(stderr, "vigil: created admin API key (shown once, store it now): %s\n", boot.GeneratedKey)
	}
	cfg := server.Config{
		Store: st, LedgerKey: key, KeyRing: ring, Logger: log, Version: version,
		MetricsToken:        envOr("VIGIL_METRICS_TOKEN", envOr("PROMETHEUS_TOKEN", fc.Metrics.Token)),
		MetricsPublic:       envBool("VIGIL_METRICS_PUBLIC"),
		AnonymousReadPublic: envBool("VIGIL_AUTH_ANONYMOUS_READ_PUBLIC"),
		SharingDisabled:     strings.EqualFold(os.Getenv("VIGIL_SHARING_ENABLED"), "false"),
	}
	if cfg.MaxJSONBytes, err = envSize("VIGIL_LIMITS_MAX_JSON_BYTES"); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.MaxUploadBytes, err = envSize("VIGIL_LIMITS_MAX_UPLOAD_BYTES"); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	cfg.MaxJSONBytes = cmp.Or(cfg.MaxJSONBytes, int64(lim.MaxJSONBytes))
	cfg.MaxUploadBytes = cmp.Or(cfg.MaxUploadBytes, int64(lim.MaxUploadBytes))
	cfg.BodyIdleTimeout, cfg.MaxConnections = *bodyIdle, *maxConns
	if *bodyIdle <= 0 {
		cfg.BodyIdleTimeout = -1 // no limit
	}
	if cfg.MaxInflightBodyBytes, err = parseSize(*maxInflight); err != nil {
		return fmt.Errorf("serve: --max-inflight-body-bytes: %w", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// Headers must arrive within ReadHeaderTimeout and a kept-alive
	// connection may idle IdleTimeout; bodies have the server's per-read
	// idle timeout instead of a whole-request one, so long uploads that
	// keep sending are never cut. No WriteTimeout: exports stream.
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(handler, slog.LevelWarn),
	}
	fmt.Fprintf(stderr, "vigil: listening on http://%s (store %s, data dir %s)\n", ln.Addr(), st.Kind(), *dataDir)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(srv.Listener(ln)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Graceful stop: stop accepting, let in-flight requests (and their
	// store transactions) finish, then close the store. A write that was
	// acknowledged has committed before its response was sent.
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	closed = true
	if err := st.Close(); err != nil {
		return fmt.Errorf("serve: close store: %w", err)
	}
	return nil
}

// openServeStore opens PostgreSQL when db is set, else SQLite in dataDir.
func openServeStore(ctx context.Context, dataDir, db string) (store.Store, error) {
	if db != "" {
		if !strings.HasPrefix(db, "postgres://") && !strings.HasPrefix(db, "postgresql://") {
			return nil, fmt.Errorf("serve: --db must be a postgres:// URL, got %q", db)
		}
		st, err := openPostgres(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		return st, nil
	}
	st, err := sqlite.Open(ctx, filepath.Join(dataDir, "vigil.db"), nil)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	return st, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envInt is the integer in environment variable name (0 when unset or
// not an integer).
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// envDuration is the duration in environment variable name (0 when unset
// or not a duration).
func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

// sizeString writes n with the largest exact KiB/MiB/GiB suffix ("" for 0).
func sizeString(n int64) string {
	if n == 0 {
		return ""
	}
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

// envSize parses a size in bytes or with a KiB/MiB/GiB suffix (0 when unset).
func envSize(name string) (int64, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, nil
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// parseSize parses a positive size in bytes or with a KiB/MiB/GiB suffix.
func parseSize(s string) (int64, error) {
	v := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(v, u.suffix) {
			mult, v = u.m, strings.TrimSpace(strings.TrimSuffix(v, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("want a positive size in bytes or KiB/MiB/GiB, got %q", s)
	}
	return n * mult, nil
}

// serverGCPercent is vigil serve's default GOGC. The server's live heap is
// small (tens of MB: request bodies, caches), and ingest allocates per
// event, so trading some memory for fewer collections pays: on the push
// benchmark (bench/BenchmarkServePush) it cuts server CPU per event by
// about 15% and lifts PostgreSQL ingest past 40,000 events/s on 2 cores.
const serverGCPercent = 400

// setServerGC applies serverGCPercent unless the operator set GOGC.
func setServerGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}
