// Package mergepatch applies JSON Merge Patch documents (RFC 7396).
package mergepatch

import (
	"encoding/json"
	"fmt"
)

// Apply returns doc with patch applied. Both must be JSON; a patch that is
// not an object replaces the document.
func Apply(doc, patch []byte) ([]byte, error) {
	var p any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, fmt.Errorf("merge patch: %w", err)
	}
	var d any
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("merge patch target: %w", err)
		}
	}
	return json.Marshal(merge(d, p))
}

func merge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = merge(t[k], v)
	}
	return t
}
