package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/ask"
	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/server"
)

// vigil ask: a question over the runs on a server (POST /api/v1/ask), and
// the ask section of the configuration, which vigil serve reads to give
// the endpoint a model.

func init() {
	register(command{name: "ask", summary: "ask a question over the runs on a server; every answer cited to its events", run: runAsk})
}

// askConfig is the ask section of the configuration file: the
// OpenAI-compatible endpoint that answers questions (none: evidence
// only) and the budgets of one answer.
type askConfig struct {
	Model     string   `yaml:"model"`
	BaseURL   string   `yaml:"base_url"`
	APIKey    string   `yaml:"api_key"`
	MaxSteps  int      `yaml:"max_steps"`
	MaxTokens int      `yaml:"max_tokens"`
	Timeout   duration `yaml:"timeout"`
}

// askFlags registers vigil serve's --ask-* flags, with the environment
// (VIGIL_ASK_*) over the file as their defaults, and returns a function
// giving the resulting configuration after parsing.
func askFlags(fs *flag.FlagSet, fc *fileConfig) func() ask.Config {
	a := fc.Ask
	model := fs.String("ask-model", envOr("VIGIL_ASK_MODEL", a.Model), "model that answers POST /api/v1/ask (env VIGIL_ASK_MODEL; config ask.model; default gpt-4o-mini)")
	baseURL := fs.String("ask-base-url", envOr("VIGIL_ASK_BASE_URL", a.BaseURL), "OpenAI-compatible endpoint of the ask model (env VIGIL_ASK_BASE_URL; config ask.base_url; empty: answers are the evidence only)")
	apiKey := fs.String("ask-api-key", envOr("VIGIL_ASK_API_KEY", a.APIKey), "API key of --ask-base-url (env VIGIL_ASK_API_KEY; config ask.api_key)")
	steps := fs.Int("ask-max-steps", cmp.Or(envInt("VIGIL_ASK_MAX_STEPS"), a.MaxSteps), "model turns one answer may take; 0 = 8 (env VIGIL_ASK_MAX_STEPS; config ask.max_steps)")
	tokens := fs.Int("ask-max-tokens", cmp.Or(envInt("VIGIL_ASK_MAX_TOKENS"), a.MaxTokens), "prompt plus completion tokens one answer may use; 0 = 60000 (env VIGIL_ASK_MAX_TOKENS; config ask.max_tokens)")
	timeout := fs.Duration("ask-timeout", cmp.Or(envDuration("VIGIL_ASK_TIMEOUT"), time.Duration(a.Timeout)), "wall time of one answer; 0 = 60s (env VIGIL_ASK_TIMEOUT; config ask.timeout)")
	return func() ask.Config {
		return ask.Config{Model: *model, BaseURL: *baseURL, APIKey: *apiKey, MaxSteps: *steps, MaxTokens: *tokens, Timeout: *timeout}
	}
}

// mountAsk serves POST /api/v1/ask on srv with cfg and returns the
// service, which the web UI's ask box uses too.
func mountAsk(srv *server.Server, cfg ask.Config) (*ask.Service, error) {
	svc, err := ask.New(srv, cfg)
	if err != nil {
		return nil, fmt.Errorf("ask: %w", err)
	}
	srv.Mount("POST /api/v1/ask", ask.Handler(srv, svc))
	return svc, nil
}

func runAsk(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("ask", "ask QUESTION [--dataset D] [--trace T] [--since 7d] [--model M|none] [--format text|json] [--url URL] [--api-key KEY]",
		`Ask a question over the runs on a Vigil server, e.g.
  vigil ask "which runs sent e-mail outside example.com this week, and did anyone approve them?"

The question may use the search-box language ("quoted phrases", tool:NAME,
meta:KEY=VALUE, after:-1d, ...); plain words work too: tool names, roles
(user, assistant), time words (today, yesterday, this week, last 3 days),
errors, rule violations (findings) and approvals are recognised.

Without a model on the server (ask.base_url) the answer is the evidence:
quoted text at trace addresses, each with why it was chosen (a search
match, a tool call, a finding, an annotation), best first. With one, the
model answers through read-only tools, and every citation it gives is
checked against the store: citations that do not match are dropped and
counted, and an answer left without a valid one is withheld. You only
ever see runs your key may read.

Exit status: 0 when there is an answer or evidence, 1 when there is
neither (a withheld answer with no evidence), 2 on bad input, usage or
connection errors.`, stderr)
	dataset := fs.String("dataset", "", "restrict to a dataset: NAME, USER/NAME or id")
	traceID := fs.String("trace", "", "restrict to one trace (its id)")
	since := fs.String("since", "", "only runs created since: 7d, 12h, 30m, 2w, an RFC 3339 time or YYYY-MM-DD")
	model := fs.String("model", "", "model to answer with (default: the server's; none: the evidence only)")
	format := fs.String("format", "text", "output format: text or json")
	limit := fs.Int("limit", 10, "evidence items to print (text format)")
	var sf serverFlags
	sf.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return exitCode(2, "ask: want exactly one QUESTION argument (quote it)")
	}
	if *format != "text" && *format != "json" {
		return exitCode(2, fmt.Sprintf("ask: --format must be text or json, got %q", *format))
	}
	c, err := sf.client()
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	ans, err := c.Ask(ctx, client.AskRequest{Question: pos[0], Dataset: *dataset, TraceID: *traceID, Since: *since, Model: *model})
	var ae *client.APIError
	if errors.As(err, &ae) && ae.StatusCode/100 == 4 {
		return exitCode(2, "ask: "+ae.Detail)
	}
	if err != nil {
		return fmt.Errorf("ask: %w", err)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(ans); err != nil {
			return err
		}
	} else {
		printAnswer(stdout, ans, *limit)
	}
	if ans.Answer == "" && len(ans.Evidence) == 0 {
		return exitCode(1, "")
	}
	return nil
}

// printAnswer writes an answer as text.
func printAnswer(w io.Writer, a *client.AskAnswer, limit int) {
	where := func(e client.AskEvidence) string {
		if e.Dataset == "" {
			return "snippet"
		}
		return e.DatasetUser + "/" + e.Dataset + "#" + strconv.FormatInt(e.TraceIndex, 10)
	}
	if a.Mode == "model" {
		if a.Answer != "" {
			fmt.Fprintf(w, "Answer: %s\n", a.Answer)
			for i, c := range a.Citations {
				fmt.Fprintf(w, "  [%d] %s %s %q\n", i+1, c.TraceID, c.Address, clip(c.Quote, 120))
			}
		}
		if a.Note != "" {
			fmt.Fprintln(w, a.Note)
		}
		if a.UnsupportedClaims > 0 {
			fmt.Fprintf(w, "unsupported_claims: %d\n", a.UnsupportedClaims)
			for _, d := range a.Dropped {
				fmt.Fprintf(w, "  dropped %s %s %q: %s\n", d.TraceID, d.Address, clip(d.Quote, 60), d.Reason)
			}
		}
		if len(a.ToolCalls) > 0 {
			var calls []string
			for _, t := range a.ToolCalls {
				s := fmt.Sprintf("%s(%s)→%d", t.Name, clip(string(t.Arguments), 60), t.Results)
				if t.Error != "" {
					s = fmt.Sprintf("%s(%s)→error: %s", t.Name, clip(string(t.Arguments), 60), t.Error)
				}
				calls = append(calls, s)
			}
			fmt.Fprintf(w, "Tool calls: %s\n", strings.Join(calls, "; "))
		}
		if u := a.Usage; u != nil {
			fmt.Fprintf(w, "Usage: %d/%d steps, %d tokens of %d, %d ms\n", u.Steps, u.MaxSteps, u.PromptTokens+u.CompletionTokens, u.MaxTokens, u.ElapsedMS)
		}
		if a.ExchangeTraceID != "" {
			fmt.Fprintf(w, "Recorded as trace %s (dataset %s)\n", a.ExchangeTraceID, ask.AskDataset)
		}
		fmt.Fprintln(w)
	}
	if len(a.Evidence) == 0 {
		fmt.Fprintf(w, "No evidence (query: %s)\n", a.Query)
		if a.Mode != "model" && a.Note != "" {
			fmt.Fprintln(w, a.Note)
		}
		return
	}
	fmt.Fprintf(w, "Evidence (query: %s):\n", a.Query)
	for i, e := range a.Evidence {
		if i >= limit {
			fmt.Fprintf(w, "  … %d more (--limit, --format json)\n", len(a.Evidence)-limit)
			break
		}
		fmt.Fprintf(w, "%2d. %s  %s  %s\n    %q\n    %s\n", i+1, where(e), e.TraceID, e.Address, clip(e.Quote, 160), clip(e.Why, 160))
	}
}

// clip shortens s to n code points.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
