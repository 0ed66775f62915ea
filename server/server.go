// Package server is Vigil's HTTP API: the Explorer-compatible trace store
// endpoints (push, append, datasets, traces, annotations, JSONL upload and
// export, identity and API keys; spec/explorer-api.md), the audit ledger
// endpoints (spec/ledger.md §10), the guardrails check API (check.go),
// health, readiness and Prometheus metrics.
//
// Goals: Invariant-compatible request and response shapes where the spec
// marks them [I]; one JSON error shape ({"detail","code"}); every request
// body size-limited; Bearer API-key auth with scopes; a request never
// crashes the server (a panic becomes a 500 JSON response); every stored
// event sealed into its trace's signed hash chain in the same transaction
// as the event (proof on ingest); upload and export stream with bounded
// memory; Idempotency-Key replay on the create endpoints (explorer-api §1.6).
//
// Non-goals (for now): monitors (running guardrails on ingest), search,
// OTLP, browser sessions, the web UI and the gateway routes, which later
// issues add to the route table in routes.go.
//
// Layout: routes.go holds the whole route table; one file per resource
// (push.go, datasets.go, traces.go, snippets.go, annotations.go, jsonl.go
// for upload and export, keys.go, users.go, audit.go and nodes.go for the ledger,
// agents.go, sdk.go for the @invariance/sdk endpoints, health.go;
// check.go for /policy/check, /check/batch and /load; guardrails.go for
// dataset guardrails and their change feed, with rulecache.go for the
// compiled rules; searchindex.go for the background search indexer; findings.go and evals.go for the review queue and evals;
// backtest.go for rules run over a stored dataset, streamed or compared);
// ingest.go is the normalise-and-seal pipeline every write path shares;
// lists.go streams the unpaginated trace lists; admission.go bounds what
// clients can make the server hold (body idle timeout, in-flight body
// budget, connection cap); access.go, auth.go, errors.go, idempotency.go,
// middleware.go and metrics.go are the plumbing.
package server

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/ingest"
	"github.com/vigilhq/vigil/monitor"
	"github.com/vigilhq/vigil/store"
)

// Default budgets (explorer-api §1.2).
const (
	DefaultMaxJSONBytes   = 64 << 20
	DefaultMaxUploadBytes = 1 << 30
)

// Config configures a Server. Store and LedgerKey are required.
type Config struct {
	// Store is the storage backend. The server does not close it.
	Store store.Store
	// LedgerKey is the server's Ed25519 signing key (spec/ledger.md §3).
	LedgerKey ed25519.PrivateKey
	// KeyRing holds retired public keys that still verify old sessions
	// (nil: none). The current key's public half is always included.
	KeyRing []ed25519.PublicKey
	// Logger receives request errors and warnings (nil: slog.Default()).
	Logger *slog.Logger
	// AccessLog receives one line per request (accesslog.go; nil: no
	// access log).
	AccessLog *slog.Logger
	// Version, when set and not "dev", replaces the module version of the
	// build information that /api/v1/version reports (internal/buildinfo).
	Version string
	// MaxJSONBytes limits JSON request bodies (0: DefaultMaxJSONBytes).
	MaxJSONBytes int64
	// MaxUploadBytes limits JSONL uploads (0: DefaultMaxUploadBytes).
	MaxUploadBytes int64
	// BodyIdleTimeout cuts off a request body that delivers nothing for
	// this long (408); a body that keeps delivering is never cut
	// (0: DefaultBodyIdleTimeout; negative: no limit).
	BodyIdleTimeout time.Duration
	// MaxConnections caps the open connections of the listener that
	// Server.Listener wraps; one over it gets 429 with Retry-After
	// (0: DefaultMaxConnections; negative: no limit).
	MaxConnections int
	// MaxInflightBodyBytes is the memory all requests together may hold
	// in buffered request bodies; a request that would go over it gets 429
	// with Retry-After (0: DefaultMaxInflightBodyBytes, raised to
	// MaxJSONBytes when smaller so one largest body always fits).
	MaxInflightBodyBytes int64
	// MetricsToken, when set, is a Bearer token that may read /metrics
	// besides admin keys.
	MetricsToken string
	// MetricsPublic opens /metrics to everyone.
	MetricsPublic bool
	// AnonymousReadPublic lets anonymous callers read public datasets.
	AnonymousReadPublic bool
	// SharingDisabled turns link sharing off (sharing.enabled=false):
	// shared traces are no longer readable by link and PUT/DELETE
	// …/shared get 403.
	SharingDisabled bool
	// CORSOrigins are the browser origins allowed to call the API
	// ("https://app.example.com"; "*" for any; nil: none, no CORS
	// headers). See cors.go.
	CORSOrigins []string
	// CheckAnonymous lets callers without a key use the check API
	// (guardrails.check_requires_key=false; default false: an ingest key).
	CheckAnonymous bool
	// CheckConcurrency bounds the policy evaluations running at once
	// (0: GOMAXPROCS); requests beyond it wait, then get 429.
	CheckConcurrency int
	// CheckTimeout is the evaluation wall time of a check request
	// (0: DefaultCheckTimeout, 5 s).
	CheckTimeout time.Duration
	// Now returns the current time (nil: time.Now). Tests set it.
	Now func() time.Time
	// RuleCacheSize is the number of compiled rules kept, by the check
	// API and for dataset guardrails each (guardrails.cache_size; 0:
	// DefaultRuleCacheSize). See rulecache.go.
	RuleCacheSize int
	// MonitorStats, when set, returns the counters of the monitor pool
	// that evaluates this process's queued jobs; /metrics shows them as
	// the vigil_monitor_* families (nil: no pool, no families).
	MonitorStats func() monitor.Stats

	// SessionTTL is how long a browser session lives without use
	// (auth.session_ttl); zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// SecureCookies sets Secure on the session cookie even without TLS
	// (auth.secure_cookies, for a TLS-terminating proxy in front).
	SecureCookies bool
}

// Server serves the API. Create it with New; it is safe for concurrent use.
type Server struct {
	st      store.Store
	key     ed25519.PrivateKey
	pub     ed25519.PublicKey
	ring    []ed25519.PublicKey
	log     *slog.Logger
	version string
	maxJSON int64
	maxUp   int64
	metrics *Metrics
	cfg     Config
	now     func() time.Time
	ing     *ingest.Ingester
	handler http.Handler

	bodyIdle time.Duration
	maxConns int
	budget   bodyBudget // in-flight request body bytes

	authCache sync.Map // key hash -> *cachedPrincipal

	// Dataset guardrails (guardrails.go, rulecache.go).
	rules    *RuleCache
	rulesets *rulesets
	feed     *guardrailFeed

	indexer *searchIndexer // searchindex.go

	mux  *http.ServeMux               // the route table; Mount adds to it
	root atomic.Pointer[http.Handler] // mounted at "/" (extend.go)
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is nil")
	}
	if len(cfg.LedgerKey) != ed25519.PrivateKeySize {
		return nil, errors.New("server: Config.LedgerKey is not an Ed25519 private key")
	}
	s := &Server{
		st:      cfg.Store,
		key:     cfg.LedgerKey,
		pub:     cfg.LedgerKey.Public().(ed25519.PublicKey),
		log:     cfg.Logger,
		version: cfg.Version,
		maxJSON: cfg.MaxJSONBytes,
		maxUp:   cfg.MaxUploadBytes,
		metrics: newMetrics(cfg.MonitorStats),
		cfg:     cfg,
		now:     cfg.Now,
	}
	s.ring = append([]ed25519.PublicKey{s.pub}, cfg.KeyRing...)
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.version == "" {
		s.version = "dev"
	}
	if s.maxJSON <= 0 {
		s.maxJSON = DefaultMaxJSONBytes
	}
	if s.maxUp <= 0 {
		s.maxUp = DefaultMaxUploadBytes
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.ing = ingest.New(s.st, s.key, ingest.Config{Now: func() time.Time { return s.now() }})
	s.bodyIdle = cmp.Or(cfg.BodyIdleTimeout, DefaultBodyIdleTimeout)
	s.maxConns = cmp.Or(cfg.MaxConnections, DefaultMaxConnections)
	s.budget.limit = max(cmp.Or(cfg.MaxInflightBodyBytes, DefaultMaxInflightBodyBytes), s.maxJSON+2*bodyChunk)
	s.startGuardrails()
	s.startSearchIndexer()
	s.mux = http.NewServeMux()
	s.routes(s.mux)
	s.handler = s.accessLog(s.cors(s.admitMiddleware(s.recoverMiddleware(s.mux))))
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Metrics returns the server's metric registry.
func (s *Server) Metrics() *Metrics { return s.metrics }

// BootstrapOptions configure Bootstrap.
type BootstrapOptions struct {
	// AdminUsername is the name of the first user ("" = "admin").
	AdminUsername string
	// EnvKey is the VIGIL_API_KEY value ("" = unset).
	EnvKey string
}

// BootstrapResult reports what Bootstrap did.
type BootstrapResult struct {
	// CreatedUser is true when the store had no users and the admin user
	// was created.
	CreatedUser bool
	// GeneratedKey is the plaintext of a newly generated admin key, to be
	// printed once; "" when none was generated.
	GeneratedKey string
	// RegisteredEnvKey is true when EnvKey was registered as a new admin key.
	RegisteredEnvKey bool
	// Warning is a message to log ("" = none), e.g. a revoked EnvKey.
	Warning string
}

// Bootstrap prepares a store for first use (explorer-api §1.3): on a store
// with no users it creates the admin user and either registers EnvKey as
// its admin key or generates one; on later starts an unknown EnvKey is
// registered as an extra admin key of the first admin, and a revoked one
// stays revoked (with a warning).
func Bootstrap(ctx context.Context, st store.Store, opts BootstrapOptions) (*BootstrapResult, error) {
	res := &BootstrapResult{}
	if opts.AdminUsername == "" {
		opts.AdminUsername = "admin"
	}
	if opts.EnvKey != "" {
		if err := validateImportedKey(opts.EnvKey); err != nil {
			return nil, fmt.Errorf("VIGIL_API_KEY: %w", err)
		}
	}
	n, err := st.CountUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: count users: %w", err)
	}
	var admin *store.User
	if n == 0 {
		admin = &store.User{Username: opts.AdminUsername, Role: store.RoleAdmin}
		if err := st.CreateUser(ctx, admin); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("bootstrap: create admin user: %w", err)
		} else if err != nil {
			// Another process won the race.
			if admin, err = st.GetUserByName(ctx, opts.AdminUsername); err != nil {
				return nil, fmt.Errorf("bootstrap: %w", err)
			}
		} else {
			res.CreatedUser = true
		}
	} else {
		users, err := st.ListUsers(ctx)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: list users: %w", err)
		}
		for _, u := range users {
			if u.Role == store.RoleAdmin && !u.Disabled {
				admin = u
				break
			}
		}
		if admin == nil {
			admin = users[0]
		}
	}
	if opts.EnvKey != "" {
		k, err := st.GetAPIKeyByHash(ctx, store.HashKey(opts.EnvKey))
		switch {
		case err == nil && k.RevokedAt != nil:
			res.Warning = "VIGIL_API_KEY is a revoked key; it stays invalid"
		case err == nil:
			// Known and active: nothing to do.
		case errors.Is(err, store.ErrNotFound):
			name := "bootstrap"
			if !res.CreatedUser {
				name = "env"
			}
			if err := st.CreateAPIKey(ctx, newKeyRow(opts.EnvKey, name, store.ScopeAdmin, admin.ID)); err != nil && !errors.Is(err, store.ErrConflict) {
				return nil, fmt.Errorf("bootstrap: register VIGIL_API_KEY: %w", err)
			}
			res.RegisteredEnvKey = true
		default:
			return nil, fmt.Errorf("bootstrap: look up VIGIL_API_KEY: %w", err)
		}
		return res, nil
	}
	if res.CreatedUser {
		plain, err := generateKey()
		if err != nil {
			return nil, err
		}
		if err := st.CreateAPIKey(ctx, newKeyRow(plain, "bootstrap", store.ScopeAdmin, admin.ID)); err != nil {
			return nil, fmt.Errorf("bootstrap: create admin key: %w", err)
		}
		res.GeneratedKey = plain
	}
	return res, nil
}
