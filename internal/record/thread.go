package record

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
)

// A thread's item is its message, sealed and bound to its tenant and item
// id rather than to its thread: a fork copies the stored bytes as they
// are, and the copy opens under the same id.
func threadItemAAD(tenant, itemID string) []byte {
	return []byte(tenant + "\x00thread_item\x00" + itemID)
}

// NewItemID is a new thread item's id: "itm_" and 32 hex digits, random.
func NewItemID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "itm_" + hex.EncodeToString(b[:])
}

// ThreadItems seals msgs, from a generation (or none: ""), as new items
// for tenant's thread, numbered from 0 (the store numbers what Finish
// appends).
func ThreadItems(k *sealer.Keyring, tenant, generation string, msgs []*agentdv1.Message, now time.Time) []store.ThreadItem {
	items := make([]store.ThreadItem, len(msgs))
	for i, m := range msgs {
		id := NewItemID()
		items[i] = store.ThreadItem{ID: id, N: int64(i), Generation: generation, CreatedAt: now,
			Data: sealMessage(k, threadItemAAD(tenant, id), m)}
	}
	return items
}

// OpenThreadItem decodes the message of tenant's stored thread item.
func OpenThreadItem(k *sealer.Keyring, tenant string, it store.ThreadItem) (*agentdv1.Message, error) {
	m := &agentdv1.Message{}
	return m, openMessage(k, threadItemAAD(tenant, it.ID), it.Data, m, fmt.Sprintf("the thread item %q", it.ID))
}

// ThreadMessages reads the messages of tenant's thread items 0 to n-1:
// the conversation a generation on the thread starts from.
func ThreadMessages(ctx context.Context, threads store.Threads, k *sealer.Keyring, tenant, thread string, n int64) ([]*agentdv1.Message, error) {
	msgs := make([]*agentdv1.Message, 0, n)
	for next := int64(0); next < n; {
		items, err := threads.ThreadItems(ctx, tenant, thread, store.ItemRange{After: next - 1, Before: n, Limit: store.MaxReadEvents})
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return nil, fault.New(fault.Internal, "the thread %q has fewer items than the generation's conversation starts with (%d)", thread, n)
		}
		for _, it := range items {
			m, err := OpenThreadItem(k, tenant, it)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
			next = it.N + 1
		}
	}
	return msgs, nil
}

// StoredConversation reads the whole conversation of tenant's generation
// id as its record keeps it (its own items, without a thread's), for a
// generation that has finished: what a new thread continuing from it
// starts with.
func StoredConversation(ctx context.Context, gens store.Generations, tenant, id string) ([]*agentdv1.Message, error) {
	var items []*statev1.Item
	for {
		stored, err := gens.Items(ctx, tenant, id, int64(len(items))-1, 0)
		if err != nil {
			return nil, err
		}
		if len(stored) == 0 {
			break
		}
		for _, s := range stored {
			it := &statev1.Item{}
			if s.N != int64(len(items)) || proto.Unmarshal(s.Data, it) != nil {
				return nil, unreadable()
			}
			items = append(items, it)
		}
	}
	msgs, _, err := itemSource{gens, tenant, id}.decoded(ctx, items, nil)
	return msgs, err
}
