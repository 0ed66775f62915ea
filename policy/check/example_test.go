package check_test

import (
	"fmt"

	"github.com/vigilhq/vigil/policy/check"
	"github.com/vigilhq/vigil/policy/syntax"
)

// A minimal Universe: len and the Message type, nothing importable.
var universe = &check.Table{
	Builtins: map[string]*check.Symbol{
		"len":     {Kind: check.SymFunc, Name: "len", Params: []check.Param{{Name: "x"}}, Result: "int"},
		"Message": {Kind: check.SymType, Name: "Message"},
	},
}

func ExampleCheck() {
	src := syntax.NewSource("rules.policy", `raise "too long" if:
    (msg: Mesage)
    y > 10
    y := len(msg.content)
`)
	file, err := syntax.Parse(src)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := check.Check(file, universe); err != nil {
		fmt.Println(err)
	}
	// Output:
	// rules.policy:2:11: unknown type Mesage; did you mean Message?
	//         (msg: Mesage)
	//               ^
	// rules.policy:3:5: y used before assignment (it is assigned at rules.policy:4:5)
	//         y > 10
	//         ^
}
