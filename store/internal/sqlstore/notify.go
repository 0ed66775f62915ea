package sqlstore

import (
	"context"
	"sync"
)

// Hub is an in-process implementation of store.Notifier's Notify and
// Subscribe, for backends that run in one process (SQLite).
type Hub struct {
	mu     sync.Mutex
	subs   map[string]map[chan string]struct{}
	closed bool
}

// Notify delivers payload to the current subscribers of channel, dropping it
// for those whose buffer is full.
func (h *Hub) Notify(_ context.Context, channel, payload string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[channel] {
		select {
		case ch <- payload:
		default:
		}
	}
	return nil
}

// Subscribe registers a subscriber until ctx ends or the hub closes.
func (h *Hub) Subscribe(ctx context.Context, channel string) (<-chan string, error) {
	ch := make(chan string, 64)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		close(ch)
		return ch, nil
	}
	if h.subs == nil {
		h.subs = map[string]map[chan string]struct{}{}
	}
	if h.subs[channel] == nil {
		h.subs[channel] = map[chan string]struct{}{}
	}
	h.subs[channel][ch] = struct{}{}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[channel][ch]; ok {
			delete(h.subs[channel], ch)
			close(ch)
		}
	})
	return ch, nil
}

// Close ends every subscription.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, m := range h.subs {
		for ch := range m {
			close(ch)
		}
	}
	h.subs = nil
}
