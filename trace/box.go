package trace

// box returns s as a Value of dynamic type string, or Number when number
// is set. (A slab of string headers behind hand-built interfaces saved an
// allocation per decoded string, but relied on the runtime's interface
// layout through unsafe; the plain conversion is kept instead.)
//
// The strings that recur in nearly every trace (roles, the call type,
// chunk types) and the one-digit numbers are returned pre-boxed, without
// an allocation: they are about a third of a chat trace's string values.
func box(s string, number bool) Value {
	if number {
		if len(s) == 1 && s[0] >= '0' && s[0] <= '9' {
			return boxedDigits[s[0]-'0']
		}
		return Number(s)
	}
	switch len(s) {
	case 4:
		switch s {
		case "user":
			return boxedUser
		case "tool":
			return boxedTool
		case "text":
			return boxedText
		}
	case 6:
		switch s {
		case "system":
			return boxedSystem
		case "object":
			return boxedObject
		case "string":
			return boxedString
		}
	case 8:
		if s == "function" {
			return boxedFunction
		}
	case 9:
		switch s {
		case "assistant":
			return boxedAssistant
		case "image_url":
			return boxedImageURL
		}
	}
	return s
}

// The pre-boxed values of box. Their dynamic types are string and Number,
// as for any other decoded value.
var (
	boxedUser      Value = "user"
	boxedTool      Value = "tool"
	boxedText      Value = "text"
	boxedSystem    Value = "system"
	boxedObject    Value = "object"
	boxedString    Value = "string"
	boxedFunction  Value = "function"
	boxedAssistant Value = "assistant"
	boxedImageURL  Value = "image_url"
	boxedDigits          = [10]Value{Number("0"), Number("1"), Number("2"), Number("3"), Number("4"),
		Number("5"), Number("6"), Number("7"), Number("8"), Number("9")}
)
