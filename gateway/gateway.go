package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/internal/upconn"
	"github.com/vigilhq/vigil/policy"
)

// RecorderStats is implemented by a Recorder that counts its records;
// the health route (GET /api/v1/gateway/health) reports them under
// "recorder", which is how vigil bench reads the recording figures of
// spec §11.6.
type RecorderStats interface {
	RecorderStats() RecordStats
}

// RecordStats are a recorder's counters.
type RecordStats struct {
	// Written and Dropped count records written and dropped (a full
	// queue: vigil_trace_write_dropped_total).
	Written uint64 `json:"written"`
	Dropped uint64 `json:"dropped"`
	// MaxQueue is the largest queue depth seen; Pending the records
	// handed over and not yet written (or dropped).
	MaxQueue int64 `json:"max_queue"`
	Pending  int   `json:"pending"`
}

// Identity is the owner of a Vigil key, as an Authenticator resolves it.
type Identity struct {
	UserID   string
	Username string
	KeyID    string
	// Key is the plaintext key, kept so that a standalone gateway can
	// write and read the store with the caller's own key. Never logged.
	Key string
	// CanIngest reports whether the key's scope allows recording
	// (ingest or higher).
	CanIngest bool
}

// ErrInvalidKey is what an Authenticator returns for an unknown, revoked
// or expired key.
var ErrInvalidKey = errors.New("invalid Vigil key")

// ErrUnavailable is what an Authenticator or RuleSource returns when the
// store cannot be reached and nothing is cached.
var ErrUnavailable = errors.New("store unavailable")

// Authenticator resolves a Vigil key to its identity. It returns
// ErrInvalidKey for a bad key.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (*Identity, error)
}

// Guardrail is one rule the gateway evaluates: a dataset guardrail, a
// global rule from the configuration or the request's header rules.
type Guardrail struct {
	ID      string
	Name    string
	Content string
	Action  string // "block" or "log"
	Version int
	// Severity is the default severity of its findings (info, warn or
	// critical; "" = warn).
	Severity string
	// StreamFinal marks a non-monotone rule (extra_metadata.stream_check
	// "final"): a streamed request it applies to runs in buffer mode.
	StreamFinal bool
	// Policy is the compiled rule; nil when Err is set.
	Policy *policy.Policy
	// Err is why a dataset rule no longer compiles; evaluating it is an
	// evaluation failure (fail mode applies).
	Err error
}

// Ruleset is the guardrails of one dataset at one version.
type Ruleset struct {
	Version    string // the dataset's ruleset_version; "none" when no dataset
	Guardrails []*Guardrail
}

// RuleSource gives the guardrails of a dataset in the caller's namespace
// that apply to LLM routes. A dataset that does not exist has no rules
// (an empty Ruleset, not an error).
type RuleSource interface {
	Ruleset(ctx context.Context, id *Identity, dataset string) (*Ruleset, error)
}

// Compiler compiles rule text; the server's rule cache is one.
type Compiler interface {
	Load(src string) (*policy.Policy, error)
}

// Options configure a Gateway. The zero value of each field is the
// default given in its comment (spec §10 names the keys).
type Options struct {
	// Upstreams are the configured upstreams; the built-ins openai,
	// anthropic and gemini exist unless an entry of the same name
	// overrides them.
	Upstreams []Upstream
	// Auth resolves Vigil keys; nil: every key is invalid.
	Auth Authenticator
	// Rules gives dataset guardrails; nil: datasets have no rules.
	Rules RuleSource
	// Compiler compiles global and header rules; nil: a private cache.
	Compiler Compiler
	// Recorder records calls; nil: nothing is recorded.
	Recorder Recorder
	// Global are the global guardrails, already compiled (Policy set).
	Global []*Guardrail
	// MCP serves the MCP routes ([/{dataset}]/mcp/streamable and
	// [/{dataset}]/mcp/{server}) with the path values "dataset" ("" when
	// none) and "server" (the segment after mcp/, "streamable" for the
	// compat route) set; nil: those routes are 404.
	MCP http.Handler

	RequireKey        bool
	DefaultDataset    string
	HeaderGuardrails  string        // merge (default), replace or ignore
	InputCheck        string        // concurrent (default) or before
	EvalTimeout       time.Duration // default 2s
	FailOpen          bool          // fail_mode open; default closed
	HideRuleContent   bool          // expose_rule_content false
	OpenAIErrorNative bool          // openai_error_format native
	ForceStreamUsage  bool          // openai.force_stream_usage
	Stream            StreamOptions
	SessionStitching  string        // auto (default), header or off
	SessionIdle       time.Duration // default 30m
	// MaxSessions caps the open sessions of the stitching index (default
	// DefaultMaxSessions, negative: no cap). Past it the least recently
	// active sessions end as if idle (their runs are finished and a later
	// call starts a new trace), which bounds the index's memory (a few KB
	// per session) whatever the call rate.
	MaxSessions int
	// SessionScope is session_guardrail_scope: "request" (default) or
	// "session" (the input check of a header session also sees the
	// session's other events, spec §6.7).
	SessionScope string
	// SessionFile is where the session stitching index is persisted, so
	// that a restart keeps stitching to the open traces; "": memory only.
	SessionFile     string
	MaxRequestBytes int64 // default 32 MiB
	// Transport is the upstream transport; nil: a tuned http.Transport
	// (10 s connect timeout) for https upstreams, proxies from the
	// environment and GET models, and for the other calls to http://
	// upstreams the gateway's own connection pool (internal/upconn),
	// which sends the request and reads the answer on the handler's
	// goroutine.
	Transport http.RoundTripper
	// Logger receives the gateway's log; nil: slog.Default.
	Logger *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// StreamOptions are gateway.stream (spec §6.4).
type StreamOptions struct {
	Mode            string        // incremental (default), buffer or passthrough
	HoldbackChars   int           // H, default 256
	CheckInterval   int           // I, default 64
	CheckMaxDelay   time.Duration // D, default 50ms
	Keepalive       time.Duration // default 15s
	OverheadComment bool
}

// Gateway serves the routes under /api/v1/gateway/. Create one with New;
// it is safe for concurrent use.
type Gateway struct {
	opts      Options
	upstreams map[string]*Upstream
	hc        *http.Client
	// up calls the upstreams marked in pooled (http:// base URL, no
	// proxy from the environment) over its own keep-alive connections,
	// from the handler's goroutine; nil with Options.Transport.
	up        *upconn.Pool
	pooled    map[*Upstream]bool
	log       *slog.Logger
	compiler  Compiler
	sessions  *sessions
	now       func() time.Time
	stop      chan struct{} // closed by Close: stops the session sweeper
	closeOnce sync.Once
	// global are the global guardrails, replaced whole on reload.
	global atomic.Pointer[[]*Guardrail]

	// Stats are the gateway's counters.
	evalFailures atomic.Uint64
	wg           sync.WaitGroup // background logging evaluations
	active       sync.WaitGroup // calls being served
}

// DefaultMaxRequestBytes is the largest request body (gateway.max_request_bytes).
const DefaultMaxRequestBytes = 32 << 20

// DefaultMaxSessions is the default cap on the open sessions of the
// stitching index (Options.MaxSessions): about 5 KB each, a few hundred
// MB at most.
const DefaultMaxSessions = 50000

// New returns a gateway with opts. It fails when an upstream is invalid.
func New(opts Options) (*Gateway, error) {
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = 2 * time.Second
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = 30 * time.Minute
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	s := &opts.Stream
	if s.Mode == "" {
		s.Mode = "incremental"
	}
	if s.HoldbackChars <= 0 {
		s.HoldbackChars = 256
	}
	if s.CheckInterval <= 0 {
		s.CheckInterval = 64
	}
	if s.CheckMaxDelay <= 0 {
		s.CheckMaxDelay = 50 * time.Millisecond
	}
	if s.Keepalive <= 0 {
		s.Keepalive = 15 * time.Second
	}
	ups, err := resolveUpstreams(opts.Upstreams)
	if err != nil {
		return nil, err
	}
	g := &Gateway{opts: opts, upstreams: ups, log: opts.Logger, compiler: opts.Compiler, now: opts.Now}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.compiler == nil {
		g.compiler = &privateCache{m: map[string]*policy.Policy{}}
	}
	tr := opts.Transport
	if tr == nil {
		g.up = upconn.NewPool(10 * time.Second)
		g.pooled = map[*Upstream]bool{}
		for _, u := range ups {
			g.pooled[u] = poolable(u.base)
		}
		tr = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}
	}
	g.hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	g.sessions = newSessions(opts.SessionIdle, g.now)
	g.sessions.max = max(0, opts.MaxSessions)
	if opts.Recorder != nil {
		g.sessions.finish = g.finishRun
	}
	if opts.SessionFile != "" {
		j, err := openSessions(g.sessions, opts.SessionFile, g.log)
		if err != nil {
			return nil, err
		}
		g.sessions.j = j
	}
	g.SetGlobal(opts.Global)
	g.stop = make(chan struct{})
	if opts.Recorder != nil {
		go g.sweepSessions()
	}
	return g, nil
}

// poolable reports whether calls to an upstream at base can use the
// gateway's own connection pool: plain http, no user info, no proxy
// from the environment.
func poolable(base *url.URL) bool {
	if base.Scheme != "http" || base.User != nil {
		return false
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: base})
	return err == nil && proxy == nil
}

// Close waits for the background evaluations of logging rules, writes
// the session index and closes the idle upstream connections.
func (g *Gateway) Close() {
	g.closeOnce.Do(func() { close(g.stop) })
	g.wg.Wait()
	g.sessions.j.close()
	if g.up != nil {
		g.up.Close()
	}
}

// Idle waits until no call is being served (every finished call has
// been handed to the recorder).
func (g *Gateway) Idle() { g.active.Wait() }

// EvalFailures is the number of guardrail evaluation failures
// (vigil_guardrail_eval_failures_total).
func (g *Gateway) EvalFailures() uint64 { return g.evalFailures.Load() }

// privateCache compiles rules once per text, for gateways without a
// shared rule cache.
type privateCache struct {
	mu sync.Mutex
	m  map[string]*policy.Policy
}

func (c *privateCache) Load(src string) (*policy.Policy, error) {
	c.mu.Lock()
	p := c.m[src]
	c.mu.Unlock()
	if p != nil {
		return p, nil
	}
	p, err := policy.Load(src, policy.Options{})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) > 4096 {
		clear(c.m)
	}
	c.m[src] = p
	c.mu.Unlock()
	return p, nil
}

var datasetRx = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Prefix is the path prefix the gateway serves.
const Prefix = "/api/v1/gateway/"

// ServeHTTP resolves the path (spec §2: an optional dataset, then a route
// root) and serves the route.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			g.log.Error("gateway: panic serving a request", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			writeDetail(w, http.StatusInternalServerError, "internal gateway error", "internal")
		}
	}()
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		writeDetail(w, http.StatusNotFound, "not found", "not_found")
		return
	}
	segs := strings.Split(rest, "/")
	dataset := ""
	if !g.isRoot(segs[0]) {
		if len(segs) < 2 || !datasetRx.MatchString(segs[0]) || !g.isRoot(segs[1]) {
			writeDetail(w, http.StatusNotFound, "no gateway route at "+r.URL.Path, "not_found")
			return
		}
		dataset, segs = segs[0], segs[1:]
	}
	root, sub := segs[0], strings.Join(segs[1:], "/")
	switch root {
	case "health":
		if sub != "" {
			break
		}
		w.Header().Set("Content-Type", "application/json")
		if rs, ok := g.opts.Recorder.(RecorderStats); ok {
			st := rs.RecorderStats()
			b, _ := json.Marshal(map[string]any{"status": "ok", "recorder": st})
			w.Write(b)
			return
		}
		w.Write([]byte(`{"status": "ok"}`))
		return
	case "mcp":
		g.serveMCP(w, r, dataset, sub)
		return
	default:
		if u := g.upstreams[root]; u != nil {
			g.active.Add(1)
			defer g.active.Done()
			g.serveLLM(w, r, u, dataset, sub)
			return
		}
	}
	writeDetail(w, http.StatusNotFound, "no gateway route at "+r.URL.Path, "not_found")
}

func (g *Gateway) isRoot(s string) bool {
	return s == "mcp" || s == "health" || g.upstreams[s] != nil
}

func (g *Gateway) serveMCP(w http.ResponseWriter, r *http.Request, dataset, sub string) {
	if sub == "sse" || strings.HasPrefix(sub, "sse/") {
		writeDetail(w, http.StatusNotImplemented, "MCP SSE transport is not supported; use streamable HTTP", "not_supported")
		return
	}
	if g.opts.MCP == nil || sub == "" || strings.Contains(sub, "/") {
		writeDetail(w, http.StatusNotFound, "no gateway route at "+r.URL.Path, "not_found")
		return
	}
	r.SetPathValue("dataset", dataset)
	r.SetPathValue("server", sub) // "streamable" for the compat route
	g.opts.MCP.ServeHTTP(w, r)
}
