package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/server"
)

// Routes are the paths the Handler serves (POST only).
var Routes = []string{"/v1/traces", "/api/v1/otlp/v1/traces", "/v1/logs", "/api/v1/otlp/v1/logs"}

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 16 << 20
	DefaultQueueSize    = 16384
	DefaultRetryAfter   = time.Second
	DefaultLogWait      = 30 * time.Second
	DefaultCacheSize    = 10000
	// DefaultSpanRetention is Config.SpanRetention's default.
	DefaultSpanRetention = 7 * 24 * time.Hour
)

// Config tunes a Handler. Zero fields take the defaults.
type Config struct {
	// DefaultDataset is the dataset of spans with no Vigil-Dataset
	// header, vigil.dataset or service.name ("": "otel").
	DefaultDataset string
	// MaxBodyBytes bounds a request body after decompression (413 above).
	MaxBodyBytes int64
	// QueueSize bounds the spans and log records admitted and not yet
	// written; a request that does not fit gets 429 with Retry-After.
	// It bounds the memory ingest holds (besides the bodies being read,
	// which the server's admission control bounds).
	QueueSize int
	// Workers is how many requests write at once (0: 4 × GOMAXPROCS:
	// writes mostly wait for the store); the others wait in the queue.
	Workers int
	// RetryAfter is the Retry-After of a 429 (rounded up to seconds).
	RetryAfter time.Duration
	// LogWait is how long a log record waits for its span before it is
	// mapped on its own.
	LogWait time.Duration
	// CacheSize is how many conversations' de-duplication states are
	// kept in memory, and 8 times as many span ids (the store remembers
	// all of them; memory spares it a query).
	CacheSize int
	// SpanRetention is how long the store remembers the span ids it has
	// stored, for retries reaching another process or a restarted one
	// (0: 7 days).
	SpanRetention time.Duration
}

// Handler serves OTLP/HTTP traces and logs. Close stops it.
type Handler struct {
	srv *server.Server
	cfg Config
	w   *writer
	log *slog.Logger

	qmu   sync.Mutex
	used  int
	slots chan struct{}

	lmu     sync.Mutex
	pending map[string]*pendingLogs // owner \x00 span id
	stop    chan struct{}
	done    chan struct{}
}

// New returns a Handler writing through srv's Ingester, authenticating
// with srv's keys. Mount it with Mount.
func New(srv *server.Server, cfg Config) *Handler {
	cfg.DefaultDataset = cmpOr(cfg.DefaultDataset, "otel")
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.LogWait <= 0 {
		cfg.LogWait = DefaultLogWait
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.SpanRetention <= 0 {
		cfg.SpanRetention = DefaultSpanRetention
	}
	h := &Handler{
		srv: srv, cfg: cfg, w: newWriter(srv.Store(), srv.Ingester(), cfg.DefaultDataset, cfg.CacheSize), log: srv.Logger(),
		slots: make(chan struct{}, cfg.Workers), pending: map[string]*pendingLogs{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	h.w.log = h.log
	go h.sweep()
	return h
}

// Mount mounts h on srv at every path of Routes.
func Mount(srv *server.Server, h *Handler) {
	for _, p := range Routes {
		srv.Mount("POST "+p, h)
	}
}

// Close stops the background mapping of log records whose span never
// came, mapping those still waiting first.
func (h *Handler) Close() {
	select {
	case <-h.stop:
		return
	default:
	}
	close(h.stop)
	<-h.done
}

// ServeHTTP serves one export request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	enc, err := encodingOf(r.Header.Get("Content-Type"))
	if err != nil {
		h.fail(w, JSON, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	p, err := h.authenticate(r)
	if errors.Is(err, errAuthUnavailable) {
		h.log.Error("otlp: authenticate", "err", err)
		h.unavailable(w, enc, "cannot check the API key now; retry")
		return
	}
	if err != nil {
		h.fail(w, enc, http.StatusUnauthorized, err.Error())
		return
	}
	body, err := readBody(r.Body, r.Header.Get("Content-Encoding"), h.cfg.MaxBodyBytes)
	switch {
	case errors.Is(err, ErrTooLarge):
		h.fail(w, enc, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", h.cfg.MaxBodyBytes))
		return
	case errors.Is(err, ErrUnsupportedMediaType):
		h.fail(w, enc, http.StatusUnsupportedMediaType, err.Error())
		return
	case err != nil:
		h.fail(w, enc, http.StatusBadRequest, err.Error())
		return
	}
	dsHeader := r.Header.Get("Vigil-Dataset")
	logs := r.URL.Path == "/v1/logs" || r.URL.Path == "/api/v1/otlp/v1/logs"
	if logs {
		h.serveLogs(w, r.Context(), enc, p, dsHeader, body)
		return
	}
	req, err := decodeTraces(body, enc)
	if err != nil {
		h.fail(w, enc, http.StatusBadRequest, err.Error())
		return
	}
	body = nil
	spans := spansOf(req)
	req = nil
	release, ok := h.admit(r.Context(), len(spans))
	if !ok {
		h.busy(w, enc)
		return
	}
	defer release()
	h.attachLogs(p, spans)
	res, err := h.w.write(r.Context(), p, dsHeader, spans)
	if err != nil {
		h.log.Error("otlp: write spans", "err", err)
		h.unavailable(w, enc, "cannot store the spans now; retry")
		return
	}
	h.reply(w, enc, encodeResponse(enc, "rejectedSpans", res.rejected, res.message()))
}

// errAuthUnavailable is the error of a key that could not be checked
// (the store failed): 503, not 401.
var errAuthUnavailable = errors.New("authentication unavailable")

// authenticate takes the Vigil key from "Authorization: Bearer", or the
// Vigil-Api-Key or X-Api-Key header (what OTEL_EXPORTER_OTLP_HEADERS
// sets), and requires ingest scope.
func (h *Handler) authenticate(r *http.Request) (principal, error) {
	c, err := h.srv.Authenticate(r)
	if err == nil && c == nil {
		for _, name := range []string{"Vigil-Api-Key", "X-Api-Key"} {
			if k := r.Header.Get(name); k != "" {
				c, err = h.srv.AuthenticateKey(r.Context(), k)
				break
			}
		}
	}
	switch {
	case err != nil && !errors.Is(err, server.ErrInvalidKey):
		return principal{}, fmt.Errorf("%w: %v", errAuthUnavailable, err)
	case err != nil:
		return principal{}, errors.New("invalid API key")
	case c == nil:
		return principal{}, errors.New("missing API key: send it as Authorization: Bearer <key> in the exporter's headers")
	case !c.CanIngest():
		return principal{}, errors.New("the API key's scope does not allow ingest")
	}
	return principal{ownerID: c.User.ID, userID: c.User.ID, keyID: c.Key.ID}, nil
}

// admit takes n places in the write queue and then a worker slot; false
// when the queue is full (or the request is cancelled while waiting).
func (h *Handler) admit(ctx context.Context, n int) (release func(), ok bool) {
	h.qmu.Lock()
	if h.used > 0 && h.used+n > h.cfg.QueueSize {
		h.qmu.Unlock()
		return nil, false
	}
	h.used += n
	h.qmu.Unlock()
	give := func() {
		h.qmu.Lock()
		h.used -= n
		h.qmu.Unlock()
	}
	select {
	case h.slots <- struct{}{}:
	case <-ctx.Done():
		give()
		return nil, false
	}
	return func() { <-h.slots; give() }, true
}

// unavailable answers 503 with Retry-After: the store failed, and OTLP
// exporters retry a 503.
func (h *Handler) unavailable(w http.ResponseWriter, enc Encoding, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((h.cfg.RetryAfter+time.Second-1)/time.Second)))
	h.fail(w, enc, http.StatusServiceUnavailable, msg)
}

func (h *Handler) busy(w http.ResponseWriter, enc Encoding) {
	secs := int((h.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	h.fail(w, enc, http.StatusTooManyRequests, "the OTLP write queue is full; retry after "+strconv.Itoa(secs)+"s")
}

// reply writes an encoded Export…ServiceResponse (encodeResponse).
func (h *Handler) reply(w http.ResponseWriter, enc Encoding, b []byte) {
	if enc == JSON {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// fail writes an error as the OTLP Status message in the encoding.
func (h *Handler) fail(w http.ResponseWriter, enc Encoding, status int, msg string) {
	st := &spb.Status{Code: grpcCode(status), Message: msg}
	var b []byte
	if enc == JSON {
		w.Header().Set("Content-Type", "application/json")
		b, _ = protojson.Marshal(st)
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = proto.Marshal(st)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// grpcCode is the google.rpc.Code of an HTTP status.
func grpcCode(status int) int32 {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return 3 // INVALID_ARGUMENT
	case http.StatusUnauthorized:
		return 16 // UNAUTHENTICATED
	case http.StatusTooManyRequests:
		return 8 // RESOURCE_EXHAUSTED
	case http.StatusServiceUnavailable:
		return 14 // UNAVAILABLE
	}
	return 2 // UNKNOWN
}

// serveLogs serves a logs export (spec §11 item 9).
func (h *Handler) serveLogs(w http.ResponseWriter, ctx context.Context, enc Encoding, p principal, dsHeader string, body []byte) {
	req, err := decodeLogs(body, enc)
	if err != nil {
		h.fail(w, enc, http.StatusBadRequest, err.Error())
		return
	}
	recs, _ := logsOf(req)
	release, ok := h.admit(ctx, len(recs))
	if !ok {
		h.busy(w, enc)
		return
	}
	defer release()
	res, err := h.takeLogs(ctx, p, dsHeader, recs)
	if err != nil {
		h.log.Error("otlp: write log records", "err", err)
		h.unavailable(w, enc, "cannot store the log records now; retry")
		return
	}
	h.reply(w, enc, encodeResponse(enc, "rejectedLogRecords", res.rejected, res.message()))
}
