package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vigilhq/vigil/internal/upconn"
	"github.com/vigilhq/vigil/server"
)

// Backend authenticates the callers of the streamable HTTP proxy and
// opens their store and rules. ServerBackend is the in-process one.
type Backend interface {
	// Open resolves a Vigil key ("" = none: no pins, no recording, no
	// dataset rules) for dataset. A bad key is server.ErrInvalidKey; a
	// key below ingest scope ErrForbidden.
	Open(ctx context.Context, key, dataset string) (*Access, error)
}

// Access is what a caller's key opens: the store of its owner (nil for
// no key) and the dataset's blocking rules.
type Access struct {
	Store Store
	Guard *Guard
	Owner string
}

// ServerConfig is a configured upstream MCP server (gateway.mcp.servers).
type ServerConfig struct {
	Name    string
	URL     string
	Headers map[string]string
	Timeout time.Duration // upstream POST timeout (default 300 s)
}

// ProxyConfig configures the streamable HTTP proxy.
type ProxyConfig struct {
	// Backend opens callers' stores and rules; nil proxies with neither.
	Backend Backend
	// Servers are the named upstreams of mcp/{server}.
	Servers []ServerConfig
	// AllowedUpstreamHosts bound the MCP-SERVER-BASE-URL of the compat
	// route (default localhost, 127.0.0.1, ::1).
	AllowedUpstreamHosts []string
	// AllowedOrigins are browser origins allowed besides the listener's
	// own (§9.5).
	AllowedOrigins []string
	// GlobalRules apply to every request (gateway.global_guardrails).
	GlobalRules []*Rule
	// FailOpen, RugPullAction and FailureFormat as in Guard and Options.
	FailOpen      bool
	RugPullAction string
	FailureFormat string
	// Client sends upstream requests (default: a transport without
	// overall timeout, so GET streams can stay open).
	Client *http.Client
	// Logger receives refusals and upstream failures; nil discards.
	Logger *slog.Logger
}

// Proxy is the streamable HTTP MCP proxy (spec/gateway.md §9.5). It is an
// http.Handler for the routes [/{dataset}]/mcp/streamable and
// [/{dataset}]/mcp/{server}; the gateway router sets the path values
// "dataset" ("" when none) and "server" ("streamable" for the compat
// route) before calling it.
type Proxy struct {
	cfg     ProxyConfig
	log     *slog.Logger
	hc      *http.Client
	up      *upconn.Pool // POSTs to http:// upstreams; nil with ProxyConfig.Client
	servers map[string]ServerConfig

	mu        sync.Mutex
	sessions  map[string]*proxySession
	lastSweep time.Time
}

// proxySession is a session as the proxy knows it.
type proxySession struct {
	sess       *Session
	upstream   string // the upstream URL
	upstreamID string // the upstream's Mcp-Session-Id ("" when stateless)
	owner      string
	lastSeen   time.Time
	rules      *Guard // the dataset rules the session's guard holds
}

// NewProxy returns the proxy.
func NewProxy(cfg ProxyConfig) *Proxy {
	p := &Proxy{cfg: cfg, log: cfg.Logger, hc: cfg.Client, servers: map[string]ServerConfig{}, sessions: map[string]*proxySession{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.hc == nil {
		p.up = upconn.NewPool(30 * time.Second)
		p.hc = &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second, DisableCompression: true}}
	}
	if len(p.cfg.AllowedUpstreamHosts) == 0 {
		p.cfg.AllowedUpstreamHosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	for _, s := range cfg.Servers {
		p.servers[s.Name] = s
	}
	return p
}

// Close ends every open session (records flushed, at most until ctx ends).
func (p *Proxy) Close(ctx context.Context) {
	p.mu.Lock()
	list := make([]*proxySession, 0, len(p.sessions))
	for _, s := range p.sessions {
		list = append(list, s)
	}
	p.sessions = map[string]*proxySession{}
	p.mu.Unlock()
	if p.up != nil {
		p.up.Close()
	}
	for _, s := range list {
		s.sess.Close(ctx)
	}
}

// rpcError writes a JSON-RPC-shaped error body with an HTTP status.
func rpcError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(errorResponse(nil, code, msg, nil))
}

// detailError writes the gateway's {"detail","code"} error shape.
func detailError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"detail": detail, "code": code})
	_, _ = w.Write(b)
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tm := &timing{t0: time.Now()}
	if r.PathValue("server") == "sse" {
		detailError(w, http.StatusNotImplemented, "not_supported", "MCP SSE transport is not supported; use streamable HTTP")
		return
	}
	if !p.checkOrigin(w, r) {
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		rpcError(w, http.StatusMethodNotAllowed, codeInvalidRequest, "method not allowed: "+r.Method)
		return
	}
	upstream, headers, ok := p.upstream(w, r)
	if !ok {
		return
	}
	dataset := r.PathValue("dataset")
	if dataset == "" {
		dataset = r.Header.Get("Invariant-Project-Name")
	}
	sessKey := firstNonEmpty(r.Header.Get("Invariant-Session"), r.Header.Get("Vigil-Session"))
	if sessKey != "" && !validSessionKey(sessKey) {
		detailError(w, http.StatusBadRequest, "invalid_request", "Invariant-Session must be 1 to 128 printable ASCII characters")
		return
	}
	key, fwdAuth := vigilKey(r)
	if dataset != "" && key == "" {
		detailError(w, http.StatusBadRequest, "unauthenticated", "Missing invariant api key")
		return
	}
	var acc *Access
	if p.cfg.Backend != nil {
		var err error
		acc, err = p.cfg.Backend.Open(r.Context(), key, dataset)
		switch {
		case errors.Is(err, server.ErrInvalidKey):
			detailError(w, http.StatusUnauthorized, "unauthenticated", "Invalid Invariant API key. Please check your API key.")
			return
		case errors.Is(err, ErrForbidden):
			detailError(w, http.StatusForbidden, "forbidden", "forbidden")
			return
		case err != nil:
			p.log.Error("mcp proxy: opening the caller's store failed", "err", err)
			acc = &Access{Guard: &Guard{Unavailable: "guardrails unavailable"}}
		}
	}
	if acc == nil {
		acc = &Access{}
	}
	out := r.Header.Clone()
	stripHeaders(out)
	if fwdAuth == "" {
		out.Del("Authorization")
	} else {
		out.Set("Authorization", fwdAuth)
	}
	for k, v := range headers {
		out.Set(k, v)
	}
	switch r.Method {
	case http.MethodPost:
		p.post(w, r, upstream, out, acc, dataset, tm)
	case http.MethodGet:
		p.get(w, r, upstream, out, tm)
	case http.MethodDelete:
		p.delete(w, r, upstream, out, tm)
	}
}

// checkOrigin applies the DNS-rebinding rules of §9.5.
func (p *Proxy) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		own := "http://" + r.Host
		if r.TLS != nil {
			own = "https://" + r.Host
		}
		if !strings.EqualFold(o, own) && !slices.Contains(p.cfg.AllowedOrigins, o) {
			p.log.Warn("mcp proxy: request refused: Origin not allowed", "origin", o)
			rpcError(w, http.StatusForbidden, codeInvalidRequest, "Forbidden: Origin header "+o+" is not allowed")
			return false
		}
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ta, ok := local.(*net.TCPAddr); ok && ta.IP.IsLoopback() && !loopbackHost(r.Host) {
			p.log.Warn("mcp proxy: request refused: Host not a loopback name", "host", r.Host)
			rpcError(w, http.StatusForbidden, codeInvalidRequest, "Forbidden: Host header "+r.Host+" is not a loopback address")
			return false
		}
	}
	return true
}

func loopbackHost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// upstream resolves the upstream URL and extra headers of the request.
func (p *Proxy) upstream(w http.ResponseWriter, r *http.Request) (string, map[string]string, bool) {
	name := r.PathValue("server")
	if name == "" || name == "streamable" {
		base := r.Header.Get("Mcp-Server-Base-Url")
		if base == "" {
			rpcError(w, http.StatusBadRequest, codeInvalidRequest, "missing MCP-SERVER-BASE-URL header")
			return "", nil, false
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			rpcError(w, http.StatusBadRequest, codeInvalidRequest, "MCP-SERVER-BASE-URL is not an http(s) URL: "+base)
			return "", nil, false
		}
		if !slices.Contains(p.cfg.AllowedUpstreamHosts, u.Hostname()) {
			rpcError(w, http.StatusForbidden, codeInvalidRequest, "upstream host "+u.Hostname()+" is not in gateway.mcp.allowed_upstream_hosts")
			return "", nil, false
		}
		extra := map[string]string{}
		for k, vs := range r.Header {
			if rest, ok := cutPrefixFold(k, "Invariant-X-Mcp-Server-"); ok && len(vs) > 0 {
				extra[rest] = vs[0]
			}
		}
		return strings.TrimRight(base, "/") + "/mcp/", extra, true
	}
	s, ok := p.servers[name]
	if !ok {
		rpcError(w, http.StatusNotFound, codeInvalidRequest, "no MCP server named "+name+" is configured")
		return "", nil, false
	}
	return s.URL, s.Headers, true
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) > len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return "", false
}

// vigilKey finds the Vigil key (§3.1) and the Authorization value to
// forward (the MCP server's own, with any ";invariant-auth=" part cut).
func vigilKey(r *http.Request) (key, fwdAuth string) {
	fwdAuth = r.Header.Get("Authorization")
	if before, after, ok := strings.Cut(fwdAuth, ";invariant-auth="); ok {
		fwdAuth, key = strings.TrimSpace(before), strings.TrimSpace(after)
		if fwdAuth == "Bearer" || fwdAuth == "" {
			fwdAuth = ""
		}
	}
	for _, h := range []string{"Invariant-Authorization", "Vigil-Authorization"} {
		if v := r.Header.Get(h); v != "" {
			key = strings.TrimSpace(strings.TrimPrefix(v, "Bearer "))
		}
	}
	if key == "" {
		key = strings.TrimSpace(r.Header.Get("Invariant-Api-Key"))
	}
	return key, fwdAuth
}

// stripHeaders removes what is never forwarded (§3.4).
func stripHeaders(h http.Header) {
	var buf [64]byte
	for k := range h {
		lk := lowerKey(buf[:0], k)
		switch {
		case lk == "connection", lk == "keep-alive", strings.HasPrefix(lk, "proxy-"), lk == "te", lk == "trailer",
			lk == "transfer-encoding", lk == "upgrade", lk == "host", lk == "content-length", lk == "accept-encoding",
			strings.HasPrefix(lk, "x-forwarded-"), lk == "x-real-ip", lk == "forwarded", strings.HasPrefix(lk, "invariant-"),
			strings.HasPrefix(lk, "vigil-"), lk == "mcp-server-base-url", lk == "push-invariant-explorer", lk == "origin", lk == "cookie":
			h.Del(k)
		}
	}
}

// lowerKey is the lower case of header name k, in buf when it fits
// (header names are ASCII tokens; the result is only compared, never
// kept).
func lowerKey(buf []byte, k string) string {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// session finds or starts the session of a request: by Mcp-Session-Id,
// else (stateless revision, no session header) by caller, dataset,
// upstream and client name.
func (p *Proxy) session(r *http.Request, upstream string, acc *Access, dataset string, m *message) (*proxySession, bool) {
	sk := ""
	if v := firstNonEmpty(r.Header.Get("Invariant-Session"), r.Header.Get("Vigil-Session")); v != "" {
		sk = "h:" + v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := r.Header.Get("Mcp-Session-Id")
	if id != "" {
		if ps := p.sessions[id]; ps != nil {
			if ps.owner != acc.Owner {
				// Someone else's session id: never shared; not recorded.
				return p.newSessionLocked("", "", upstream, &Access{Guard: acc.Guard}, "", ""), false
			}
			ps.lastSeen = time.Now()
			return ps, true
		}
		if !strings.HasPrefix(id, "vgl-") {
			// An upstream session Vigil has not seen (a restart): attach.
			ps := p.newSessionLocked(id, id, upstream, acc, dataset, sk)
			p.sessions[id] = ps
			return ps, true
		}
	}
	if m != nil && m.Method == "initialize" {
		// Registered once the upstream answers (its Mcp-Session-Id).
		return p.newSessionLocked("", "", upstream, acc, dataset, sk), false
	}
	if id == "" {
		// Stateless: one session per caller, dataset, upstream and client.
		var meta struct {
			Meta struct {
				ClientInfo impl `json:"io.modelcontextprotocol/clientInfo"`
			} `json:"_meta"`
		}
		if m != nil {
			_ = json.Unmarshal(m.Params, &meta)
		}
		h := sha256.Sum256([]byte(acc.Owner + "\x00" + dataset + "\x00" + upstream + "\x00" + meta.Meta.ClientInfo.Name + "\x00" + r.Header.Get("Invariant-Session")))
		id = "vgl-s-" + hex.EncodeToString(h[:12])
	}
	if ps := p.sessions[id]; ps != nil {
		ps.lastSeen = time.Now()
		return ps, true
	}
	ps := p.newSessionLocked(id, "", upstream, acc, dataset, sk)
	p.sessions[id] = ps
	return ps, true
}

// sessionIdle is how long a proxy session may go unused before the proxy
// ends it (its records are flushed; a later request with its id
// re-attaches to its trace).
const sessionIdle = 30 * time.Minute

// sweepLocked ends the sessions idle for longer than sessionIdle.
func (p *Proxy) sweepLocked() {
	now := time.Now()
	for id, ps := range p.sessions {
		if now.Sub(ps.lastSeen) > sessionIdle {
			delete(p.sessions, id)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ps.sess.Close(ctx)
				cancel()
			}()
		}
	}
}

// refreshRules gives a session the dataset rules of this request when
// they changed since (a guardrail write applies to the next request of
// every open session).
func (p *Proxy) refreshRules(ps *proxySession, acc *Access) {
	if acc.Guard == nil || acc.Store == nil {
		return
	}
	p.mu.Lock()
	changed := ps.rules != acc.Guard
	ps.rules = acc.Guard
	p.mu.Unlock()
	if changed && ps.sess.opt.Guard != nil {
		acc.Guard.mu.RLock()
		rules := append(append([]*Rule(nil), p.cfg.GlobalRules...), acc.Guard.Rules...)
		unavailable := acc.Guard.Unavailable
		acc.Guard.mu.RUnlock()
		ps.sess.opt.Guard.mu.Lock()
		ps.sess.opt.Guard.Rules, ps.sess.opt.Guard.Unavailable = rules, unavailable
		ps.sess.opt.Guard.mu.Unlock()
	}
}

func (p *Proxy) newSessionLocked(id, upstreamID, upstream string, acc *Access, dataset, sessKey string) *proxySession {
	if time.Since(p.lastSweep) > time.Minute {
		p.lastSweep = time.Now()
		p.sweepLocked()
	}
	g := &Guard{FailOpen: p.cfg.FailOpen, Rules: append([]*Rule(nil), p.cfg.GlobalRules...)}
	var rules *Guard
	if acc.Guard != nil {
		acc.Guard.mu.RLock()
		g.Rules = append(g.Rules, acc.Guard.Rules...)
		g.Unavailable = acc.Guard.Unavailable
		acc.Guard.mu.RUnlock()
		rules = acc.Guard
	}
	host := upstream
	if u, err := url.Parse(upstream); err == nil {
		host = u.Host + u.Path
	}
	if acc.Store == nil && len(g.Rules) == 0 && g.Unavailable == "" {
		g = nil // no key: no dataset rules will ever come; nothing to check
	}
	opt := Options{SessionID: id, Upstream: host, Transport: "streamable-http", Store: acc.Store, Guard: g,
		RugPullAction: p.cfg.RugPullAction, FailureFormat: p.cfg.FailureFormat, Logger: p.log, SessionKey: sessKey}
	if acc.Store != nil {
		opt.Dataset = dataset
	}
	return &proxySession{sess: NewSession(opt), upstream: upstream, upstreamID: upstreamID, owner: acc.Owner, lastSeen: time.Now(), rules: rules}
}

func (p *Proxy) post(w http.ResponseWriter, r *http.Request, upstream string, out http.Header, acc *Access, dataset string, tm *timing) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxMessageBytes+1))
	if err != nil {
		rpcError(w, http.StatusBadRequest, codeParseError, "reading the request body: "+err.Error())
		return
	}
	if len(body) > MaxMessageBytes {
		rpcError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf("Vigil: message over the %d-byte limit", MaxMessageBytes))
		return
	}
	var first *message
	if elems, batch := splitBatch(body); batch {
		if len(elems) > 0 {
			first, _ = parseMessage(elems[0])
		}
	} else {
		first, err = parseMessage(body)
		if err != nil {
			rpcError(w, http.StatusBadRequest, codeParseError, "Vigil: invalid JSON-RPC message: "+err.Error())
			return
		}
	}
	ps, registered := p.session(r, upstream, acc, dataset, first)
	sess := ps.sess
	p.refreshRules(ps, acc)
	gs := time.Now()
	fwd, reply := sess.FromClient(r.Context(), body)
	tm.guard += time.Since(gs)
	// Vigil's response headers (the trace exists once a first event of
	// the session was written).
	w.Header().Set("Vigil-Request-Id", newULID())
	if id := sess.TraceID(); id != "" {
		w.Header().Set("Vigil-Trace-Id", id)
	}
	if fwd == nil && reply != nil {
		w.Header().Set("Vigil-Guardrail-Result", "block")
	}
	if fwd == nil {
		tm.set(w.Header())
		if reply == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if ps.upstreamID == "" && strings.HasPrefix(sess.ID(), "vgl-") && r.Header.Get("Mcp-Session-Id") != "" {
			w.Header().Set("Mcp-Session-Id", sess.ID())
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(reply)
		return
	}
	if ps.upstreamID != "" {
		out.Set("Mcp-Session-Id", ps.upstreamID)
	} else {
		out.Del("Mcp-Session-Id")
	}
	timeout := 300 * time.Second
	if s, ok := p.servers[r.PathValue("server")]; ok && s.Timeout > 0 {
		timeout = s.Timeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	tm.upStart = time.Now()
	resp, err := p.send(ctx, upstream, out, fwd)
	tm.upEnd = time.Now()
	if err != nil {
		tm.set(w.Header())
		p.log.Warn("mcp proxy: upstream unreachable", "upstream", upstream, "err", err)
		sess.Abort("Vigil: the MCP server is unreachable: " + err.Error())
		rpcError(w, http.StatusBadGateway, codeInternalError, "Vigil: the MCP server is unreachable")
		return
	}
	defer resp.Body.Close()
	if first != nil && first.Method == "initialize" && !registered {
		upID := resp.Header.Get("Mcp-Session-Id")
		p.mu.Lock()
		if upID != "" {
			ps.upstreamID = upID
			sess.setID(upID)
			p.sessions[upID] = ps
		} else {
			p.sessions[sess.ID()] = ps
		}
		p.mu.Unlock()
	}
	copyResponseHeaders(w.Header(), resp.Header)
	if ps.upstreamID == "" && first != nil && first.Method == "initialize" {
		w.Header().Set("Mcp-Session-Id", sess.ID())
	} else if ps.upstreamID == "" && r.Header.Get("Mcp-Session-Id") != "" {
		w.Header().Set("Mcp-Session-Id", sess.ID())
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxMessageBytes+1))
		tm.upEnd = time.Now()
		if err != nil {
			tm.set(w.Header())
			rpcError(w, http.StatusBadGateway, codeInternalError, "Vigil: reading the MCP server's answer failed: "+err.Error())
			return
		}
		if len(bytes.TrimSpace(b)) > 0 {
			gs := time.Now()
			b = sess.FromServer(r.Context(), b)
			tm.guard += time.Since(gs)
		}
		if reply != nil {
			b = mergeReplies(b, reply)
		}
		w.Header().Del("Content-Length")
		tm.set(w.Header())
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	case strings.HasPrefix(ct, "text/event-stream"):
		// The headers go out with the first event, carrying its timings.
		w.Header().Del("Content-Length")
		lw := &lazyHeader{ResponseWriter: w, status: resp.StatusCode, t: tm}
		if reply != nil {
			writeSSE(lw, sseEvent{event: "message", data: reply})
		}
		p.relaySSE(r.Context(), lw, timedReader{resp.Body, tm}, sess, tm)
		lw.writeHeader()
	default:
		tm.set(w.Header())
		if reply != nil && resp.StatusCode == http.StatusAccepted {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(reply)
			return
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}

// send POSTs body to the upstream: over the proxy's own connection pool
// for an http:// upstream (unless ProxyConfig.Client is set), else with
// the http.Client.
func (p *Proxy) send(ctx context.Context, upstream string, h http.Header, body []byte) (*http.Response, error) {
	if p.up != nil && strings.HasPrefix(upstream, "http://") {
		u, err := url.Parse(upstream)
		if err != nil {
			return nil, fmt.Errorf("bad upstream URL: %w", err)
		}
		return p.up.Do(ctx, http.MethodPost, u, h, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, upstream, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad upstream URL: %w", err)
	}
	req.Header = h
	return p.hc.Do(req)
}

// mergeReplies appends Vigil's own replies to an upstream JSON answer.
func mergeReplies(upstream, own []byte) []byte {
	var list [][]byte
	for _, part := range [][]byte{upstream, own} {
		if len(bytes.TrimSpace(part)) == 0 {
			continue
		}
		if elems, ok := splitBatch(part); ok {
			for _, e := range elems {
				list = append(list, e)
			}
		} else {
			list = append(list, part)
		}
	}
	return joinBatch(list, true)
}

func copyResponseHeaders(dst, src http.Header) {
	var buf [64]byte
	for k, vs := range src {
		lk := lowerKey(buf[:0], k)
		if lk == "connection" || lk == "keep-alive" || lk == "transfer-encoding" || lk == "trailer" || lk == "upgrade" || strings.HasPrefix(lk, "proxy-") || lk == "content-length" || lk == "content-encoding" {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

func (p *Proxy) get(w http.ResponseWriter, r *http.Request, upstream string, out http.Header, tm *timing) {
	id := r.Header.Get("Mcp-Session-Id")
	p.mu.Lock()
	ps := p.sessions[id]
	p.mu.Unlock()
	if ps != nil && ps.upstreamID != "" {
		out.Set("Mcp-Session-Id", ps.upstreamID)
	} else if ps != nil {
		out.Del("Mcp-Session-Id")
	}
	resp := p.forward(w, r, http.MethodGet, upstream, out, tm)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if ps != nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		p.relaySSE(r.Context(), w, resp.Body, ps.sess, nil)
		return
	}
	flushCopy(w, resp.Body)
}

func (p *Proxy) delete(w http.ResponseWriter, r *http.Request, upstream string, out http.Header, tm *timing) {
	id := r.Header.Get("Mcp-Session-Id")
	p.mu.Lock()
	ps := p.sessions[id]
	delete(p.sessions, id)
	p.mu.Unlock()
	if ps != nil {
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ps.sess.Close(ctx)
			cancel()
		}()
		if ps.upstreamID == "" {
			// Vigil's own id for a stateless upstream: nothing to end there.
			tm.set(w.Header())
			w.WriteHeader(http.StatusOK)
			return
		}
		out.Set("Mcp-Session-Id", ps.upstreamID)
	}
	if resp := p.forward(w, r, http.MethodDelete, upstream, out, tm); resp != nil {
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}
}

// forward sends a body-less request (GET, DELETE) upstream with headers
// out and writes the answer's status and headers; the caller copies the
// body and closes it. On failure it answers the client with a JSON-RPC
// error and returns nil.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, method, upstream string, out http.Header, tm *timing) *http.Response {
	req, err := http.NewRequestWithContext(r.Context(), method, upstream, nil)
	if err != nil {
		rpcError(w, http.StatusBadGateway, codeInternalError, "bad upstream URL: "+err.Error())
		return nil
	}
	req.Header = out
	tm.upStart = time.Now()
	resp, err := p.hc.Do(req)
	tm.upEnd = time.Now()
	if err != nil {
		tm.set(w.Header())
		rpcError(w, http.StatusBadGateway, codeInternalError, "Vigil: the MCP server is unreachable")
		return nil
	}
	copyResponseHeaders(w.Header(), resp.Header)
	tm.set(w.Header())
	w.WriteHeader(resp.StatusCode)
	return resp
}

func flushCopy(w http.ResponseWriter, r io.Reader) {
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// sseEvent is one server-sent event; other fields (retry, comments) are
// kept in extra, in order.
type sseEvent struct {
	id, event string
	data      []byte
	extra     []string
	hasData   bool
}

func writeSSE(w io.Writer, ev sseEvent) {
	var b bytes.Buffer
	for _, x := range ev.extra {
		b.WriteString(x)
		b.WriteByte('\n')
	}
	if ev.id != "" {
		b.WriteString("id: " + ev.id + "\n")
	}
	if ev.event != "" {
		b.WriteString("event: " + ev.event + "\n")
	}
	if ev.hasData || len(ev.data) > 0 {
		for _, line := range bytes.Split(ev.data, []byte{'\n'}) {
			b.WriteString("data: ")
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	b.WriteByte('\n')
	_, _ = w.Write(b.Bytes())
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
}

// sseReaders are the line readers of relaySSE, reused across requests.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// relaySSE parses the upstream's event stream incrementally and relays
// each event, passing its data (one JSON-RPC message) through the
// session: answers to intercepted requests are checked and replaced in
// place (the SSE id is kept); everything else passes at once.
func (p *Proxy) relaySSE(ctx context.Context, w http.ResponseWriter, body io.Reader, sess *Session, tm *timing) {
	rd := sseReaders.Get().(*bufio.Reader)
	rd.Reset(body)
	defer func() {
		rd.Reset(nil)
		sseReaders.Put(rd)
	}()
	var ev sseEvent
	var data [][]byte
	for {
		line, tooLong, err := readLine(rd, MaxMessageBytes)
		if tooLong {
			p.log.Warn("mcp proxy: SSE line over the size limit; dropped")
		} else if len(line) == 0 && err == nil {
			if ev.hasData || ev.id != "" || ev.event != "" || len(ev.extra) > 0 {
				ev.data = bytes.Join(data, []byte{'\n'})
				if ev.hasData && len(bytes.TrimSpace(ev.data)) > 0 && (ev.event == "" || ev.event == "message") {
					gs := time.Now()
					ev.data = sess.FromServer(ctx, ev.data)
					if tm != nil {
						tm.guard += time.Since(gs)
					}
				}
				writeSSE(w, ev)
			}
			ev, data = sseEvent{}, nil
		} else if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte{':'})
			value = bytes.TrimPrefix(value, []byte{' '})
			switch string(field) {
			case "data":
				data = append(data, append([]byte(nil), value...))
				ev.hasData = true
			case "id":
				ev.id = string(value)
			case "event":
				ev.event = string(value)
			default:
				ev.extra = append(ev.extra, string(line))
			}
		}
		if err != nil {
			if ev.hasData {
				ev.data = bytes.Join(data, []byte{'\n'})
				if len(bytes.TrimSpace(ev.data)) > 0 {
					ev.data = sess.FromServer(ctx, ev.data)
				}
				writeSSE(w, ev)
			}
			return
		}
	}
}

// validSessionKey reports whether v is 1–128 printable ASCII characters.
func validSessionKey(v string) bool {
	if len(v) == 0 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
