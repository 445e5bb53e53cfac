package resumehttp

import (
	"errors"
	"net/url"
	"testing"
)

// FuzzListFilter feeds GET /suspensions any query: listFilter never
// panics, and either refuses it with ErrBadQuery or returns a filter the
// stores accept, whose status is one of store.Statuses.
func FuzzListFilter(f *testing.F) {
	for _, q := range []string{"", "status=pending", "status=expired&machine=m1&limit=5",
		"status=cancelled&deadline_before=2030-01-02T03:04:05Z", "status=Pending", "status=%00",
		"limit=0", "limit=99999999999999999999", "deadline_before=tomorrow", "status=resolved&status=bogus"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		filter, err := listFilter(q)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("listFilter(%q): %v, want ErrBadQuery", raw, err)
			}
			return
		}
		if err := filter.Validate(); err != nil || !filter.Status.Valid() {
			t.Fatalf("listFilter(%q) = %+v, which does not validate: %v", raw, filter, err)
		}
		if v := q.Get("status"); v != "" && string(filter.Status) != v {
			t.Fatalf("listFilter(%q).Status = %q, want %q", raw, filter.Status, v)
		}
		if filter.Limit < 0 {
			t.Fatalf("listFilter(%q).Limit = %d", raw, filter.Limit)
		}
	})
}
