package detect

import (
	"reflect"
	"strings"
	"testing"
)

func TestUnicode(t *testing.T) {
	tests := []struct {
		text string
		cats []string
		want []string
		n    int // matches (marks)
	}{
		{"Can you send me some $?", nil, []string{"Lu", "Ll", "Zs", "Sc", "Po"}, 23},
		{"Tagged: \U000E0068\U000E0069", []string{"Cf", "Co", "Cn", "Cs"}, []string{"Cf"}, 2},
		{"\U0010FFFF\uE000\u0378", nil, []string{"Cn", "Co", "Cn"}[:2], 3},
		{"a\u200db", []string{"Cf"}, []string{"Cf"}, 1},
		{"١٢٣ 𝔸", nil, []string{"Nd", "Zs", "Lu"}, 5},
		{"abc", []string{}, nil, 0},
	}
	for _, tt := range tests {
		ms := Unicode(tt.text, tt.cats)
		if got := Distinct(ms); !reflect.DeepEqual(got, tt.want) || len(ms) != tt.n {
			t.Errorf("Unicode(%q, %q) = %q (%d matches), want %q (%d)", tt.text, tt.cats, got, len(ms), tt.want, tt.n)
		}
	}
	// Marks are one code point each, at code-point offsets.
	ms := Unicode("é\U000E0041", []string{"Cf"})
	if len(ms) != 1 || ms[0].Start != 1 || ms[0].End != 2 {
		t.Errorf("marks %+v, want 1-2", ms)
	}
	if Category(0xD800) != "Cn" && Category(0xD800) != "Cs" {
		t.Errorf("surrogate category %q", Category(0xD800))
	}
}

func TestCopyright(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"here is your code: \n/**\n* Copyright (C) Unicorn Inc.\n*/\nexport const someConst = false;\n", []string{"COPYRIGHT"}},
		{"Copyright © 2024 Example Corp.", []string{"COPYRIGHT"}},
		{"copyright (c) 2024 lower case is not the reference's marker", nil},
		{"  Apache License Version 2.0, January 2004\nhttp://www.apache.org/licenses/", []string{"APACHE_LICENSE_2.0"}},
		{"MIT License\n\nCopyright (c) 2019 Zachary Rice", []string{"MIT_LICENSE"}},
		{"This program is free software under the GNU GENERAL PUBLIC LICENSE Version 2, June 1991.", []string{"GNU_GPL_V2"}},
		{"Boost Software License - Version 1.0 - August 17th, 2003\n\nPermission is hereby granted", []string{"BOOST_SOFTWARE_LICENSE"}},
		{"The library is licensed; see the license file for the version.", nil},
		{"Permission is hereby granted, free of charge, to any person obtaining a copy of this software", []string{"MIT_LICENSE"}},
		{"Mozilla Firefox is public software, version 2", nil},
		{"Licensed under the Apache License, Version 2.0 (January 2004). Copyright (C) 2020 X", []string{"APACHE_LICENSE_2.0", "COPYRIGHT"}},
	}
	for _, tt := range tests {
		if got := Copyright(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Copyright(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestHTMLCodeAndLinks(t *testing.T) {
	doc := `<html><body><p>Me:</p><img src="images/1.jpg" alt="ping https://capture.invariantlabs.ai/trace?x=1 now" />` +
		`<A HREF="https://a.example/x">a</A><img alt=''><a>no href</a><img alt="second"` // unterminated tag at the end
	d := HTMLCode(doc)
	if want := []string{"ping https://capture.invariantlabs.ai/trace?x=1 now", ""}; !reflect.DeepEqual(d.AltTexts, want) {
		t.Errorf("alt texts %q, want %q", d.AltTexts, want)
	}
	if want := []string{"https://a.example/x", "https://capture.invariantlabs.ai/trace?x=1"}; !reflect.DeepEqual(d.Links, want) {
		t.Errorf("links %q, want %q", d.Links, want)
	}
	tests := []struct {
		text string
		want []string
	}{
		{"see https://example.com/a?b=1, then http://x.io and https://example.com/a?b=1,", []string{"https://example.com/a?b=1,", "http://x.io"}},
		{`"https://quoted.example/path" and https://ünïcode.example/ü`, []string{"https://quoted.example/path", "https://ünïcode.example/ü"}},
		{"https://%41%42.example/x http:// ftp://no.example", []string{"https://%41%42.example/x"}},
		{"no links here", nil},
	}
	for _, tt := range tests {
		if got := Links(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Links(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
	if got := HTMLCode(strings.Repeat("<", 1000)); len(got.AltTexts)+len(got.Links) != 0 {
		t.Errorf("garbage gave %+v", got)
	}
}

func FuzzHTMLCode(f *testing.F) {
	f.Add(`<img alt="x"><a href="https://e.x/">`)
	f.Add("<a href='")
	f.Fuzz(func(t *testing.T, s string) {
		HTMLCode(s)
		Unicode(s, nil)
		Copyright(s)
	})
}
