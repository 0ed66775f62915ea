package ask

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/search"
	"github.com/vigilhq/vigil/server"
)

// Limits on a question.
const (
	// MaxQuestionBytes is the longest question accepted.
	MaxQuestionBytes = 4096
	// MaxEvidence is the most evidence items an answer lists.
	MaxEvidence = 50
)

// Config configures a Service. The zero value answers with evidence only.
type Config struct {
	// Model, BaseURL and APIKey are the OpenAI-compatible chat endpoint
	// (ask.model, ask.base_url, ask.api_key). An empty BaseURL means no
	// model: every answer is the evidence itself.
	Model   string
	BaseURL string
	APIKey  string
	// MaxSteps bounds the model's turns (each one request, with or
	// without tool calls; default 8). MaxTokens bounds the prompt plus
	// completion tokens the endpoint reports over all steps (default
	// 60000). Timeout bounds the whole answer (default 60s).
	MaxSteps  int
	MaxTokens int
	Timeout   time.Duration
	// HTTPClient sends the model requests (nil: a client without its own
	// timeout; Timeout applies).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now); time words and since resolve
	// against it.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxSteps <= 0 {
		c.MaxSteps = 8
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 60000
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service answers questions over the runs of one server's store, for
// each caller only from what that caller may read. It implements
// server.Asker and is safe for concurrent use.
type Service struct {
	srv   *server.Server
	cfg   Config
	model *chatClient // nil: no model configured
}

var _ server.Asker = (*Service)(nil)

// New returns the Service of srv. A BaseURL that is not an http(s) URL
// is an error naming ask.base_url; no request is made.
func New(srv *server.Server, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	s := &Service{srv: srv, cfg: cfg}
	if cfg.BaseURL != "" {
		m, err := newChatClient(cfg)
		if err != nil {
			return nil, err
		}
		s.model = m
	}
	return s, nil
}

// HasModel reports whether a model is configured.
func (s *Service) HasModel() bool { return s.model != nil }

// badRequest is the API's 400 invalid_request.
func badRequest(format string, args ...any) error {
	return &server.Error{Status: http.StatusBadRequest, Code: server.CodeInvalidRequest, Detail: fmt.Sprintf(format, args...)}
}

// Ask answers req for caller c. Outcomes:
//   - bad input (an empty, too long or non-UTF-8 question, a bad since,
//     a model asked for when none is configured) is a 400 *server.Error;
//   - a dataset or trace c may not read is a 404 *server.Error;
//   - without a model (or with model "none") the answer is the evidence;
//   - with one, the model's answer with its citations checked, the
//     evidence and the tool calls; the exchange is recorded as a trace of
//     c's vigil-ask dataset (authenticated callers only);
//   - a model endpoint that fails is a 502 *server.Error.
func (s *Service) Ask(ctx context.Context, c *server.Caller, req server.AskRequest) (*server.AskAnswer, error) {
	q := strings.TrimSpace(req.Question)
	switch {
	case q == "":
		return nil, badRequest("question must not be empty")
	case len(req.Question) > MaxQuestionBytes:
		return nil, badRequest("question is %d bytes; at most %d are accepted", len(req.Question), MaxQuestionBytes)
	case !utf8.ValidString(req.Question):
		return nil, badRequest("question is not valid UTF-8")
	}
	if c != nil && !c.CanRead() {
		return nil, &server.Error{Status: http.StatusForbidden, Code: server.CodeForbidden,
			Detail: "asking needs a key with read access (this key's scope is " + c.Scope() + ")"}
	}
	useModel := s.model != nil
	switch req.Model {
	case "":
	case "none":
		useModel = false
	default:
		if s.model == nil {
			return nil, badRequest("model %q asked for, but no model is configured (ask.base_url)", req.Model)
		}
	}
	sc, err := s.scope(ctx, c, req)
	if err != nil {
		return nil, err
	}
	ans, err := s.evidence(ctx, c, sc, q)
	if err != nil {
		return nil, err
	}
	if !useModel {
		return ans, nil
	}
	return s.answer(ctx, c, sc, req, ans)
}

// scope is where a question looks: the caller's readable traces,
// narrowed by the request.
type scope struct {
	datasetID string // "" = every readable dataset
	traceID   string
	since     string // an after: filter value, "" = none
	now       time.Time
}

// scope checks the request's dataset, trace and since.
func (s *Service) scope(ctx context.Context, c *server.Caller, req server.AskRequest) (*scope, error) {
	sc := &scope{now: s.cfg.Now().UTC()}
	if req.Dataset != "" {
		d, err := s.srv.DatasetFor(ctx, c, req.Dataset)
		if err != nil {
			return nil, err
		}
		sc.datasetID = d.ID
	}
	if req.TraceID != "" {
		t, err := s.srv.TraceFor(ctx, c, req.TraceID, false)
		if err != nil {
			return nil, err
		}
		if sc.datasetID != "" && t.DatasetID != sc.datasetID {
			return nil, badRequest("trace_id %s is not in dataset %s", req.TraceID, req.Dataset)
		}
		sc.traceID = t.ID
	}
	if req.Since != "" {
		v, err := sinceFilter(req.Since)
		if err != nil {
			return nil, err
		}
		sc.since = v
	}
	return sc, nil
}

// sinceFilter turns a since value into an after: filter value: "7d",
// "12h", "30m", "2w" or "90s" back from now, or a time the grammar reads
// (RFC 3339, YYYY-MM-DD).
func sinceFilter(v string) (string, error) {
	v = strings.TrimSpace(v)
	if n := len(v); n >= 2 && strings.ContainsRune("smhdw", rune(v[n-1])) && isDigits(v[:n-1]) && len(v) <= 10 {
		return "-" + v, nil
	}
	if _, err := search.Parse("after:" + quoteValue(v)); err == nil {
		return v, nil
	}
	return "", badRequest("since %q: want a duration back from now (7d, 12h, 30m, 2w) or a time (RFC 3339 or YYYY-MM-DD)", v)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
