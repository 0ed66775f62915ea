package web

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Folding and paging limits of the trace viewer (web-ui.md §2).
const (
	foldChars     = 10000 // strings longer than this show "… N more characters"
	eventsPerPage = 500
)

// apiTrace is the API's trace object (explorer-api §2.4).
type apiTrace struct {
	ID             string            `json:"id"`
	Index          int64             `json:"index"`
	Dataset        *string           `json:"dataset"`
	DatasetName    *string           `json:"dataset_name"`
	UserID         string            `json:"user_id"`
	User           string            `json:"user"`
	Name           *string           `json:"name"`
	HierarchyPath  []string          `json:"hierarchy_path"`
	Messages       []json.RawMessage `json:"messages"`
	ExtraMetadata  json.RawMessage   `json:"extra_metadata"`
	TimeCreated    string            `json:"time_created"`
	TimeLastPushed string            `json:"time_last_pushed"`
	Annotations    []apiAnnotation   `json:"annotations"`
	SessionKey     *string           `json:"session_key"`
	MessageCount   int               `json:"message_count"`
}

// apiAnnotation is the API's annotation object (explorer-api §2.2).
type apiAnnotation struct {
	ID            string          `json:"id"`
	Content       string          `json:"content"`
	Address       string          `json:"address"`
	ExtraMetadata json.RawMessage `json:"extra_metadata"`
	TimeCreated   string          `json:"time_created"`
	User          *struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
	Resolved bool `json:"resolved"`
}

// annMeta is what the viewer reads of an annotation's extra_metadata.
type annMeta struct {
	Source    string          `json:"source"`
	Severity  json.RawMessage `json:"severity"`
	Status    string          `json:"status"`
	FindingID string          `json:"finding_id"`
	Guardrail *struct {
		Name string `json:"name"`
	} `json:"guardrail"`
}

// severityOf buckets an annotation severity (explorer-api §2.2).
func severityOf(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		switch s {
		case "info", "warn", "critical":
			return s
		}
		return ""
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || len(raw) == 0 {
		return ""
	}
	switch {
	case f < 0.45:
		return "info"
	case f < 0.8:
		return "warn"
	}
	return "critical"
}

// traceView is the viewer page.
type traceView struct {
	Layout
	Ask        *askBox // nil: no asker
	T          *apiTrace
	Name       string
	Created    string
	Source     string
	Proof      string // verified, tampered, unsigned, open
	Metadata   string
	Events     []*eventView
	Nav        []navItem
	Comments   []commentView
	Page       int
	Pages      []pageLink
	Query      string
	CanComment bool
	CanDelete  bool
	Sharing    bool // link sharing is on and the caller may change it
	Shared     bool
	SelfURL    string
	Error      string
}

type pageLink struct {
	N, From, To int
	URL         string
	Current     bool
}

type navItem struct {
	Href     string
	Address  string
	Label    string
	Source   string
	Class    string
	Severity string
	Status   string
}

type commentView struct {
	ID, Author, Content, Time, Address, Href string
	Mine                                     bool
}

type eventView struct {
	N           int
	Addr        string
	Role        string
	Time        string
	MsgID       string
	Parts       []partView
	Calls       []*callView
	ToolCallID  string
	AnswersAddr string // the call this output answers
	Err         *leafView
	Boxes       []*mark
	Nested      bool
}

type partView struct {
	Leaf  *leafView
	Image *imageView
	Other string // a part kept verbatim, pretty JSON
}

type leafView struct {
	Path   string
	Head   []*seg
	Tail   []*seg
	More   int
	Pretty string // pretty JSON instead of Head (no highlights on it)
	Mono   bool
}

type callView struct {
	Addr    string
	ID      string
	Name    *leafView
	Args    []argRow
	RawArgs *leafView
	Outputs []*eventView
	Boxes   []*mark
}

type argRow struct {
	Key   string
	Addr  string
	Value *leafView
	JSON  string
	Boxes []*mark
}

type imageView struct {
	Src    string // "" when the URL is not shown inline (remote)
	Link   string
	Addr   string
	Boxes  []*mark
	BBoxes []bbox
}

type bbox struct {
	X, Y, W, H string
	Class      string
	Address    string
	Title      string
}

// marks indexes a trace's highlights by the path of the value they sit on.
type marks struct {
	ranges map[string][]*mark // range and line selectors
	lines  map[string][]lineMark
	whole  map[string][]*mark // no selector: the whole value
	boxes  map[string][]bbox
}

type lineMark struct {
	line int
	m    *mark
}

func newMarks() *marks {
	return &marks{ranges: map[string][]*mark{}, lines: map[string][]lineMark{}, whole: map[string][]*mark{}, boxes: map[string][]bbox{}}
}

func (ms *marks) add(addr, source, severity, title string) {
	a, ok := parseAddress(addr)
	if !ok {
		return
	}
	m := &mark{Address: addr, Source: source, Class: markClass(source, severity), Title: title}
	switch a.Kind {
	case "range":
		m.Start, m.End = a.Start, a.End
		ms.ranges[a.Path] = append(ms.ranges[a.Path], m)
	case "line":
		ms.lines[a.Path] = append(ms.lines[a.Path], lineMark{a.Start, m})
	case "bbox":
		f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
		ms.boxes[a.Path] = append(ms.boxes[a.Path], bbox{X: f(a.Box[0]), Y: f(a.Box[1]), W: f(a.Box[2] - a.Box[0]), H: f(a.Box[3] - a.Box[1]),
			Class: m.Class, Address: addr, Title: title})
	default:
		ms.whole[a.Path] = append(ms.whole[a.Path], m)
	}
}

// leaf renders the string s at path with its highlights.
func (ms *marks) leaf(path, s string) *leafView {
	runes := []rune(s)
	var list []*mark
	list = append(list, ms.ranges[path]...)
	for _, lm := range ms.lines[path] {
		if a, b, ok := lineRange(runes, lm.line); ok {
			c := *lm.m
			c.Start, c.End = a, b
			list = append(list, &c)
		}
	}
	for _, m := range ms.whole[path] {
		c := *m
		c.Start, c.End = 0, len(runes)
		list = append(list, &c)
	}
	lv := &leafView{Path: path, Mono: looksLikeCode(s)}
	if len(list) == 0 {
		if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) && len(runes) <= foldChars {
			lv.Pretty, lv.Mono = pretty([]byte(t)), true
			return lv
		}
	}
	if len(runes) > foldChars {
		lv.Head = segment(runes[:foldChars], 0, list)
		lv.Tail = segment(runes[foldChars:], foldChars, list)
		lv.More = len(runes) - foldChars
		return lv
	}
	lv.Head = segment(runes, 0, list)
	return lv
}

// looksLikeCode reports text shown in a monospace block.
func looksLikeCode(s string) bool {
	return strings.Contains(s, "```") || strings.Contains(s, "\n    ") || strings.Contains(s, "\n\t") ||
		strings.Contains(s, "def ") && strings.Contains(s, "):") || strings.HasPrefix(s, "Traceback")
}

// buildEvents renders events [from, to) of msgs.
func buildEvents(msgs []json.RawMessage, from, to int, ms *marks) []*eventView {
	evs := make([]*eventView, 0, to-from)
	outputOf := map[string]int{} // tool_call_id -> event index
	for i := from; i < to; i++ {
		if o, ok := object(msgs[i]); ok {
			if id, ok := str(o["tool_call_id"]); ok && id != "" {
				if _, dup := outputOf[id]; !dup {
					outputOf[id] = i
				}
			}
		}
	}
	byIndex := map[int]*eventView{}
	callOf := map[string]string{} // tool_call_id -> call address
	for i := from; i < to; i++ {
		ev := buildEvent(i, msgs[i], ms)
		byIndex[i] = ev
		evs = append(evs, ev)
		for _, c := range ev.Calls {
			if c.ID != "" {
				callOf[c.ID] = c.Addr
			}
		}
	}
	out := evs[:0]
	for _, ev := range evs {
		if ev.ToolCallID != "" {
			ev.AnswersAddr = callOf[ev.ToolCallID]
		}
		for _, c := range ev.Calls {
			if j, ok := outputOf[c.ID]; ok && c.ID != "" && j > ev.N {
				o := byIndex[j]
				o.Nested = true
				c.Outputs = append(c.Outputs, o)
			}
		}
	}
	for _, ev := range evs {
		if !ev.Nested {
			out = append(out, ev)
		}
	}
	return out
}

// rawEvent holds the members of an event the viewer reads.
type rawEvent struct {
	Role       json.RawMessage `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID json.RawMessage `json:"tool_call_id"`
	Timestamp  json.RawMessage `json:"timestamp"`
	MessageID  json.RawMessage `json:"message_id"`
	Error      json.RawMessage `json:"error"`
	Function   json.RawMessage `json:"function"`
}

func buildEvent(i int, raw json.RawMessage, ms *marks) *eventView {
	addr := "messages." + strconv.Itoa(i)
	ev := &eventView{N: i, Addr: addr, Boxes: ms.whole[addr]}
	var o rawEvent
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &o) != nil {
		ev.Parts = []partView{{Other: pretty(raw)}}
		return ev
	}
	ev.Role, _ = str(o.Role)
	ev.Time, _ = str(o.Timestamp)
	ev.MsgID, _ = str(o.MessageID)
	ev.ToolCallID, _ = str(o.ToolCallID)
	if c := o.Content; len(c) > 0 && string(c) != `""` {
		ev.Parts = contentParts(addr+".content", c, ms)
	}
	if e := o.Error; len(e) > 0 {
		if s, ok := str(e); ok {
			ev.Err = ms.leaf(addr+".error", s)
		}
	}
	if tc := o.ToolCalls; len(tc) > 0 {
		var calls []json.RawMessage
		if json.Unmarshal(tc, &calls) == nil {
			for j, c := range calls {
				ev.Calls = append(ev.Calls, buildCall(fmt.Sprintf("%s.tool_calls.%d", addr, j), c, ms))
			}
		}
	}
	if fn := o.Function; len(fn) > 0 && len(ev.Calls) == 0 { // a legacy bare tool call
		ev.Calls = append(ev.Calls, buildCall(addr, raw, ms))
		if ev.Role == "" {
			ev.Role = "tool call"
		}
	}
	return ev
}

func contentParts(path string, c json.RawMessage, ms *marks) []partView {
	if s, ok := str(c); ok {
		if link, ok := strings.CutPrefix(s, "local_img_link: "); ok {
			return []partView{{Image: imageOf(path, link, ms)}}
		}
		return []partView{{Leaf: ms.leaf(path, s)}}
	}
	var parts []json.RawMessage
	if json.Unmarshal(c, &parts) != nil {
		if string(c) == "null" {
			return nil
		}
		return []partView{{Other: pretty(c)}}
	}
	var out []partView
	for k, p := range parts {
		pp := path + "." + strconv.Itoa(k)
		o, ok := object(p)
		if !ok {
			out = append(out, partView{Other: pretty(p)})
			continue
		}
		typ, _ := str(o["type"])
		switch {
		case typ == "text":
			s, _ := str(o["text"])
			out = append(out, partView{Leaf: ms.leaf(pp+".text", s)})
		case typ == "image_url":
			var iu struct {
				URL string `json:"url"`
			}
			if u := o["image_url"]; len(u) > 0 && u[0] == '"' {
				iu.URL, _ = str(u)
			} else {
				_ = json.Unmarshal(u, &iu)
			}
			out = append(out, partView{Image: imageOf(pp+".image_url.url", iu.URL, ms)})
		default:
			out = append(out, partView{Other: pretty(p)})
		}
	}
	return out
}

// imageOf shows stored and data: images inline; remote ones as a link
// (the CSP allows only this site and data: URLs).
func imageOf(path, u string, ms *marks) *imageView {
	iv := &imageView{Addr: path, Boxes: ms.whole[path], BBoxes: ms.boxes[path]}
	switch {
	case strings.HasPrefix(u, "/api/v1/trace/image/"), strings.HasPrefix(u, "data:image/"):
		iv.Src = u
	default:
		if pu, err := url.Parse(u); err == nil && (pu.Scheme == "http" || pu.Scheme == "https") {
			iv.Link = u
		}
	}
	return iv
}

func buildCall(addr string, raw json.RawMessage, ms *marks) *callView {
	c := &callView{Addr: addr, Boxes: ms.whole[addr]}
	var o struct {
		ID       json.RawMessage `json:"id"`
		Function struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &o) != nil {
		return c
	}
	c.ID, _ = str(o.ID)
	name, _ := str(o.Function.Name)
	c.Name = ms.leaf(addr+".function.name", name)
	args := o.Function.Arguments
	apath := addr + ".function.arguments"
	if s, ok := str(args); ok {
		c.RawArgs = ms.leaf(apath, s)
		return c
	}
	kvs, ok := members(args)
	if !ok {
		if len(args) > 0 && string(args) != "null" {
			c.RawArgs = &leafView{Path: apath, Pretty: pretty(args), Mono: true}
		}
		return c
	}
	for _, m := range kvs {
		p := apath + "." + m.K
		row := argRow{Key: m.K, Addr: p, Boxes: ms.whole[p]}
		if s, ok := str(m.V); ok {
			row.Value = ms.leaf(p, s)
			row.Boxes = nil // drawn on the value itself
		} else {
			row.JSON = pretty(m.V)
		}
		c.Args = append(c.Args, row)
	}
	return c
}

// navigator lists every highlight of the trace (all pages), by severity.
func navigator(anns []apiAnnotation, hits map[string]apiHighlight, self string, page func(addr string) int, cur int) []navItem {
	var out []navItem
	href := func(addr string) string {
		frag := fragment(addr)
		if p := page(addr); p != cur {
			return self + "page=" + strconv.Itoa(p) + frag
		}
		return frag
	}
	for _, a := range anns {
		var md annMeta
		_ = json.Unmarshal(a.ExtraMetadata, &md)
		sev := severityOf(md.Severity)
		label := a.Content
		if md.Guardrail != nil && md.Guardrail.Name != "" {
			label = md.Guardrail.Name + ": " + a.Content
		}
		out = append(out, navItem{Href: href(a.Address), Address: a.Address, Label: label, Source: sourceName(md.Source),
			Class: markClass(md.Source, sev), Severity: sev, Status: md.Status})
	}
	keys := make([]string, 0, len(hits))
	for k := range hits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, navItem{Href: href(k), Address: k, Label: "“" + hits[k].Content + "”", Source: "search", Class: "src-search"})
	}
	rank := map[string]int{"critical": 0, "warn": 1, "info": 2}
	sort.SliceStable(out, func(i, j int) bool {
		ri, ok := rank[out[i].Severity]
		if !ok {
			ri = 3
		}
		rj, ok := rank[out[j].Severity]
		if !ok {
			rj = 3
		}
		return ri < rj
	})
	return out
}

func sourceName(s string) string {
	if s == "" {
		return "user"
	}
	return s
}
