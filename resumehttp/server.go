package resumehttp

import (
	"log/slog"
	"net/http"
	"time"
)

// Defaults of ServerConfig.
const (
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds the reading of a whole request, body
	// included: a client that stalls its upload is cut off.
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer. Resumes and commands answer after the run
	// they start, model calls included: a run that takes longer still
	// completes and is saved, but its client gets no answer.
	DefaultWriteTimeout = 5 * time.Minute
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 15 * time.Second
	// DefaultMaxHeaderBytes bounds the size of a request's headers.
	DefaultMaxHeaderBytes = 16 << 10
)

// ServerConfig configures NewServer. Zero fields take the documented
// defaults.
type ServerConfig struct {
	// ReadHeaderTimeout is http.Server.ReadHeaderTimeout
	// (DefaultReadHeaderTimeout if zero).
	ReadHeaderTimeout time.Duration
	// ReadTimeout is http.Server.ReadTimeout (DefaultReadTimeout if zero).
	ReadTimeout time.Duration
	// WriteTimeout is http.Server.WriteTimeout (DefaultWriteTimeout if
	// zero).
	WriteTimeout time.Duration
	// IdleTimeout is http.Server.IdleTimeout (DefaultIdleTimeout if zero).
	IdleTimeout time.Duration
	// MaxHeaderBytes is http.Server.MaxHeaderBytes (DefaultMaxHeaderBytes
	// if zero).
	MaxHeaderBytes int
	// Logger receives the server's own errors (failed TLS handshakes,
	// malformed requests) at Warn (silent if nil).
	Logger *slog.Logger
}

// NewServer returns an http.Server for h on addr with the timeouts and
// limits of cfg set, zero fields taking the package's defaults. Serve a
// Handler through it (or set the same fields on your own server): without
// them, a client that opens connections and stalls holds them, and their
// memory, for good.
func NewServer(addr string, h http.Handler, cfg ServerConfig) *http.Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    orDefault(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
