package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/client"
)

// TestConcurrentPushers: 50 concurrent pushers into one (new) dataset lose
// nothing, and every trace gets a distinct index 0..N-1.
func TestConcurrentPushers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, ts *testServer) {
		const pushers, perPusher = 50, 3
		ctx := context.Background()
		var wg sync.WaitGroup
		ids := make(chan string, pushers*perPusher*2)
		errs := make(chan error, pushers)
		for p := 0; p < pushers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := client.New(ts.URL, adminKey, client.WithRetries(0))
				for i := 0; i < perPusher; i++ {
					res, err := c.Push(ctx, client.PushRequest{Dataset: "race", Messages: [][]any{
						{map[string]any{"role": "user", "content": fmt.Sprintf("pusher %d trace %d a", p, i)}},
						{map[string]any{"role": "user", "content": fmt.Sprintf("pusher %d trace %d b", p, i)}},
					}})
					if err != nil {
						errs <- err
						return
					}
					for _, id := range res.ID {
						ids <- id
					}
				}
			}()
		}
		wg.Wait()
		close(ids)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		acked := map[string]bool{}
		for id := range ids {
			acked[id] = true
		}
		const want = pushers * perPusher * 2
		if len(acked) != want {
			t.Fatalf("%d distinct acknowledged ids, want %d", len(acked), want)
		}
		d, err := ts.c.GetDatasetByName(ctx, "admin", "race")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := ts.c.ListTraces(ctx, d.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != want {
			t.Fatalf("%d traces stored, want %d", len(rows), want)
		}
		for i, r := range rows {
			if r.Index != i {
				t.Fatalf("row %d has index %d: indices not distinct and contiguous", i, r.Index)
			}
			if !acked[r.ID] {
				t.Fatalf("stored trace %s was never acknowledged", r.ID)
			}
		}
	})
}
