package webhook

// This file verifies and makes the signatures of the three schemes, with
// the standard library: HMAC-SHA256 compared in constant time. (The
// Standard Webhooks project's Go library is not served by the module
// proxy here, and the schemes are a few lines each; the npm reference
// library checks this implementation in the tests.)

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme is how a sender signs its deliveries.
type Scheme string

// The schemes a Route verifies.
const (
	// StandardWebhooks is the Standard Webhooks specification: headers
	// webhook-id, webhook-timestamp and webhook-signature, the latter one
	// or more space-separated "v1,<base64 HMAC-SHA256 of
	// id.timestamp.body>"; secrets are "whsec_" + base64 of the key.
	StandardWebhooks Scheme = "standard-webhooks"
	// GitHub is GitHub's: X-Hub-Signature-256: sha256=<hex HMAC-SHA256
	// of the body>, delivery ID in X-GitHub-Delivery. The secret is used
	// as it is written. GitHub signs no timestamp: only the delivery ID
	// bounds replays (for DeliveryWindow).
	GitHub Scheme = "github"
	// Stripe is Stripe's: Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256
	// of "t.body">[,v1=…]; the secret ("whsec_…") is used as it is
	// written; the delivery ID is the event's "id" in the body.
	Stripe Scheme = "stripe"
)

// Header names of the schemes.
const (
	HeaderID              = "webhook-id"
	HeaderTimestamp       = "webhook-timestamp"
	HeaderSignature       = "webhook-signature"
	HeaderGitHubSignature = "X-Hub-Signature-256"
	HeaderGitHubDelivery  = "X-GitHub-Delivery"
	HeaderStripeSignature = "Stripe-Signature"
)

// DefaultTolerance is how far a signed timestamp may be from the clock,
// in either direction, when Route.Tolerance is zero: five minutes, as the
// Standard Webhooks libraries and Stripe's do.
const DefaultTolerance = 5 * time.Minute

// secretPrefix starts a Standard Webhooks secret.
const secretPrefix = "whsec_"

// maxSignatures bounds how many signatures of one header are tried.
const maxSignatures = 16

// ParseSecret returns the HMAC key of a Standard Webhooks secret:
// "whsec_" followed by the base64 of the key (the prefix may be left
// out). Anything else is an error wrapping ErrBadSecret.
func ParseSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("%w: a Standard Webhooks secret is whsec_ followed by base64", ErrBadSecret)
	}
	return key, nil
}

// NewSecret returns a Standard Webhooks secret for key: "whsec_" + its
// base64.
func NewSecret(key []byte) string { return secretPrefix + base64.StdEncoding.EncodeToString(key) }

// Sign returns the webhook-signature value of a Standard Webhooks
// delivery: "v1," followed by the base64 HMAC-SHA256, under key, of
// "id.timestamp.body" (timestamp in Unix seconds).
func Sign(key []byte, id string, timestamp time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id+"."+strconv.FormatInt(timestamp.Unix(), 10)+".", body))
}

// mac is the HMAC-SHA256 under key of prefix followed by body.
func mac(key []byte, prefix string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// ParseStandardSignatures returns the signatures of a webhook-signature
// header: the decoded base64 of every space-separated "v1,<base64>"
// entry, at most 16. Entries of other versions (v1a, asymmetric) are
// skipped; a v1 entry that does not decode, or a header with no v1
// entry, is an error wrapping ErrMalformedHeader.
func ParseStandardSignatures(header string) ([][]byte, error) {
	var sigs [][]byte
	for entry := range strings.FieldsSeq(header) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok {
			return nil, fmt.Errorf("%w: %s: an entry is not version,signature", ErrMalformedHeader, HeaderSignature)
		}
		if version != "v1" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("%w: %s: a v1 signature is not the base64 of 32 bytes", ErrMalformedHeader, HeaderSignature)
		}
		if len(sigs) < maxSignatures {
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: %s: no v1 signature", ErrMalformedHeader, HeaderSignature)
	}
	return sigs, nil
}

// ParseGitHubSignature returns the signature of an X-Hub-Signature-256
// header: "sha256=" followed by 64 hex digits, else an error wrapping
// ErrMalformedHeader.
func ParseGitHubSignature(header string) ([]byte, error) {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	b, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: %s: expected sha256= and 64 hex digits", ErrMalformedHeader, HeaderGitHubSignature)
	}
	return b, nil
}

// ParseStripeSignature returns the timestamp and the v1 signatures of a
// Stripe-Signature header: comma-separated key=value pairs, one t (Unix
// seconds) and one or more v1 (64 hex digits); other keys (v0) are
// skipped. Anything else is an error wrapping ErrMalformedHeader.
func ParseStripeSignature(header string) (timestamp int64, sigs [][]byte, err error) {
	seenT := false
	for pair := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return 0, nil, fmt.Errorf("%w: %s: a pair is not key=value", ErrMalformedHeader, HeaderStripeSignature)
		}
		switch k {
		case "t":
			if seenT {
				return 0, nil, fmt.Errorf("%w: %s: t given twice", ErrMalformedHeader, HeaderStripeSignature)
			}
			if timestamp, err = parseUnix(v); err != nil {
				return 0, nil, fmt.Errorf("%w: %s: t is not a Unix time", ErrMalformedHeader, HeaderStripeSignature)
			}
			seenT = true
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				return 0, nil, fmt.Errorf("%w: %s: a v1 signature is not 64 hex digits", ErrMalformedHeader, HeaderStripeSignature)
			}
			if len(sigs) < maxSignatures {
				sigs = append(sigs, b)
			}
		}
	}
	if !seenT || len(sigs) == 0 {
		return 0, nil, fmt.Errorf("%w: %s: t and v1 are required", ErrMalformedHeader, HeaderStripeSignature)
	}
	return timestamp, sigs, nil
}

// parseUnix parses Unix seconds: 1 to 12 digits, nothing else.
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > 12 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}

// verifier checks a delivery's signature against the keys of a route
// and returns its delivery ID from the headers ("" when the scheme's is
// elsewhere).
type verifier struct {
	scheme    Scheme
	keys      [][]byte
	tolerance time.Duration
}

// newVerifier derives the keys of secrets for scheme.
func newVerifier(scheme Scheme, secrets []string, tolerance time.Duration) (*verifier, error) {
	v := &verifier{scheme: scheme, tolerance: tolerance}
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrBadSecret)
	}
	for _, s := range secrets {
		switch {
		case scheme == StandardWebhooks:
			key, err := ParseSecret(s)
			if err != nil {
				return nil, err
			}
			v.keys = append(v.keys, key)
		case s == "":
			return nil, fmt.Errorf("%w: empty", ErrBadSecret)
		default:
			v.keys = append(v.keys, []byte(s))
		}
	}
	return v, nil
}

// verify checks h and body at now and returns the delivery ID the
// headers carry.
func (v *verifier) verify(h http.Header, body []byte, now time.Time) (string, error) {
	switch v.scheme {
	case GitHub:
		raw := h.Get(HeaderGitHubSignature)
		if raw == "" {
			return "", fmt.Errorf("%w: %s", ErrMissingHeader, HeaderGitHubSignature)
		}
		sig, err := ParseGitHubSignature(raw)
		if err != nil {
			return "", err
		}
		return h.Get(HeaderGitHubDelivery), v.match("", body, [][]byte{sig})
	case Stripe:
		raw := h.Get(HeaderStripeSignature)
		if raw == "" {
			return "", fmt.Errorf("%w: %s", ErrMissingHeader, HeaderStripeSignature)
		}
		ts, sigs, err := ParseStripeSignature(raw)
		if err == nil {
			err = v.fresh(ts, now)
		}
		if err != nil {
			return "", err
		}
		return "", v.match(strconv.FormatInt(ts, 10)+".", body, sigs)
	default:
		id, rawTS, rawSig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
		if id == "" || rawTS == "" || rawSig == "" {
			return "", fmt.Errorf("%w: %s, %s and %s are required", ErrMissingHeader, HeaderID, HeaderTimestamp, HeaderSignature)
		}
		ts, err := parseUnix(rawTS)
		if err != nil {
			return "", fmt.Errorf("%w: %s is not a Unix time", ErrMalformedHeader, HeaderTimestamp)
		}
		if err := v.fresh(ts, now); err != nil {
			return "", err
		}
		sigs, err := ParseStandardSignatures(rawSig)
		if err != nil {
			return "", err
		}
		return id, v.match(id+"."+rawTS+".", body, sigs)
	}
}

// fresh checks that ts is within the tolerance of now.
func (v *verifier) fresh(ts int64, now time.Time) error {
	d := now.Sub(time.Unix(ts, 0))
	if d > v.tolerance || d < -v.tolerance {
		return fmt.Errorf("%w: the timestamp is %s from the clock (tolerance %s)", ErrStaleTimestamp, d.Round(time.Second), v.tolerance)
	}
	return nil
}

// match reports nil when one of sigs is the MAC of prefix+body under one
// of the keys (several keys: a secret being rotated).
func (v *verifier) match(prefix string, body []byte, sigs [][]byte) error {
	for _, key := range v.keys {
		want := mac(key, prefix, body)
		for _, sig := range sigs {
			if hmac.Equal(want, sig) {
				return nil
			}
		}
	}
	return ErrBadSignature
}
