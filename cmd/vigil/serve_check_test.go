package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// postCheck posts body to path on url with key ("" for none) and returns
// the status and the response text.
func postCheck(t *testing.T, url, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeGuardrailsConfig: vigil serve wires guardrails.check_requires_key
// and guardrails.cache_size (file, then VIGIL_GUARDRAILS_* over it) and
// the detectors section into the check API, as vigil check does.
func TestServeGuardrailsConfig(t *testing.T) {
	serveEnv(t)
	for _, k := range []string{"VIGIL_GUARDRAILS_CHECK_REQUIRES_KEY", "VIGIL_GUARDRAILS_CACHE_SIZE", "VIGIL_DETECTORS_BASE_URL", "VIGIL_DETECTORS_API_KEY", "VIGIL_DETECTORS_TIMEOUT"} {
		t.Setenv(k, "")
	}
	const check = `{"messages": [{"role": "user", "content": "hi"}], "policy": "raise \"x\" if:\n    (m: Message)\n", "parameters": {}}`
	const moderated = `{"policy": "from invariant.detectors import moderated\n\nraise \"harmful\" if:\n    (m: Message)\n    moderated(m.content)\n"}`

	// Defaults: the check API needs a key; model-backed detectors have no
	// provider, so a rule using one fails to load naming the setting.
	p := startInProcess(t, "--data-dir", filepath.Join(t.TempDir(), "data"))
	if st, body := postCheck(t, p.url, "/api/v1/policy/check", "", check); st != 401 {
		t.Errorf("anonymous check by default: %d %s, want 401", st, body)
	}
	if st, body := postCheck(t, p.url, "/api/v1/policy/check", testKey, check); st != 200 || !strings.Contains(body, `"errors":[{`) {
		t.Errorf("check with the key: %d %s", st, body)
	}
	if st, body := postCheck(t, p.url, "/api/v1/policy/load", testKey, moderated); st != 400 || !strings.Contains(body, "detectors.base_url") {
		t.Errorf("moderated without a provider: %d %s, want 400 naming detectors.base_url", st, body)
	}
	p.stop(t)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "vigil.yaml")
	os.WriteFile(cfg, []byte(`data_dir: `+filepath.Join(dir, "data")+`
guardrails: {cache_size: 2, check_requires_key: false}
detectors: {base_url: "http://127.0.0.1:9/v1"}
`), 0o600)
	p = startInProcess(t, "--config", cfg)
	if st, body := postCheck(t, p.url, "/api/v1/policy/check", "", check); st != 200 {
		t.Errorf("anonymous check with check_requires_key=false: %d %s, want 200", st, body)
	}
	if st, body := postCheck(t, p.url, "/api/v1/policy/load", "", moderated); st != 200 {
		t.Errorf("moderated with detectors.base_url: %d %s, want 200 (providers are not contacted at load)", st, body)
	}
	if strings.Contains(p.stderr.String(), "guardrails") {
		t.Errorf("guardrails reported as not used:\n%s", p.stderr.String())
	}
	p.stop(t)

	// The environment wins over the file.
	t.Setenv("VIGIL_GUARDRAILS_CHECK_REQUIRES_KEY", "true")
	p = startInProcess(t, "--config", cfg)
	if st, body := postCheck(t, p.url, "/api/v1/policy/check", "", check); st != 401 {
		t.Errorf("anonymous check with VIGIL_GUARDRAILS_CHECK_REQUIRES_KEY=true: %d %s, want 401", st, body)
	}
	p.stop(t)
	t.Setenv("VIGIL_GUARDRAILS_CHECK_REQUIRES_KEY", "")

	t.Setenv("VIGIL_GUARDRAILS_CACHE_SIZE", "-1")
	if code, _, errOut := runVigil(t, "", "serve", "--config", cfg, "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errOut, "VIGIL_GUARDRAILS_CACHE_SIZE") {
		t.Errorf("negative cache size in the environment: exit %d, %s", code, errOut)
	}
	t.Setenv("VIGIL_GUARDRAILS_CACHE_SIZE", "")
	os.WriteFile(cfg, []byte("guardrails: {cache_size: -3}\n"), 0o600)
	if code, _, errOut := runVigil(t, "", "serve", "--config", cfg, "--listen", "127.0.0.1:0"); code == 0 || !strings.Contains(errOut, "guardrails.cache_size is -3") {
		t.Errorf("negative cache size in the file: exit %d, %s", code, errOut)
	}
}
