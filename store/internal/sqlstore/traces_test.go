package sqlstore

import (
	"encoding/json"
	"testing"
)

func TestNodeIDsJSON(t *testing.T) {
	for _, ids := range [][]string{{}, {"01KDVDN90RBSAH00000000RUN1"}, {"a", "b-c_d"}, {"q\"uote", "<tag>"}, {"é", "\x01"}} {
		want, _ := json.Marshal(ids)
		if got := nodeIDsJSON(ids); got != string(want) {
			t.Errorf("%q: %s, want %s", ids, got, want)
		}
	}
}
