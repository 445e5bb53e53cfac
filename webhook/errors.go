package webhook

import "errors"

// ErrInvalidConfig reports a Config, a Route or a Subscription that New
// or NewSender cannot use; the message names the field.
var ErrInvalidConfig = errors.New("webhook: invalid config")

// ErrBadSecret reports a secret that is empty, or a Standard Webhooks
// secret that is not "whsec_" followed by base64.
var ErrBadSecret = errors.New("webhook: bad secret")

// ErrMissingHeader reports a delivery without a header its scheme needs
// (a signature, a timestamp, a delivery ID); the handler answers 401
// (400 for the delivery ID) and changes nothing.
var ErrMissingHeader = errors.New("webhook: missing header")

// ErrMalformedHeader reports a signature or timestamp header that does
// not parse; the handler answers 401 and changes nothing.
var ErrMalformedHeader = errors.New("webhook: malformed header")

// ErrStaleTimestamp reports a delivery whose signed timestamp is further
// from the handler's clock than the route's tolerance, in either
// direction; the handler answers 401 and changes nothing.
var ErrStaleTimestamp = errors.New("webhook: timestamp outside the tolerance")

// ErrBadSignature reports a delivery none of whose signatures matches
// any of the route's secrets; the handler answers 401 and changes
// nothing.
var ErrBadSignature = errors.New("webhook: signature does not match")

// ErrBadPointer reports a JSON Pointer (RFC 6901) that is malformed, or
// that names nothing in the body, or a value that is not a string or a
// number where one is needed; the handler answers 400 and changes
// nothing.
var ErrBadPointer = errors.New("webhook: bad JSON pointer")

// ErrUnsafeTarget reports a subscription URL whose host resolves to a
// loopback, private, link-local or otherwise non-public address while
// SenderConfig.AllowPrivate is off, or whose scheme is not http(s).
var ErrUnsafeTarget = errors.New("webhook: unsafe target")

// ErrUnknownDelivery reports a delivery ID the sender does not keep.
var ErrUnknownDelivery = errors.New("webhook: unknown delivery")

// ErrDeliveryFailed reports an attempt answered with a status other than
// 2xx, or that could not reach its target.
var ErrDeliveryFailed = errors.New("webhook: delivery failed")
