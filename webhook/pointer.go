package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// lookup returns the JSON value the JSON Pointer ptr (RFC 6901) names in
// doc, as its bytes in doc: "" is the whole document. A pointer that is
// malformed or names nothing is an error wrapping ErrBadPointer.
func lookup(doc []byte, ptr string) (json.RawMessage, error) {
	cur := json.RawMessage(bytes.TrimSpace(doc))
	if ptr == "" {
		if !json.Valid(cur) {
			return nil, fmt.Errorf("%w: the body is not JSON", ErrBadPointer)
		}
		return cur, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("%w: %q does not start with /", ErrBadPointer, ptr)
	}
	for tok := range strings.SplitSeq(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch t := bytes.TrimSpace(cur); {
		case len(t) > 0 && t[0] == '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(t, &obj); err != nil {
				return nil, fmt.Errorf("%w: the body is not JSON", ErrBadPointer)
			}
			v, ok := obj[tok]
			if !ok {
				return nil, fmt.Errorf("%w: %s: no member %q", ErrBadPointer, ptr, tok)
			}
			cur = v
		case len(t) > 0 && t[0] == '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(t, &arr); err != nil {
				return nil, fmt.Errorf("%w: the body is not JSON", ErrBadPointer)
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(arr) || (len(tok) > 1 && tok[0] == '0') {
				return nil, fmt.Errorf("%w: %s: no element %q", ErrBadPointer, ptr, tok)
			}
			cur = arr[i]
		default:
			return nil, fmt.Errorf("%w: %s: %q is not in an object or an array", ErrBadPointer, ptr, tok)
		}
	}
	return cur, nil
}

// lookupString returns the string or number ptr names in doc, as text.
func lookupString(doc []byte, ptr string) (string, error) {
	raw, err := lookup(doc, ptr)
	if err != nil {
		return "", err
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), nil
	}
	return "", fmt.Errorf("%w: %s: not a string or a number", ErrBadPointer, ptr)
}

// checkPointer checks the syntax of ptr.
func checkPointer(ptr string) error {
	if ptr != "" && ptr[0] != '/' {
		return fmt.Errorf("%w: %q does not start with /", ErrBadPointer, ptr)
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 == len(ptr) || ptr[i+1] != '0' && ptr[i+1] != '1') {
			return fmt.Errorf("%w: %q: ~ must be followed by 0 or 1", ErrBadPointer, ptr)
		}
	}
	return nil
}
