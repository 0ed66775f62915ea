// Package client is the Go SDK for Vigil's HTTP API (spec/explorer-api.md
// and the audit endpoints of spec/ledger.md §10).
//
// Goals: one small, context-aware Client per server; typed errors
// (*APIError with the HTTP status and the API's error code); retries with
// exponential backoff and jitter for idempotent calls only (GET, PUT,
// DELETE); streaming upload and export so datasets of any size pass
// through bounded memory; a background Pusher that batches traces.
// The same configuration the Invariant SDK reads works here:
// INVARIANT_API_ENDPOINT / INVARIANT_API_KEY as well as VIGIL_URL /
// VIGIL_API_KEY (spec/gateway.md §10).
//
// Non-goals: caching, client-side validation of traces (the server owns
// normalisation), and retrying non-idempotent POSTs (push, append,
// create): a lost response must not duplicate traces. Such a POST is
// retried only when made with WithIdempotencyKey.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultURL is the server address used when nothing else is configured.
const DefaultURL = "http://127.0.0.1:8080"

// Client talks to one Vigil server. It is safe for concurrent use.
type Client struct {
	base       string // without trailing slash, without /api/v1
	baseErr    error  // ParseURL's error for the address given to New
	key        string
	hc         *http.Client
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	userAgent  string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client (default: one with a 60 s
// response-header timeout and no overall timeout, so streams can run long).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times an idempotent call is retried after a
// network error or a 429/502/503/504 response (default 4; 0 disables).
func WithRetries(n int) Option { return func(c *Client) { c.maxRetries = n } }

// WithBackoff sets the first and the largest delay between retries
// (defaults 100 ms and 5 s). Each delay doubles, with full jitter.
func WithBackoff(min, max time.Duration) Option {
	return func(c *Client) { c.minBackoff, c.maxBackoff = min, max }
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a Client for the server at baseURL authenticating with
// apiKey ("" for anonymous calls). baseURL is read by ParseURL; when it
// is not a usable address, every call returns ParseURL's error.
func New(baseURL, apiKey string, opts ...Option) *Client {
	base, err := ParseURL(baseURL)
	if err != nil {
		base = strings.TrimRight(baseURL, "/")
	}
	c := &Client{
		base:       base,
		baseErr:    err,
		key:        apiKey,
		maxRetries: 4,
		minBackoff: 100 * time.Millisecond,
		maxBackoff: 5 * time.Second,
		userAgent:  "vigil-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = 60 * time.Second
		tr.MaxIdleConnsPerHost = 64
		c.hc = &http.Client{Transport: tr}
	}
	return c
}

// ParseURL returns the server address s in the form the Client uses:
// scheme, host and any path prefix, without a trailing slash or "/api/v1".
// An address without a scheme is http: "127.0.0.1:8080",
// "localhost:8080" and ":8080" (the local host) are accepted as people
// type them; "" is DefaultURL. Only http and https are accepted, and the
// error says what was wrong with s.
func ParseURL(s string) (string, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return DefaultURL, nil
	}
	if !strings.Contains(raw, "://") {
		if strings.HasPrefix(raw, ":") {
			raw = "127.0.0.1" + raw
		}
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w (want e.g. http://127.0.0.1:8080)", s, errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("server URL %q: scheme %q is not http or https (want e.g. http://127.0.0.1:8080)", s, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" && !strings.HasPrefix(u.Host, ":") {
		return "", fmt.Errorf("server URL %q has no host (want e.g. http://127.0.0.1:8080)", s)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("server URL %q: only scheme, host, port and path are allowed (want e.g. http://127.0.0.1:8080)", s)
	}
	if u.Hostname() == "" {
		u.Host = "127.0.0.1" + u.Host
	}
	path := strings.TrimSuffix(strings.TrimRight(u.EscapedPath(), "/"), "/api/v1")
	return u.Scheme + "://" + u.Host + strings.TrimRight(path, "/"), nil
}

// UnreachableError reports that nothing answered at the server address:
// the connection was refused, the host is unknown, or the dial timed out.
// It usually means no server runs there.
type UnreachableError struct {
	URL string // the server address
	Err error  // the dial error
}

// Error names the address, the dial failure and how to start a server.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("no Vigil server answers at %s (%v): start one with 'vigil serve', or point --url or VIGIL_URL at a running server", e.URL, dialReason(e.Err))
}

// Unwrap returns the dial error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// dialReason is the end of a dial error ("connection refused") without
// the repeated address.
func dialReason(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Err + ": " + de.Name
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// EnvURL returns the server URL from the environment: VIGIL_URL, else
// INVARIANT_API_ENDPOINT, else INVARIANT_API_URL, else DefaultURL.
func EnvURL() string {
	for _, k := range []string{"VIGIL_URL", "INVARIANT_API_ENDPOINT", "INVARIANT_API_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return DefaultURL
}

// EnvKey returns the API key from the environment: VIGIL_API_KEY, else
// INVARIANT_API_KEY, else "".
func EnvKey() string {
	for _, k := range []string{"VIGIL_API_KEY", "INVARIANT_API_KEY"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// NewFromEnv returns a Client configured from EnvURL and EnvKey.
func NewFromEnv(opts ...Option) *Client { return New(EnvURL(), EnvKey(), opts...) }

// BaseURL returns the server address the client uses.
func (c *Client) BaseURL() string { return c.base }

// APIError is a non-2xx response from the server.
type APIError struct {
	StatusCode int            // HTTP status
	Code       string         // the API's error code, e.g. "not_found"; "" if the body had none
	Detail     string         // the human message
	Body       map[string]any // the whole decoded error body, nil if it was not JSON
	Method     string
	Path       string
}

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, e.Code, e.Detail)
	}
	return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.StatusCode, e.Detail)
}

// IsNotFound reports whether err is an *APIError with status 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// request is one prepared call. body is held as bytes so a retry can
// resend it; stream is a one-shot body (never retried).
type request struct {
	method  string
	path    string // starting with "/"
	query   url.Values
	body    []byte
	stream  io.Reader
	ctype   string
	headers http.Header
}

// idempotencyKeyCtx is the context key of WithIdempotencyKey.
type idempotencyKeyCtx struct{}

// WithIdempotencyKey returns a context whose requests carry the
// Idempotency-Key header (explorer-api §1.6; at most 128 characters). The
// server then runs a repeated request once and replays its response, so a
// POST made with it (Push, Append, CreateDataset, ...) is retried like a
// GET after a network error or a 429/502/503/504. Use one key per logical
// operation: the same key with a different body gets 409
// idempotency_mismatch. Streaming uploads send the key but are never
// retried (their body cannot be replayed).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

func (c *Client) idempotent(r *request) bool {
	if r.stream != nil {
		return false
	}
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.headers.Get("Idempotency-Key") != ""
}

// do sends r and returns the response when its status is 2xx; otherwise
// it returns an *APIError. The caller closes the body.
func (c *Client) do(ctx context.Context, r *request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	if k, _ := ctx.Value(idempotencyKeyCtx{}).(string); k != "" && r.headers.Get("Idempotency-Key") == "" {
		h := r.headers.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Idempotency-Key", k)
		r.headers = h
	}
	if c.baseErr != nil {
		return nil, c.baseErr
	}
	retries := 0
	if c.idempotent(r) {
		retries = c.maxRetries
	}
	backoff := c.minBackoff
	for attempt := 0; ; attempt++ {
		var body io.Reader
		if r.stream != nil {
			body = r.stream
		} else if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u, body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
		}
		for k, v := range r.headers {
			req.Header[k] = v
		}
		if r.ctype != "" {
			req.Header.Set("Content-Type", r.ctype)
		} else if r.body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		req.Header.Set("User-Agent", c.userAgent)
		resp, err := c.hc.Do(req)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil || attempt >= retries {
				var oe *net.OpError
				if ctx.Err() == nil && errors.As(err, &oe) && oe.Op == "dial" {
					return nil, &UnreachableError{URL: c.base, Err: err}
				}
				return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
			}
		} else if resp.StatusCode < 300 {
			return resp, nil
		} else {
			apiErr := readAPIError(resp, r)
			if attempt >= retries || !retryable(resp.StatusCode) {
				return nil, apiErr
			}
			wait = retryAfter(resp.Header.Get("Retry-After"))
		}
		if wait == 0 {
			wait = jitter(backoff)
			backoff = min(backoff*2, c.maxBackoff)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
		case <-t.C:
		}
	}
}

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, 30*time.Second)
	}
	return 0
}

func readAPIError(resp *http.Response, r *request) *APIError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{StatusCode: resp.StatusCode, Method: r.method, Path: r.path}
	var m map[string]any
	if json.Unmarshal(b, &m) == nil {
		e.Body = m
		if d, ok := m["detail"].(string); ok {
			e.Detail = d
		} else if d, ok := m["detail"]; ok {
			db, _ := json.Marshal(d)
			e.Detail = string(db)
		}
		e.Code, _ = m["code"].(string)
	} else {
		e.Detail = strings.TrimSpace(string(b))
	}
	if e.Detail == "" {
		e.Detail = http.StatusText(resp.StatusCode)
	}
	return e
}

// call sends a JSON request (in may be nil) and decodes a JSON response
// into out (may be nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	r := &request{method: method, path: path, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		r.body = b
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// jitter returns a random duration in [0, d] ("full jitter").
func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d) + 1)) }
