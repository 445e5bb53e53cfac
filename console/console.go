package console

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/markov-agents/markov/durable"
	"github.com/markov-agents/markov/instance"
	"github.com/markov-agents/markov/internal/faillimit"
	"github.com/markov-agents/markov/machine"
	"github.com/markov-agents/markov/resumehttp"
	"github.com/markov-agents/markov/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultPrefix is where the console is mounted when Config.Prefix is
// empty.
const DefaultPrefix = "/ui/"

// DefaultSessionTTL is how long a sign-in lasts when Config.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

// Config configures a Console. Secret, OIDC or IdentityHeader (or more
// than one) is required: the console never serves anonymous visitors.
type Config struct {
	// Runner holds the machines. Required.
	Runner *durable.Runner
	// Acceptor takes the decisions, as it takes the signed API's resumes
	// (resumehttp.Config.Acceptor): a decision is durable once accepted
	// and the page answers at once, the run that applies it going on
	// elsewhere — in the background of Runner (the default), or, with a
	// *fleet.Fleet, committed with the job any worker of the fleet runs
	// and retries.
	Acceptor resumehttp.Acceptor
	// Charter is the charter the Runner runs, for the graph. Required.
	Charter *machine.Charter
	// Secret, if set, lets a person sign in with it (and a name). It also
	// keys the session cookies, so sessions survive a restart. It must be
	// as strong as the signed API's (resumehttp.CheckSecret: at least
	// resumehttp.MinSecretLen bytes, not one byte repeated).
	Secret []byte
	// IdentityHeader, if set, is the request header a reverse proxy puts
	// the signed-in person's identity in (for example X-Forwarded-User).
	// The proxy must strip it from clients' requests.
	IdentityHeader string
	// OIDC, if set, lets a person sign in with an OpenID Connect
	// provider; their groups (OIDC.GroupsClaim) go with their decisions.
	OIDC *OIDC
	// Prefix is the path the console is mounted at (DefaultPrefix if
	// empty); it must start and end with "/".
	Prefix string
	// CookiePath is the path the console's cookies are sent for: Prefix
	// if empty. "/" (or any path Prefix is under) lets other endpoints of
	// the origin accept the console's sign-in ([Console.SessionOr]).
	CookiePath string
	// Fleet, if set, adds the fleet view: runs in progress, queued and
	// scheduled work, failures (a *fleet.Fleet, on PostgreSQL).
	Fleet FleetView
	// Deliveries, if set, adds the webhook deliveries page, with a
	// redeliver button (a *webhook.Sender).
	Deliveries DeliveryView
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL if zero).
	SessionTTL time.Duration
	// SignInBurst is how many failed sign-ins a client address may make
	// in a row before its sign-ins are refused with 429
	// (DefaultSignInBurst if zero); SignInRefill how long it takes for one
	// to be forgiven (DefaultSignInRefill if zero). Every failed sign-in is
	// logged, with the name given and the address.
	SignInBurst  int
	SignInRefill time.Duration
	// ClientKey names the client of a request for the sign-in limit (the
	// IP address of r.RemoteAddr if nil); behind reverse proxies, use
	// resumehttp.TrustedProxies.
	ClientKey func(r *http.Request) string
	// Audit, if set, is the audit log of the Runner's store (a store that
	// is a store.AuditLog): the decide and machine pages show whether it
	// verifies (store.VerifyAudit), checked again at most once per
	// AuditRecheck unless entries were appended. AuditKey, if set, is the
	// public key its entries' signatures must verify with.
	Audit    store.AuditLog
	AuditKey ed25519.PublicKey
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// Logger receives failures and sign-ins (silent if nil).
	Logger *slog.Logger
}

// The sign-in limit's defaults: five failures in a row, then one a
// minute, for at most maxSignInClients addresses remembered.
const (
	DefaultSignInBurst  = 5
	DefaultSignInRefill = time.Minute
	maxSignInClients    = 10_000
)

// Console is the web console, an http.Handler to mount at its prefix.
type Console struct {
	runner   *durable.Runner
	acceptor resumehttp.Acceptor
	statuser resumehttp.Statuser
	charter  *machine.Charter
	prefix   string
	streams  *streams
	fleet    FleetView
	// deliveries are the webhook deliveries (nil: no page).
	deliveries DeliveryView
	now        func() time.Time
	log        *slog.Logger
	auth       *auth
	oidc       *openID
	signIns    *faillimit.Limit
	audit      *auditCheck
	client     func(*http.Request) string
	mux        *http.ServeMux
}

// New returns a Console. A config without a Runner, a Charter, or a way
// to sign in fails with ErrInvalidConfig.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.Runner == nil || cfg.Charter == nil:
		return nil, fmt.Errorf("%w: a Runner and a Charter are required", ErrInvalidConfig)
	case len(cfg.Secret) == 0 && cfg.OIDC == nil && cfg.IdentityHeader == "":
		return nil, fmt.Errorf("%w: a Secret, OIDC or an IdentityHeader is required", ErrInvalidConfig)
	}
	if len(cfg.Secret) > 0 {
		// The secret guards sign-in as the API's guards signatures: the
		// same minimum (resumehttp.MinSecretLen bytes, not one repeated).
		if err := resumehttp.CheckSecret(cfg.Secret); err != nil {
			return nil, fmt.Errorf("%w: Secret: %w", ErrInvalidConfig, err)
		}
	}
	c := &Console{runner: cfg.Runner, charter: cfg.Charter, prefix: cfg.Prefix, fleet: cfg.Fleet, deliveries: cfg.Deliveries, acceptor: cfg.Acceptor, now: cfg.Now, log: cfg.Logger}
	if c.acceptor == nil {
		c.acceptor = cfg.Runner
	}
	// The machine page's status is the acceptor's when it knows more (a
	// fleet: parked, queued inputs).
	c.statuser = cfg.Runner
	if s, ok := c.acceptor.(resumehttp.Statuser); ok {
		c.statuser = s
	}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if !strings.HasPrefix(c.prefix, "/") || !strings.HasSuffix(c.prefix, "/") {
		return nil, fmt.Errorf("%w: prefix %q must start and end with /", ErrInvalidConfig, c.prefix)
	}
	cookiePath := cmp.Or(cfg.CookiePath, c.prefix)
	if !strings.HasPrefix(cookiePath, "/") || !strings.HasPrefix(c.prefix, cookiePath) {
		return nil, fmt.Errorf("%w: cookie path %q must start with / and hold the prefix %q", ErrInvalidConfig, cookiePath, c.prefix)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Audit != nil {
		c.audit = &auditCheck{log: cfg.Audit, key: cfg.AuditKey}
	}
	c.signIns = faillimit.New(cmp.Or(cfg.SignInBurst, DefaultSignInBurst), cmp.Or(cfg.SignInRefill, DefaultSignInRefill), maxSignInClients)
	c.client = cfg.ClientKey
	if c.client == nil {
		c.client = faillimit.RemoteIP
	}
	if cfg.OIDC != nil {
		var err error
		if c.oidc, err = newOpenID(*cfg.OIDC, c.prefix); err != nil {
			return nil, err
		}
	}
	c.auth = &auth{secret: cfg.Secret, signIn: len(cfg.Secret) > 0 || c.oidc != nil, header: cfg.IdentityHeader, ttl: cfg.SessionTTL, path: cookiePath, now: c.now}
	if c.auth.ttl <= 0 {
		c.auth.ttl = DefaultSessionTTL
	}
	switch {
	case len(cfg.Secret) > 0:
		k := sha256.Sum256(append([]byte("markov console session key\x00"), cfg.Secret...))
		c.auth.key = k[:]
	case cfg.OIDC != nil && cfg.OIDC.ClientSecret != "":
		k := sha256.Sum256(append([]byte("markov console OIDC session key\x00"), cfg.OIDC.ClientSecret...))
		c.auth.key = k[:]
	default:
		c.auth.key = make([]byte, 32)
		_, _ = rand.Read(c.auth.key)
	}
	var err error
	if c.streams, err = newStreams(cfg.Runner, Config{Now: c.now, Logger: c.log}); err != nil {
		return nil, err
	}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	p := c.prefix
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET "+p+"static/", http.StripPrefix(p+"static/", cacheStatic(http.FileServerFS(static))))
	mux.HandleFunc("GET "+p+"login", c.loginPage)
	mux.HandleFunc("POST "+p+"login", c.login)
	mux.HandleFunc("POST "+p+"logout", c.signedIn(c.logout))
	if c.oidc != nil {
		mux.HandleFunc("GET "+p+"oidc/start", c.oidcStart)
		mux.HandleFunc("GET "+p+"oidc/callback", c.oidcCallback)
	}
	mux.HandleFunc("GET "+p+"{$}", c.signedIn(c.inbox))
	mux.HandleFunc("GET "+p+"events", c.signedIn(c.serveEvents))
	mux.HandleFunc("GET "+p+"machines", c.signedIn(c.machines))
	mux.HandleFunc("GET "+p+"machines/{id}", c.signedIn(c.machinePage))
	mux.HandleFunc("POST "+p+"machines/{id}/{action}", c.signedIn(c.machineAction))
	mux.HandleFunc("GET "+p+"fleet", c.signedIn(c.fleetPage))
	mux.HandleFunc("GET "+p+"deliveries", c.signedIn(c.deliveriesPage))
	mux.HandleFunc("POST "+p+"deliveries/{id}/redeliver", c.signedIn(c.redeliver))
	mux.HandleFunc("GET "+p+"suspensions/{id}", c.signedIn(c.suspensionPage))
	mux.HandleFunc("POST "+p+"suspensions/{id}/{action}", c.signedIn(c.decide))
	c.mux = mux
}

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the console's pages under its prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// whoKey is the request context key of the identity.
type whoKey struct{}

// signedIn runs h for a signed-in person, and for a POST only with a good
// CSRF token; otherwise it sends them to sign in (or refuses).
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := c.auth.principal(r)
		who := id.Subject
		if who == "" {
			if !c.auth.signIn {
				http.Error(w, "console: sign in through the proxy", http.StatusUnauthorized)
				return
			}
			switch {
			case r.Method == http.MethodGet && r.URL.Path != c.prefix+"events":
				http.Redirect(w, r, c.prefix+"login?"+url.Values{"next": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
			case r.Method == http.MethodPost && r.PathValue("action") != "":
				c.signInAgain(w, r)
			default:
				http.Error(w, "console: not signed in", http.StatusUnauthorized)
			}
			return
		}
		if r.Method == http.MethodPost && !c.auth.checkCSRF(r, who) {
			http.Error(w, "console: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, id)), who)
	}
}

// groupsOf is the groups of the signed-in person who sent r (signedIn).
func groupsOf(r *http.Request) []string {
	id, _ := r.Context().Value(whoKey{}).(instance.Identity)
	return id.Groups
}

// loginData is the sign-in page's data: where to go once signed in,
// and the ways to sign in offered: the secret's form, the OpenID
// provider's link.
type loginData struct {
	Next         string
	Secret, OIDC bool
}

// loginData is the sign-in page's data, going to next once signed in.
func (c *Console) loginData(next string) loginData {
	return loginData{Next: next, Secret: len(c.auth.secret) > 0, OIDC: c.oidc != nil}
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Data: c.loginData(c.next(r.URL.Query().Get("next")))}, "")
}

// signInAgain answers a decision posted without a session (it expired):
// the sign-in page, which returns to the decision's page with what the
// person had filled in (?draft=, the form's values), nothing decided.
func (c *Console) signInAgain(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	draft := url.Values{}
	for k, v := range r.PostForm {
		if k != "csrf" && k != yesNoField {
			draft[k] = v
		}
	}
	next := c.prefix + "suspensions/" + url.PathEscape(r.PathValue("id"))
	if len(draft) > 0 {
		next += "?" + url.Values{"draft": {draft.Encode()}}.Encode()
	}
	c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in",
		Error: "Your session ended, and your decision was not sent. Sign in again: the form comes back as you filled it in.",
		Data:  c.loginData(next)}, "")
}

// next is the path to return to after signing in: a path of the
// console's own, or the inbox.
func (c *Console) next(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, c.prefix) ||
		strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") || u.Path == c.prefix+"login" {
		return c.prefix
	}
	return u.RequestURI()
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	client := c.client(r)
	if wait := c.signIns.Wait(client, c.now()); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.log.WarnContext(r.Context(), "markov console: sign-in refused, too many failures", "client", client)
		c.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in",
			Error: fmt.Sprintf("Too many failed sign-ins from your address: try again in %d seconds.", secs),
			Data:  c.loginData(c.next(r.PostFormValue("next")))}, "")
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if !c.auth.checkCSRF(r, "") {
		http.Error(w, "console: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
		return
	}
	if name == "" || !c.auth.checkSecret(r.PostFormValue("secret")) {
		c.signIns.Fail(client, c.now())
		c.log.WarnContext(r.Context(), "markov console: failed sign-in", "name", name, "client", client)
		c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "Wrong name or secret.",
			Data: c.loginData(c.next(r.PostFormValue("next")))}, "")
		return
	}
	c.log.InfoContext(r.Context(), "markov console: signed in", "name", name, "client", client)
	c.startSession(w, r, instance.Identity{Subject: name}, c.next(r.PostFormValue("next")))
}

// startSession signs id in (the session cookie) and sends the browser
// to next.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, id instance.Identity, next string) {
	http.SetCookie(w, c.auth.cookie(r, sessionCookie, c.auth.session(id), int(c.auth.ttl/time.Second)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ string) {
	http.SetCookie(w, c.auth.cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, c.signOutURL(), http.StatusSeeOther)
}

// page is what every template gets.
type page struct {
	Title  string
	Prefix string
	Who    string
	CSRF   string
	Error  string
	Notice string
	// Live is the machine ID the page follows ("inbox" for the inbox),
	// or "" for a page that does not update itself.
	Live string
	// Fleet shows the link to the fleet view; Deliveries to the
	// webhook deliveries.
	Fleet, Deliveries bool
	// Refresh, if positive, reloads the page every Refresh seconds;
	// Following does only where scripts do not run (live pages follow
	// the events with them).
	Refresh, Following int
	Data               any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page, who string) {
	p.Prefix, p.Who, p.Fleet, p.Deliveries = c.prefix, who, c.fleet != nil, c.deliveries != nil
	p.CSRF = c.auth.csrfToken(w, r, who)
	var b strings.Builder
	if err := pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.log.ErrorContext(r.Context(), "console: page failed", "path", r.URL.Path, "error", err)
		http.Error(w, "Something went wrong on our side; try again in a moment.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail logs err and answers with the console's own error page, which
// says nothing of the error (it may name internal addresses): the log
// has it, under the reference the page shows.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	ref := rand.Text()[:10]
	c.log.ErrorContext(r.Context(), "console: page failed", "path", r.URL.Path, "ref", ref, "error", err)
	c.render(w, r, http.StatusInternalServerError, "error", page{Title: "Something went wrong",
		Error: "Something went wrong on our side (reference " + ref + " in the server's log). Try again in a moment."}, c.auth.identity(r))
}

// pages are the templates, each page with the layout.
var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"login", "inbox", "suspension", "machine", "machines", "fleet", "deliveries", "error"} {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/request.html", "templates/"+name+".html"))
	}
	return out
}()
