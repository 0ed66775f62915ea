// Package detect implements the detectors that the policy language calls
// (policy-language §13.3) as plain functions over strings, and registers
// them in the engine's table (package policy/builtin; see register.go).
// Offsets in results are code points, the unit of the engine's marks.
//
// Goals: offline, deterministic and fast detectors with documented
// coverage; one small interface per capability that needs a model, served
// by default by an OpenAI-compatible HTTP endpoint; results cached so a
// Monitor that re-checks a growing trace does not scan or ask twice.
// Non-goals: being a complete secret or PII scanner, a full Python parser,
// or contacting any network service at load time.
//
// # Detectors
//
// Secrets (secrets): the reference's four types first — GITHUB_TOKEN,
// AWS_ACCESS_KEY, AZURE_STORAGE_KEY, SLACK_TOKEN, with the reference's
// patterns — then the 217 content rules of gitleaks' default
// configuration (v8.30.1, 222 rules, rules/gitleaks.toml compiled into
// the Go table secrets_table.go; MIT licence in rules/LICENSE.gitleaks),
// named by rule id
// (gitlab-pat → GITLAB_PAT), with gitleaks' entropy thresholds,
// allowlists, stopwords and "gitleaks:allow" comments. One
// Aho-Corasick pass over the text finds every rule keyword; only rules
// whose keywords occur run, only in windows around the occurrences
// (window.go), and for gitleaks' "keyword = secret" rules only where the
// rest of the rule, anchored at the keyword, can match. A rule's
// regexes compile the first time its keywords occur in a text, so a
// process pays only for the rules its texts trigger. A differential
// fuzz test checks this against whole-text search, and gitleaks' own
// literal examples are a regression test (89 true positives found, 291
// false positives not reported). Misses: the 5 gitleaks rules restricted to file paths
// (they need a file name; listed in SecretScanner.Skipped); secrets split
// across strings; case-folded keywords spelled with non-ASCII look-alikes
// (the Kelvin sign for "k").
//
// PII (pii): offline recognisers, each validated — EMAIL_ADDRESS (RFC-ish
// local part, dotted domain, alphabetic TLD), PHONE_NUMBER (international
// "+CC …" with 8–15 digits, North American (415) 555-2671 / 415.555.2671 /
// 415-555-2671, national numbers written in groups starting with 0),
// CREDIT_CARD (13–19 digits, consistent separators, issuer prefix, Luhn),
// IBAN_CODE (country length table, mod-97), IP_ADDRESS (IPv4, IPv6 with
// at least three groups or two and a digit), US_SSN (dashed, spaced or
// dotted, SSA rules), URL (http://, https://, www.), CRYPTO (Bitcoin
// base58check and bech32/bech32m). Overlaps resolve by type (e-mail over
// URL over card …). Misses: bare domains as URLs, phone numbers written
// without separators or country code. PERSON and LOCATION (names.go,
// OfflineNames): runs of capitalised words looked up in an embedded
// gazetteer (detect/internal/gazetteer: given names and surnames of 70+
// locales, countries in 78 languages, GeoNames cities of 1,000+
// inhabitants, first-level regions), decided by context: titles,
// greetings, sign-offs, "my name is", name and location keys in JSON or
// forms, prepositions of place, ", Country" after a city, street-address
// shapes; against: ordinary English words (SCOWL), sentence-initial
// capitals, months and weekdays, product names, code identifiers,
// organisation suffixes, all-capital words. On the labelled corpus in
// testdata/pii-corpus: text-level F1 0.99 (PERSON) and 0.98 (LOCATION),
// against 0.88 and 0.92 for the compromise NLP library. Misses: names in
// lower case, single unknown names without a cue, inflected forms
// (Russian "Москву"), names inside CJK text without spaces, small towns
// without a place cue, exonyms GeoNames lacks ("Bangalore"). An
// installed EntityRecognizer (a model) replaces it. Text made mostly of
// digits and single spaces or dots (number tables) scans at a few MB/s,
// against hundreds of MB/s for prose and code.
//
// Unicode (unicode): the two-letter general category of each code point
// from Go's tables (Unicode 15.0, as Python 3.12's unicodedata), Cn for
// unassigned; never Cs. Compared over all code points with Python 3.11
// (Unicode 14.0), the only differences are the 4,489 characters Unicode
// 15.0 assigned.
//
// Copyright (copyright): "COPYRIGHT" for "Copyright (C)" / "Copyright ©",
// plus seven licences recognised by their headers (see Copyright; the
// reference compares whole licence texts, so a licence body without
// header may be missed).
//
// Python (python_code): a Python 3 tokenizer and statement scanner of
// this package's own. It reports imports, built-in names used, called
// names and dotted names, and the syntax errors PythonCode lists
// (tokenization, indentation, block structure, adjacent operands,
// dangling operators). Checked against CPython 3.11 on its standard
// library: same imports and no false syntax error on 668 modules; 110 of
// 126 syntax errors caught among 600 one-character deletions. It does not
// parse expressions fully, so some invalid code (`f(,)`) passes; calls of
// computed callees (`f()()`, `a[0]()`) are not listed. IPythonPreprocess
// blanks magics, shell escapes and help queries for ipython_mode.
//
// HTML (html_code, links): golang.org/x/net/html tokenisation (any input
// parses): alt texts of <img>, hrefs of <a>, then the URLs of Links.
//
// Fuzzy matching (fuzzy_contains): Levenshtein distance on code points
// with Ukkonen's cut-off (about O(len(text)·k), k ≤ 10), leftmost start,
// then smallest distance, then shortest substring; checked against brute
// force by a fuzz test. The semantic fallback goes to the Completer.
//
// Prompt injection (prompt_injection): an offline heuristic scoring
// instruction-override phrases in 13 languages, jailbreak personas,
// system-prompt extraction, chat-template role markers, instructions
// hidden in HTML comments or addressed to the AI, exfiltration requests
// and markdown-image beacons, invisible tag characters (whose hidden text
// is decoded and scored), zero-width and bidi controls, and base64
// payloads that decode to an injection. At the default threshold 0.9 it
// flags 1 of 128 benign texts and 72 of 76 attacks of the development
// corpora it was tuned on (testdata/injection/benign.txt, attacks.txt),
// and 0 of 51 benign texts and 14 of 20 attacks of held-out corpora
// written afterwards and never used for tuning (*-heldout.txt): expect
// roughly 70 % detection on unseen attacks. The test asserts FPR ≤ 2 % on
// both, detection ≥ 90 % (development) and ≥ 65 % (held-out).
// It misses paraphrased or novel attacks, and flags texts that quote an
// attack. With a model argument an InjectionClassifier decides instead.
//
// # Model-backed capabilities
//
// Moderator (moderated, <MODERATED>), Embedder (is_similar,
// embedding_similarity), Completer (llm, llm_confirm, the fuzzy_contains
// fallback), EntityRecognizer (PERSON, LOCATION and entity types PII
// does not know; without one, OfflineNames answers PERSON and LOCATION)
// and InjectionClassifier
// are installed with SetProviders or Configure. HTTPProvider implements
// all of them on /v1/moderations, /v1/embeddings and /v1/chat/completions
// of an OpenAI-compatible server configured by detectors.base_url,
// detectors.api_key and detectors.timeout (environment
// VIGIL_DETECTORS_BASE_URL, VIGIL_DETECTORS_API_KEY,
// VIGIL_DETECTORS_TIMEOUT), with per-attempt timeouts, retries with
// exponential backoff on network errors, 429 and 5xx, and a response
// cache. Without a provider, a policy using one of them fails to load
// with "detector NAME has no provider (configure detectors.base_url)";
// a need that shows only at run time is the rule failure
// detector_unavailable.
//
// # Caching
//
// ResultCache keeps the offline results for texts of 256 bytes or more,
// keyed by detector, arguments and the SHA-256 of the text; model answers
// are cached by HTTPProvider per request. Both are bounded LRU caches
// (Cache), shared by every policy of the process, so results survive
// across Monitor checks. Results are code-point offsets, so a hit
// reproduces its marks at the current argument's location.
package detect
