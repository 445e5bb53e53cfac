package console_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/markov-agents/markov/console"
	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/llm/scripted"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/node"
	"github.com/markov-agents/markov/store/memstore"
)

// A console whose people sign in with an OpenID provider: the groups
// claim of their ID token goes with their decisions, so a policy naming
// groups (instance.Policy.Groups) decides who may approve. A sign-in
// starts at /ui/oidc/start and goes to the provider with the code flow's
// PKCE challenge. (The provider here is only its discovery document.)
func ExampleOIDC() {
	idp := httptest.NewUnstartedServer(nil)
	issuer := "http://" + idp.Listener.Addr().String()
	idp.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "authorization_endpoint": issuer + "/auth",
			"token_endpoint": issuer + "/token", "jwks_uri": issuer + "/jwks"})
	})
	idp.Start()
	defer idp.Close()

	desk, err := node.New("desk", node.Config[struct{}]{})
	if err != nil {
		log.Fatal(err)
	}
	charter, err := machine.NewCharter(machine.CharterConfig{Model: scripted.New(scripted.Text("Hello.")), Nodes: []*node.Node{desk}})
	if err != nil {
		log.Fatal(err)
	}
	runner, err := durable.New(durable.Config{Store: memstore.New(), Charter: charter})
	if err != nil {
		log.Fatal(err)
	}
	ui, err := console.New(console.Config{Runner: runner, Charter: charter, OIDC: &console.OIDC{
		IssuerURL:    issuer,
		ClientID:     "markov-console",
		ClientSecret: "the client secret the provider gave",
		RedirectURL:  "https://console.example.com/ui/oidc/callback",
		Scopes:       []string{"groups"},
		GroupsClaim:  "groups",
	}})
	if err != nil {
		log.Fatal(err)
	}

	rec := httptest.NewRecorder()
	ui.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/oidc/start?next=/ui/machines", nil))
	to, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		log.Fatal(err)
	}
	q := to.Query()
	fmt.Println(rec.Code, to.Path)
	fmt.Println(q.Get("client_id"), q.Get("scope"), q.Get("code_challenge_method"))
	// Output:
	// 303 /auth
	// markov-console openid groups S256
}
