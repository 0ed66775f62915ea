package syntax

// Token is the kind of a lexical token of the policy language (spec §2).
type Token int

// The tokens of the language. Operators are named after their spelling.
const (
	ILLEGAL Token = iota
	EOF
	NEWLINE // end of a logical line
	INDENT  // start of an indented block
	DEDENT  // end of an indented block

	IDENT    // name
	INT      // 42
	FLOAT    // 1.5
	STRING   // "abc", r"abc", """abc"""
	FSTRING  // f"a{b}"
	VALUEREF // <EMAIL_ADDRESS>

	// Operators and delimiters (spec §2.7).
	PLUS    // +
	MINUS   // -
	STAR    // *
	SLASH   // /
	PERCENT // %
	POW     // **
	EQ      // ==
	NE      // !=
	LT      // <
	GT      // >
	LE      // <=
	GE      // >=
	ARROW   // ->
	SQUIG   // ~>
	DEFINE  // :=
	ASSIGN  // =
	LPAREN  // (
	RPAREN  // )
	LBRACK  // [
	RBRACK  // ]
	LBRACE  // {
	RBRACE  // }
	COMMA   // ,
	COLON   // :
	DOT     // .

	// Keywords (spec §2.3).
	AND
	AS
	CONTAINS_ONLY
	DEF
	ELSE
	FALSE
	FOR
	FROM
	IF
	IMPORT
	IN
	IS
	NONE
	NOT
	OR
	RAISE
	TRUE

	// Two-word operators, produced by the parser, never by the lexer.
	NOTIN // not in
	ISNOT // is not
)

var tokenNames = [...]string{
	ILLEGAL:  "ILLEGAL",
	EOF:      "end of file",
	NEWLINE:  "newline",
	INDENT:   "indent",
	DEDENT:   "dedent",
	IDENT:    "identifier",
	INT:      "integer",
	FLOAT:    "float",
	STRING:   "string",
	FSTRING:  "f-string",
	VALUEREF: "value reference",

	PLUS:    "+",
	MINUS:   "-",
	STAR:    "*",
	SLASH:   "/",
	PERCENT: "%",
	POW:     "**",
	EQ:      "==",
	NE:      "!=",
	LT:      "<",
	GT:      ">",
	LE:      "<=",
	GE:      ">=",
	ARROW:   "->",
	SQUIG:   "~>",
	DEFINE:  ":=",
	ASSIGN:  "=",
	LPAREN:  "(",
	RPAREN:  ")",
	LBRACK:  "[",
	RBRACK:  "]",
	LBRACE:  "{",
	RBRACE:  "}",
	COMMA:   ",",
	COLON:   ":",
	DOT:     ".",

	AND:           "and",
	AS:            "as",
	CONTAINS_ONLY: "contains_only",
	DEF:           "def",
	ELSE:          "else",
	FALSE:         "False",
	FOR:           "for",
	FROM:          "from",
	IF:            "if",
	IMPORT:        "import",
	IN:            "in",
	IS:            "is",
	NONE:          "None",
	NOT:           "not",
	OR:            "or",
	RAISE:         "raise",
	TRUE:          "True",

	NOTIN: "not in",
	ISNOT: "is not",
}

// String returns the spelling of an operator or keyword, or a description
// of any other token.
func (t Token) String() string {
	if t >= 0 && int(t) < len(tokenNames) && tokenNames[t] != "" {
		return tokenNames[t]
	}
	return "token(?)"
}

var keywords = map[string]Token{
	"and":           AND,
	"as":            AS,
	"contains_only": CONTAINS_ONLY,
	"def":           DEF,
	"else":          ELSE,
	"False":         FALSE,
	"for":           FOR,
	"from":          FROM,
	"if":            IF,
	"import":        IMPORT,
	"in":            IN,
	"is":            IS,
	"None":          NONE,
	"not":           NOT,
	"or":            OR,
	"raise":         RAISE,
	"True":          TRUE,
}

// Lookup returns the keyword token for name, or IDENT if name is not reserved.
func Lookup(name string) Token {
	if t, ok := keywords[name]; ok {
		return t
	}
	return IDENT
}

// IsKeyword reports whether name is a reserved keyword (spec §2.3).
func IsKeyword(name string) bool { _, ok := keywords[name]; return ok }

// IsComparison reports whether t is a level-5 operator that chains (spec §5.2).
func (t Token) IsComparison() bool {
	switch t {
	case EQ, NE, LT, GT, LE, GE, IN, NOTIN, IS, ISNOT, CONTAINS_ONLY, ARROW, SQUIG:
		return true
	}
	return false
}
