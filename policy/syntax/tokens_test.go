package syntax

import "testing"

func TestTokens(t *testing.T) {
	src := NewSource("t", "raise \"x\" if:\n    (call: ToolCall)  # c\n    call.n > 3 $\n")
	var got []string
	for _, sp := range Tokens(src) {
		got = append(got, sp.Tok.String()+"="+src.Snippet(sp.Pos, sp.End))
	}
	want := []string{"raise=raise", `string="x"`, "if=if", ":=:", "(=(", "identifier=call", ":=:", "identifier=ToolCall", ")=)",
		"identifier=call", ".=.", "identifier=n", ">=>", "integer=3", "ILLEGAL=$"}
	if len(got) != len(want) {
		t.Fatalf("tokens %q\nwant   %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("token %d: %q, want %q", i, got[i], want[i])
		}
	}
}
