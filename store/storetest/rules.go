package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/markov-agents/markov/store"
)

var ruleChecks = []check[store.RuleUses]{
	{"Limit", testRuleLimit},
	{"Release", testRuleRelease},
	{"Invalid", testRuleInvalid},
	{"Concurrent", testRuleConcurrent},
}

func testRuleLimit(t *testing.T, s store.RuleUses) {
	ctx := context.Background()
	if n, err := s.RuleUsed(ctx, "r"); n != 0 || err != nil {
		t.Fatalf("RuleUsed of a rule never used = %d, %v", n, err)
	}
	for i, want := range []int64{1, 2} {
		if n, err := s.UseRule(ctx, "r", fmt.Sprint("s", i), "m", 2); n != want || err != nil {
			t.Fatalf("use %d = %d, %v; want %d", i, n, err, want)
		}
	}
	if n, err := s.UseRule(ctx, "r", "s0", "m", 2); n != 2 || err != nil {
		t.Fatalf("the same suspension's use again = %d, %v; want 2 and no error", n, err)
	}
	if _, err := s.UseRule(ctx, "r", "s2", "m", 2); !errors.Is(err, store.ErrRuleSpent) {
		t.Fatalf("a third use of 2: %v; want ErrRuleSpent", err)
	}
	if n, err := s.RuleUsed(ctx, "r"); n != 2 || err != nil {
		t.Fatalf("RuleUsed = %d, %v; want 2", n, err)
	}
	if n, err := s.UseRule(ctx, "other", "s2", "m", 0); n != 1 || err != nil {
		t.Fatalf("another rule, no limit: %d, %v", n, err)
	}
}

func testRuleRelease(t *testing.T, s store.RuleUses) {
	ctx := context.Background()
	if _, err := s.UseRule(ctx, "r", "s0", "m", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseRule(ctx, "r", "s0"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseRule(ctx, "r", "s0"); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	if n, err := s.RuleUsed(ctx, "r"); n != 0 || err != nil {
		t.Fatalf("RuleUsed after the release = %d, %v; want 0", n, err)
	}
	if n, err := s.UseRule(ctx, "r", "s1", "m", 1); n != 1 || err != nil {
		t.Fatalf("the use given back is used again: %d, %v", n, err)
	}
}

func testRuleInvalid(t *testing.T, s store.RuleUses) {
	ctx := context.Background()
	for _, ids := range [][3]string{{"", "s", "m"}, {"r", "", "m"}, {"r", "s", "a\x00b"}} {
		if _, err := s.UseRule(ctx, ids[0], ids[1], ids[2], 1); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("UseRule%q: %v; want ErrInvalid", ids, err)
		}
	}
	if n, err := s.RuleUsed(ctx, "r"); n != 0 || err != nil {
		t.Fatalf("a refused use was counted: %d, %v", n, err)
	}
}

// testRuleConcurrent races 8 goroutines for 3 uses: exactly 3 get one.
func testRuleConcurrent(t *testing.T, s store.RuleUses) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got, spent := 0, 0
	for i := range 8 {
		wg.Go(func() {
			_, err := s.UseRule(ctx, "r", fmt.Sprint("s", i), "m", 3)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got++
			case errors.Is(err, store.ErrRuleSpent):
				spent++
			default:
				t.Errorf("UseRule: %v", err)
			}
		})
	}
	wg.Wait()
	if got != 3 || spent != 5 {
		t.Fatalf("%d uses and %d refused; want 3 and 5", got, spent)
	}
	if n, err := s.RuleUsed(ctx, "r"); n != 3 || err != nil {
		t.Fatalf("RuleUsed = %d, %v; want 3", n, err)
	}
}
