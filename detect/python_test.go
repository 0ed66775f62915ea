package detect

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPythonCode(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		imports  []string
		builtins []string
		calls    []string
		syntax   string // substring of the error message; "" = no error
	}{
		{name: "conformance imports", src: "import os\nimport sys\nimport numpy as np\nfrom sklearn import svm\n",
			imports: []string{"os", "sys", "numpy", "sklearn"}},
		{name: "dotted and multiple", src: "import a.b.c, d as e\nfrom .pkg.mod import (x,\n  y)\nfrom . import z\n",
			imports: []string{"a.b.c", "d", "pkg.mod", "."}},
		{name: "calls and builtins", src: "import os\nx = len([1])\nos.system('ls')\nprint(x, sep='')\nos.system('pwd')\n",
			imports: []string{"os"}, builtins: []string{"len", "print"}, calls: []string{"len", "os.system", "print"}},
		{name: "attribute named like builtin is no builtin", src: "obj.print(1)\nf(len=3)\n", calls: []string{"obj.print", "f"}},
		{name: "def and params", src: "def open(file, mode='r'):\n    return max(file)\n", builtins: []string{"max"}, calls: []string{"max"}},
		{name: "strings hide code", src: "s = \"import os; eval('x')\"\nt = '''\nexec(1)\n'''\n"},
		{name: "async def and one-line bodies", src: "async def f():\n    if x: return 1\n    else: return 2\n"},
		{name: "match statement", src: "match cmd:\n    case [\"go\", d]:\n        move(d)\n    case _:\n        pass\n", calls: []string{"move"}},
		{name: "decorators, classes, try", src: "@dataclass\nclass A(B):\n    x: int = 0\n\ntry:\n    f()\nexcept (ValueError, KeyError) as e:\n    raise\nfinally:\n    g()\n",
			builtins: []string{"int", "ValueError", "KeyError"}, calls: []string{"f", "g"}},
		{name: "import star", src: "from os import *\n", imports: []string{"os"}},
		{name: "import in a one-line body", src: "if not re: import re\n", imports: []string{"re"}},
		{name: "continuation lines keep indentation", src: "def f():\n    if (a\n        and b):\n        return 1\n    return 2\n"},
		{name: "trailing operator", src: "x = 1 +\n", syntax: "invalid syntax"},
		{name: "adjacent operands", src: "a b c\n", syntax: "invalid syntax"},
		{name: "python 2 print", src: "print 'hello'\n", syntax: "Missing parentheses"},
		{name: "dangling else", src: "x = 1 if y else\n", syntax: "expected expression"},
		{name: "unterminated string", src: "x = 'abc\n", syntax: "unterminated string literal"},
		{name: "unclosed bracket", src: "print((1, 2)\n", syntax: "was never closed"},
		{name: "missing colon", src: "if x\n    y = 1\n", syntax: "expected ':'"},
		{name: "missing block", src: "for i in x:\nprint(i)\n", syntax: "expected an indented block"},
		{name: "bad dedent", src: "if x:\n        a = 1\n    b = 2\n", syntax: "unindent"},
		{name: "unexpected indent", src: "a = 1\n    b = 2\n", syntax: "unexpected indent"},
		{name: "prose is not python", src: "Hello, how are you? I'm fine.", syntax: "invalid character"},
		{name: "empty", src: ""},
		// Text that does not parse gives no guesses (issue 17 item 12):
		// the prose below used to report the call "Copyright".
		{name: "issue_17_prose_guesses_nothing", src: "Copyright (C) 2019 Initech Corporation.", syntax: "invalid syntax"},
		{name: "issue_17_error_after_code_guesses_nothing", src: "import os\nos.system('ls')\nx = = \n", syntax: "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := PythonCode(tt.src)
			if !reflect.DeepEqual(r.Imports, tt.imports) {
				t.Errorf("imports %q, want %q", r.Imports, tt.imports)
			}
			if !reflect.DeepEqual(r.Builtins, tt.builtins) {
				t.Errorf("builtins %q, want %q", r.Builtins, tt.builtins)
			}
			if !reflect.DeepEqual(r.FunctionCalls, tt.calls) {
				t.Errorf("calls %q, want %q", r.FunctionCalls, tt.calls)
			}
			if r.SyntaxError != (tt.syntax != "") || !strings.Contains(r.SyntaxErrorMessage, tt.syntax) {
				t.Errorf("syntax error %v %q, want %q", r.SyntaxError, r.SyntaxErrorMessage, tt.syntax)
			}
		})
	}
}

// TestPythonCodeLongDottedNames: long dotted names in calls and imports
// are built in linear time (string += per segment was quadratic: 200,000
// segments took about 10 s).
func TestPythonCodeLongDottedNames(t *testing.T) {
	chain := "a" + strings.Repeat(".a", 200000)
	for _, src := range []string{chain + "()", "import " + chain, "from " + chain + " import x"} {
		start := time.Now()
		r := PythonCode(src)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%.12s…: took %v", src, d)
		}
		if len(r.FunctionCalls)+len(r.Imports) != 1 || r.SyntaxError {
			t.Errorf("%.12s…: calls %d imports %d syntax error %v", src, len(r.FunctionCalls), len(r.Imports), r.SyntaxError)
		}
	}
}

func TestIPythonPreprocess(t *testing.T) {
	cell := "%matplotlib inline\nimport os\n!pip install x\nfiles = !ls\nos.getcwd?\nprint(os.getcwd())\n"
	r := PythonCode(IPythonPreprocess(cell))
	if r.SyntaxError || !reflect.DeepEqual(r.Imports, []string{"os"}) || !reflect.DeepEqual(r.FunctionCalls, []string{"print", "os.getcwd"}) {
		t.Errorf("ipython cell: %+v", r)
	}
	if !PythonCode(cell).SyntaxError {
		t.Error("the raw cell must not parse as Python")
	}
	if got := IPythonPreprocess("%%bash\necho hi\n"); strings.TrimSpace(got) != "" {
		t.Errorf("cell magic: %q", got)
	}
}

func FuzzPython(f *testing.F) {
	f.Add("import os\nfrom a.b import c\nprint(len(x))\n")
	f.Add("def f(a, b=1):\n\tif a:\n\t\treturn '''x\n'''\n")
	f.Add("x = (\\\n1")
	f.Add("é = 'ü'\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := PythonCode(s)
		if r.SyntaxError && r.SyntaxErrorMessage == "" {
			t.Fatal("syntax error without message")
		}
	})
}
