package server

import (
	"regexp"
	"testing"
	"time"
)

// Generation ids keep their form, are unique, and sort by the
// millisecond they were made in (so a store's indexes grow at one end).
func TestGenerationIDs(t *testing.T) {
	form := regexp.MustCompile(`^gen_[0-9a-f]{32}$`)
	at := time.UnixMilli(1_800_000_000_000)
	seen := map[string]bool{}
	prev := ""
	for i := range 2000 {
		now := at.Add(time.Duration(i/100) * time.Millisecond) // 100 ids a millisecond
		id := generationID(now)
		if !form.MatchString(id) {
			t.Fatalf("id %q: not gen_ and 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
		if i%100 == 0 && id <= prev {
			t.Errorf("id %q, made a millisecond after %q, sorts before it", id, prev)
		}
		prev = id
	}
	if a, b := generationID(at), generationID(at); a[:16] != b[:16] || a == b {
		t.Errorf("ids of one millisecond %q and %q: want the time's 12 digits in common and random rest", a, b)
	}
}
