package fakeapi

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/markov-agents/markov/llm"
)

// APIKey is the API key of every hermetic adapter (see Adapter.NewModel).
const APIKey = "test-key"

// TextReply is the fixture every adapter's API directory holds for a plain
// text reply: the checks that need any successful call answer with it.
const TextReply = "text.json"

// Adapter is a provider adapter under test on its fake API: how to build
// it pointed at a server of that API, and the checks every such adapter
// passes beyond the conformance suite. C is the adapter's Config, M its
// model.
type Adapter[C any, M llm.Model] struct {
	API
	// Provider names the adapter: its errors start with Provider + ": ".
	Provider string
	// New is the adapter's constructor.
	New func(C) (M, error)
	// DefaultModel is the model of a hermetic adapter's default settings.
	DefaultModel string
}

// fields points at the fields every adapter's Config has, by these names
// and types: the connection settings of llm/internal/sdkopt and the
// default settings.
type fields struct {
	APIKey, BaseURL   *string
	MaxRetries        **int
	IgnoreEnvironment *bool
	DefaultSettings   *llm.Settings
}

// fieldsOf points at the fields every adapter's Config has in cfg, a
// pointer to one. It panics if one of them is missing or of another type:
// the adapters' Configs must keep them alike.
func fieldsOf(cfg any) fields {
	v := reflect.ValueOf(cfg).Elem()
	field := func(name string) any {
		f := v.FieldByName(name)
		if !f.IsValid() {
			panic(fmt.Sprintf("fakeapi: %s has no field %s", v.Type(), name))
		}
		return f.Addr().Interface()
	}
	return fields{
		APIKey:            field("APIKey").(*string),
		BaseURL:           field("BaseURL").(*string),
		MaxRetries:        field("MaxRetries").(**int),
		IgnoreEnvironment: field("IgnoreEnvironment").(*bool),
		DefaultSettings:   field("DefaultSettings").(*llm.Settings),
	}
}

// NewModel returns a hermetic model pointed at srv, failing t on error:
// the key APIKey, retries off, the environment ignored and DefaultModel
// as the default model, then changed by edits.
func (a Adapter[C, M]) NewModel(t testing.TB, srv *Server, edits ...func(*C)) M {
	t.Helper()
	var cfg C
	c := fieldsOf(&cfg)
	*c.APIKey, *c.BaseURL = APIKey, srv.URL
	*c.MaxRetries, *c.IgnoreEnvironment = new(0), true
	*c.DefaultSettings = llm.Settings{Model: a.DefaultModel}
	for _, e := range edits {
		e(&cfg)
	}
	m, err := a.New(cfg)
	if err != nil {
		t.Fatalf("fakeapi: new %s model: %v", a.Provider, err)
	}
	return m
}

// Model is NewModel without edits, as an llm.Model.
func (a Adapter[C, M]) Model(t *testing.T, srv *Server) llm.Model { return a.NewModel(t, srv) }

// edit returns the change of a Config that edit makes to its fields.
func (a Adapter[C, M]) edit(edit func(fields)) func(*C) {
	return func(cfg *C) { edit(fieldsOf(cfg)) }
}

// hi sends a user's "Hi" to m.
func hi(m llm.Model) (*llm.Response, error) {
	return m.Generate(context.Background(), request(nil))
}

// CheckFailures requires the adapter to refuse a bad config, to fail a
// request without a model before sending it, and to fail on each of the
// malformed fixtures with an error that names the provider.
func (a Adapter[C, M]) CheckFailures(t *testing.T, malformed ...string) {
	t.Run("bad config", func(t *testing.T) {
		for name, edit := range map[string]func(fields){
			"negative retries":    func(c fields) { *c.MaxRetries = new(-1) },
			"negative max tokens": func(c fields) { c.DefaultSettings.MaxTokens = -1 },
		} {
			var cfg C
			a.edit(edit)(&cfg)
			_, err := a.New(cfg)
			require.ErrorIs(t, err, llm.ErrInvalidConfig, name)
		}
	})
	// A model is the one setting without a default, so a request that
	// leaves it unset fails before it is sent. (Requests every adapter
	// refuses are in the conformance suite.)
	t.Run("no model", func(t *testing.T) {
		srv := a.NewServer(t)
		_, err := hi(a.NewModel(t, srv, a.edit(func(c fields) { *c.DefaultSettings = llm.Settings{} })))
		require.ErrorContains(t, err, "no model")
		require.Empty(t, srv.Requests())
	})
	for _, file := range malformed {
		t.Run(file, func(t *testing.T) {
			_, err := hi(a.NewModel(t, a.NewServer(t, Reply{File: file})))
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), a.Provider+": "), "error %q does not name the provider", err)
		})
	}
}

// CheckStopReasons requires each wire stop reason of want to come back as
// its llm.StopReason, in a reply whose body is body(wire).
func (a Adapter[C, M]) CheckStopReasons(t *testing.T, body func(wire string) string, want map[string]llm.StopReason) {
	for wire, reason := range want {
		t.Run(wire, func(t *testing.T) {
			resp, err := hi(a.NewModel(t, a.NewServer(t, Reply{Body: body(wire)})))
			require.NoError(t, err)
			require.Equal(t, reason, resp.StopReason)
		})
	}
}

// CheckEnvironment sets the environment variables env and requires a
// model without an API key to send none of the headers of want while it
// ignores the environment, and want when it reads it.
func (a Adapter[C, M]) CheckEnvironment(t *testing.T, env, want map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
	srv := a.NewServer(t, Reply{File: TextReply}, Reply{File: TextReply})
	for _, ignore := range []bool{true, false} {
		_, err := hi(a.NewModel(t, srv, a.edit(func(c fields) { *c.APIKey, *c.IgnoreEnvironment = "", ignore })))
		require.NoError(t, err)
	}
	reqs := srv.Requests()
	for k, v := range want {
		require.Empty(t, reqs[0].Header.Get(k), "header %s with the environment ignored", k)
		require.Equal(t, v, reqs[1].Header.Get(k), "header %s from the environment", k)
	}
}
