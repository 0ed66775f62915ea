package main

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigilhq/vigil/detect"
	"github.com/vigilhq/vigil/ledger"
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/otlp"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/server"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/store/postgres"
	"github.com/vigilhq/vigil/store/sqlite"
	"github.com/vigilhq/vigil/web"
)

// vigil serve: the API server (docs/api.md) on one listener, with
// configuration from flags, environment and file (docs/configuration.md:
// flags > environment > file > defaults).

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
		"Run the Vigil server. With no flags it serves on 127.0.0.1:8080 with a SQLite database in\n"+
			"~/.vigil, and prints an admin API key on first start (or registers $VIGIL_API_KEY).\n"+
			"A lost admin key is replaced with 'vigil keys create' (same --data-dir/--db/--config).\n"+
			"With --db and no --data-dir or --ledger-key-file nothing is written to the local disk:\n"+
			"the ledger signing key is kept in the database, shared by every server using it.\n"+
			"Every request is logged (method, path, status, bytes, duration, key id) at level info.\n"+
			"The garbage collector runs with GOGC=400 unless GOGC is set.\n"+
			"The check API (POST /api/v1/policy/check) calls model-backed detectors at\n"+
			"--detectors-base-url (detectors.base_url); without one, rules using them fail to load.\n"+
			"POST /api/v1/ask answers questions with evidence, and through a model at --ask-base-url\n"+
			"(ask.base_url) when one is set.\n"+
			"Monitors: every trace pushed, appended or uploaded into a dataset with an enabled guardrail\n"+
			"is queued in the database with the write and checked by --monitor-workers workers; a\n"+
			"violation becomes a finding. With -1 no worker runs and the queue keeps the jobs.\n"+
			"The web UI is served on the same address: open it in a browser and sign in with an API key.\n"+
			"OTLP/HTTP ingest (OpenTelemetry GenAI spans and log records) is served at /v1/traces and\n"+
			"/v1/logs unless otlp.enabled is false (VIGIL_OTLP_ENABLED).", stderr)
	fc, err := loadConfig(configFlag(args))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	detCfg, err := fc.detectorConfig()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	detCfg.RegisterFlags(fs)
	askCfg := askFlags(fs, fc)
	listen := fs.String("listen", envOr("VIGIL_LISTEN", fc.Listen), "listen address (env VIGIL_LISTEN; PORT sets the port)")
	where := addStoreFlags(fs, fc)
	dataDir := &where.dataDir
	keyFile := fs.String("ledger-key-file", envOr("VIGIL_LEDGER_KEY_FILE", fc.Ledger.KeyFile), "ledger signing key file (default <data-dir>/ledger.key, or the database with --db; VIGIL_LEDGER_KEY holds the seed itself)")
	lim := fc.Limits
	bodyIdle := fs.Duration("body-idle-timeout", cmp.Or(envDuration("VIGIL_LIMITS_BODY_IDLE_TIMEOUT"), time.Duration(lim.BodyIdleTimeout), server.DefaultBodyIdleTimeout),
		"cut off a request body that sends nothing for this long (env VIGIL_LIMITS_BODY_IDLE_TIMEOUT; config limits.body_idle_timeout; 0: no limit)")
	maxConns := fs.Int("max-connections", cmp.Or(envInt("VIGIL_LIMITS_MAX_CONNECTIONS"), lim.MaxConnections, server.DefaultMaxConnections),
		"open connections at most; more get 429 (env VIGIL_LIMITS_MAX_CONNECTIONS; config limits.max_connections; -1: no limit)")
	maxInflight := fs.String("max-inflight-body-bytes", cmp.Or(os.Getenv("VIGIL_LIMITS_MAX_INFLIGHT_BODY_BYTES"), sizeString(int64(lim.MaxInflightBodyBytes)), sizeString(server.DefaultMaxInflightBodyBytes)),
		"memory all request bodies in flight may hold, at least max_json_bytes plus 64 KiB; more get 429 (env VIGIL_LIMITS_MAX_INFLIGHT_BODY_BYTES; config limits.max_inflight_body_bytes)")
	logFormat := fs.String("log-format", envOr("VIGIL_LOG_FORMAT", cmp.Or(fc.Log.Format.Value, "text")), "log format: text or json")
	logLevel := fs.String("log-level", envOr("VIGIL_LOG_LEVEL", cmp.Or(fc.Log.Level.Value, "info")), "log level: debug, info, warn or error (env VIGIL_LOG_LEVEL)")
	monWorkers := fs.Int("monitor-workers", 0, "workers evaluating dataset guardrails on new traces: 0 = one per CPU, -1 = none (env VIGIL_MONITORS_WORKERS, monitors.workers)")
	monTimeout := fs.Duration("monitor-timeout", time.Duration(fc.Monitors.Timeout), "wall-time budget of one guardrail evaluation; 0 = 10s (env VIGIL_MONITORS_TIMEOUT, monitors.timeout)")
	monLease := fs.Duration("monitor-lease", time.Duration(fc.Monitors.Lease), "how long the jobs of a server that died wait before another worker takes them; 0 = 30s (env VIGIL_MONITORS_LEASE, monitors.lease)")
	if err := monitorDefaults(fs, fc); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *monWorkers < -1 || *monTimeout < 0 || *monLease < 0 {
		return fmt.Errorf("serve: --monitor-workers %d, --monitor-timeout %s, --monitor-lease %s: want -1 or more, and durations of 0 or more", *monWorkers, *monTimeout, *monLease)
	}
	opts, err := serveSettings(fc)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := detect.Configure(detCfg); err != nil {
		return fmt.Errorf("serve: detectors: %w", err)
	}
	setServerGC()
	if *listen == "" {
		*listen = "127.0.0.1:8080"
		if port := os.Getenv("PORT"); port != "" {
			*listen = "127.0.0.1:" + port
		}
	}
	handler, err := newLogHandler(stderr, *logFormat, *logLevel)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log := slog.New(handler)
	if keys := fc.notInEffect(); len(keys) > 0 {
		log.Warn("configuration keys accepted but not used by this build", "file", fc.path, "keys", strings.Join(keys, ", "))
	}

	// Bind first: a busy port must fail before anything is created, above
	// all the admin key that is shown only once.
	ln, err := listenServe(*listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer ln.Close() // no-op once served: Shutdown closes it
	st, err := where.open(ctx)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			st.Close()
		}
	}()
	key, keySource, err := serveLedgerKey(ctx, st, *keyFile, *dataDir)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var ring []ed25519.PublicKey
	if *dataDir != "" {
		if ring, err = ledger.LoadKeyRing(filepath.Join(*dataDir, ledger.KeyRingDirName)); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	cfg := server.Config{
		Store: st, LedgerKey: key, KeyRing: ring, Logger: log, AccessLog: log, Version: version,
		MetricsToken:        envOr("VIGIL_METRICS_TOKEN", envOr("PROMETHEUS_TOKEN", fc.Metrics.Token)),
		MetricsPublic:       opts.metricsPublic,
		AnonymousReadPublic: opts.anonymousReadPublic,
		SharingDisabled:     !opts.sharing,
		CORSOrigins:         fc.CORSOrigins,
		RuleCacheSize:       opts.ruleCacheSize,
		CheckAnonymous:      !opts.checkRequiresKey,
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
	var monitors *monitor.Pool // started below, before the server answers
	if *monWorkers >= 0 {
		cfg.MonitorStats = func() monitor.Stats { return monitors.Stats() }
	}
	cfg.SessionTTL, cfg.SecureCookies = time.Duration(fc.Auth.SessionTTL), fc.Auth.SecureCookies // browser sessions (web UI)
	srv, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	stopGateway, err := mountGateway(srv, fc, log, *dataDir)
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	defer stopGateway()
	asker, err := mountAsk(srv, askCfg())
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	ui, err := web.New(srv) // the web UI on the same listener: every non-API path
	if err != nil {
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	}
	ui.SetAsker(asker) // the ask box on trace list and trace pages
	srv.Mount("/", ui)
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
	hs.RegisterOnShutdown(func() { srv.Close() }) // answers held change-feed requests at once
	var otlpIngest *otlp.Handler                  // OTLP/HTTP ingest on the same listener (serve_otlp.go)
	if oc, on, err := otlpSettings(fc); err != nil {
		return fmt.Errorf("serve: %w", err)
	} else if on {
		otlpIngest = otlp.New(srv, oc)
		otlp.Mount(srv, otlpIngest)
	}
	scheme := "http"
	if opts.certFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.certFile, opts.keyFile)
		if err != nil {
			return fmt.Errorf("serve: tls: %w", err)
		}
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	// Bootstrap last, when nothing can fail before serving: a generated
	// admin key is printed only by a server that is about to answer.
	boot, err := server.Bootstrap(ctx, st, server.BootstrapOptions{
		AdminUsername: opts.adminUsername, EnvKey: os.Getenv("VIGIL_API_KEY"),
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if boot.Warning != "" {
		log.Warn(boot.Warning)
	}
	if boot.GeneratedKey != "" {
		// Not a log record: the one place the plaintext is shown, in the
		// fixed form docs/api.md gives (logs never hold keys).
		fmt.Fprintf(stderr, "vigil: created admin API key (shown once, store it now): %s\n", boot.GeneratedKey)
	}
	if *monWorkers >= 0 {
		monitors = monitor.Start(st, monitor.Options{Workers: *monWorkers, Lease: *monLease, Logger: log, Policy: policy.Options{WallTime: *monTimeout}})
	}
	log.Info(fmt.Sprintf("listening on %s://%s", scheme, ln.Addr()), "store", st.Kind(), "data_dir", *dataDir, "ledger_key", keySource, "monitor_workers", monitorWorkers(*monWorkers))
	errc := make(chan error, 1)
	go func() {
		if hs.TLSConfig != nil {
			errc <- hs.ServeTLS(srv.Listener(ln), "", "")
			return
		}
		errc <- hs.Serve(srv.Listener(ln))
	}()
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
	if otlpIngest != nil {
		otlpIngest.Close() // maps the log records still waiting for their span
	}
	if monitors != nil {
		monitors.Stop() // waits for evaluations in progress; queued jobs stay queued
	}
	stopGateway() // writes the gateway's queued records before the store closes
	closed = true
	if err := st.Close(); err != nil {
		return fmt.Errorf("serve: close store: %w", err)
	}
	return nil
}

// listenServe binds addr. A failure says which address and what to do:
// the usual cause is another server (often another vigil serve) on it.
func listenServe(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("cannot listen on %s: the address is already in use (another vigil serve?); stop that process or choose another address with --listen HOST:PORT (or VIGIL_LISTEN, PORT); nothing was created", addr)
	}
	return nil, fmt.Errorf("cannot listen on %s: %w; choose another address with --listen HOST:PORT; nothing was created", addr, err)
}

// storeFlags say where the store is: --data-dir or --db, with --config,
// their environment variables and the configuration file as defaults
// (flags > environment > file > defaults). serve and keys share them, so
// that keys works on the very store a server uses.
type storeFlags struct {
	dataDir, db string
	// existing makes open fail on a data directory without a database
	// instead of creating one (keys must not issue a key for a new, empty
	// store because a path was mistyped).
	existing bool
}

// addStoreFlags defines --config, --data-dir and --db on fs.
func addStoreFlags(fs *flag.FlagSet, fc *fileConfig) *storeFlags {
	sf := &storeFlags{}
	fs.String("config", "", configUsage)
	fs.StringVar(&sf.dataDir, "data-dir", envOr("VIGIL_DATA_DIR", fc.DataDir), "data directory: SQLite database, ledger key (default ~/.vigil; none with --db)")
	fs.StringVar(&sf.db, "db", envOr("VIGIL_DB", fc.DB), "PostgreSQL URL instead of SQLite (env VIGIL_DB)")
	return sf
}

// open opens PostgreSQL when --db is set, else SQLite in the data
// directory (default ~/.vigil, created when missing). With PostgreSQL
// nothing is written to the local disk unless a data directory is
// configured: there is no data directory then.
func (sf *storeFlags) open(ctx context.Context) (store.Store, error) {
	if sf.dataDir == "" && sf.db == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no --data-dir and no home directory: %w", err)
		}
		sf.dataDir = filepath.Join(home, ".vigil")
	}
	dbFile := filepath.Join(sf.dataDir, "vigil.db")
	if sf.existing && sf.db == "" {
		if _, err := os.Stat(dbFile); err != nil {
			return nil, fmt.Errorf("no Vigil store in %s (%s: %w): give the --data-dir or --db that vigil serve uses", sf.dataDir, dbFile, errors.Unwrap(err))
		}
	}
	if sf.dataDir != "" {
		if err := os.MkdirAll(sf.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	if sf.db != "" {
		if !strings.HasPrefix(sf.db, "postgres://") && !strings.HasPrefix(sf.db, "postgresql://") {
			return nil, fmt.Errorf("--db must be a postgres:// URL, got %q", sf.db)
		}
		return openPostgres(ctx, sf.db)
	}
	return sqlite.Open(ctx, dbFile, nil)
}

// serveOptions are the settings of vigil serve that come from the
// environment over the configuration file.
type serveOptions struct {
	adminUsername       string
	anonymousReadPublic bool
	sharing             bool
	metricsPublic       bool
	certFile, keyFile   string
	ruleCacheSize       int  // guardrails.cache_size (0: the server's default)
	checkRequiresKey    bool // guardrails.check_requires_key
}

// serveSettings resolves the auth, sharing, metrics and tls settings:
// VIGIL_* environment variables over the file over the defaults.
func serveSettings(fc *fileConfig) (serveOptions, error) {
	o := serveOptions{
		adminUsername: envOr("VIGIL_AUTH_ADMIN_USERNAME", fc.Auth.AdminUsername),
		certFile:      envOr("VIGIL_TLS_CERT_FILE", fc.TLS.CertFile),
		keyFile:       envOr("VIGIL_TLS_KEY_FILE", fc.TLS.KeyFile),
	}
	var err error
	for _, b := range []struct {
		env  string
		file *bool
		def  bool
		dst  *bool
	}{
		{"VIGIL_AUTH_ANONYMOUS_READ_PUBLIC", fc.Auth.AnonymousReadPublic, false, &o.anonymousReadPublic},
		{"VIGIL_SHARING_ENABLED", fc.Sharing.Enabled, true, &o.sharing},
		{"VIGIL_METRICS_PUBLIC", fc.Metrics.Public, false, &o.metricsPublic},
		{"VIGIL_GUARDRAILS_CHECK_REQUIRES_KEY", fc.Guardrails.CheckRequiresKey, true, &o.checkRequiresKey},
	} {
		if *b.dst, err = envBoolOr(b.env, b.file, b.def); err != nil {
			return o, err
		}
	}
	o.ruleCacheSize = fc.Guardrails.CacheSize
	if v := strings.TrimSpace(os.Getenv("VIGIL_GUARDRAILS_CACHE_SIZE")); v != "" {
		if o.ruleCacheSize, err = strconv.Atoi(v); err != nil || o.ruleCacheSize < 0 {
			return o, fmt.Errorf("VIGIL_GUARDRAILS_CACHE_SIZE: want a number of rules, 0 or more, got %q", v)
		}
	}
	if o.adminUsername != "" && !usernameRx.MatchString(o.adminUsername) {
		return o, fmt.Errorf("admin username %q: want 1 to 64 of A-Z, a-z, 0-9, '_', '.', '-'", o.adminUsername)
	}
	if (o.certFile == "") != (o.keyFile == "") {
		return o, errors.New("tls: set both the certificate and the key file (tls.cert_file, tls.key_file), or neither")
	}
	return o, nil
}

// monitorDefaults sets the defaults of --monitor-workers,
// --monitor-timeout and --monitor-lease from VIGIL_MONITORS_WORKERS,
// VIGIL_MONITORS_TIMEOUT and VIGIL_MONITORS_LEASE, else the file's monitors
// section (flags > environment > file).
func monitorDefaults(fs *flag.FlagSet, fc *fileConfig) error {
	workers := 0
	if fc.Monitors.Workers != nil {
		workers = *fc.Monitors.Workers
	}
	if v := strings.TrimSpace(os.Getenv("VIGIL_MONITORS_WORKERS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			return fmt.Errorf("VIGIL_MONITORS_WORKERS: want -1 (none), 0 (one per CPU) or more, got %q", v)
		}
		workers = n
	}
	if err := setDefault(fs, "monitor-workers", strconv.Itoa(workers)); err != nil {
		return err
	}
	for name, env := range map[string]string{"timeout": "VIGIL_MONITORS_TIMEOUT", "lease": "VIGIL_MONITORS_LEASE"} {
		if v := strings.TrimSpace(os.Getenv(env)); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d < 0 {
				return fmt.Errorf("%s: want a duration such as 5s, got %q", env, v)
			}
			if err := setDefault(fs, "monitor-"+name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// monitorWorkers is what --monitor-workers n runs: n, one per CPU for 0,
// none for -1 (logged as such at start).
func monitorWorkers(n int) int {
	if n == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return max(n, 0)
}

// setDefault changes a flag's value and the default --help shows.
func setDefault(fs *flag.FlagSet, name, v string) error {
	f := fs.Lookup(name)
	if err := f.Value.Set(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	f.DefValue = v
	return nil
}

// envBoolOr is the boolean in environment variable name when it is set,
// else *file when the file sets it, else def.
func envBoolOr(name string, file *bool, def bool) (bool, error) {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s: want true or false, got %q", name, v)
		}
		return b, nil
	}
	if file != nil {
		return *file, nil
	}
	return def, nil
}

// newLogHandler returns the slog handler of vigil serve: format text or
// json, level debug, info, warn or error.
func newLogHandler(w io.Writer, format, level string) (slog.Handler, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || !slices.Contains([]string{"debug", "info", "warn", "error"}, strings.ToLower(level)) {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// ledgerKeyName is the instance value that holds the ledger key seed of a
// PostgreSQL deployment without a key file.
const ledgerKeyName = "ledger.key"

// serveLedgerKey returns the server's ledger signing key and where it
// came from (docs/configuration.md, with the database as the shared place
// when nothing else is configured):
//
//  1. $VIGIL_LEDGER_KEY, the seed itself;
//  2. the configured key file (created on first start);
//  3. with SQLite, <dataDir>/ledger.key (created on first start);
//  4. with PostgreSQL and a configured data directory, the same;
//  5. with PostgreSQL and nothing configured, the seed stored in the
//     database (the first process to start generates it), so every
//     process sharing the database signs with the same key and nothing
//     is written to the local disk.
func serveLedgerKey(ctx context.Context, st store.Store, keyFile, dataDir string) (ed25519.PrivateKey, string, error) {
	if hexKey := os.Getenv(ledger.KeyEnv); hexKey != "" || keyFile != "" || dataDir != "" {
		k, err := ledger.LoadServerKey(ledger.ServerKeyOptions{Hex: hexKey, File: keyFile, DataDir: dataDir})
		switch {
		case err != nil:
			return nil, "", err
		case hexKey != "":
			return k, ledger.KeyEnv, nil
		case keyFile != "":
			return k, keyFile, nil
		}
		return k, filepath.Join(dataDir, ledger.KeyFileName), nil
	}
	fresh, err := ledger.GenerateKey()
	if err != nil {
		return nil, "", err
	}
	seed, err := st.InitInstanceValue(ctx, ledgerKeyName, ledger.PrivateKeyHex(fresh))
	if err != nil {
		return nil, "", fmt.Errorf("ledger key: %w", err)
	}
	k, err := ledger.ParsePrivateKey(seed)
	if err != nil {
		return nil, "", fmt.Errorf("ledger key stored in the database: %w", err)
	}
	return k, "database", nil
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
		return 0, fmt.Errorf("%s: want a positive size in bytes or KiB/MiB/GiB, got %q", name, os.Getenv(name))
	}
	return n, nil
}

// parseSize parses a positive size in bytes or with a KiB/MiB/GiB suffix.
func parseSize(v string) (int64, error) {
	v = strings.TrimSpace(v)
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
		return 0, fmt.Errorf("%q is not a positive size in bytes or KiB/MiB/GiB", v)
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
