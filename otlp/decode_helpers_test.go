package otlp

import (
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/vigilhq/vigil/trace"
)

func traceNumber(s string) trace.Number { return trace.Number(s) }

func marshalProto(m proto.Message) ([]byte, error) { return proto.Marshal(m) }

func containsPanic(err error) bool { return strings.Contains(err.Error(), "cannot map:") }
