package gateway

import (
	"net/http"
	"time"
)

// Streaming responses end with HTTP trailers (spec §3.5): the overhead of
// the whole stream, the longest hold of a content event and the final
// guardrail result, which the headers sent with the first event cannot
// know yet.

// streamTrailers are the trailers a streaming response declares.
const streamTrailers = "Vigil-Overhead-Ms-Total, Vigil-Held-Ms, Vigil-Guardrail-Result"

// declareTrailers declares the stream trailers; call it before the
// status line is written.
func declareTrailers(h http.Header) { h.Set("Trailer", streamTrailers) }

// setTrailers sets the trailers' values once the last byte is written:
// Vigil-Overhead-Ms-Total = (last byte − t0) − (upstream end − upstream
// start), Vigil-Held-Ms and the final Vigil-Guardrail-Result.
func (c *call) setTrailers(h http.Header, result string) {
	now := time.Now()
	total := now.Sub(c.t0)
	if !c.upStart.IsZero() {
		end := c.upEnd
		if end.IsZero() {
			end = now
		}
		total -= end.Sub(c.upStart)
	}
	h.Set("Vigil-Overhead-Ms-Total", ms(max(0, total)))
	h.Set("Vigil-Held-Ms", ms(c.heldMax))
	h.Set("Vigil-Guardrail-Result", result)
}
