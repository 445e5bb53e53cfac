package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/markov-agents/markov/webhook"
)

// DeliveryView is what the deliveries page reads and redelivers;
// *webhook.Sender is one.
type DeliveryView interface {
	// Deliveries returns the webhook deliveries, newest first, at most
	// limit.
	Deliveries(ctx context.Context, state webhook.DeliveryState, limit int) ([]webhook.Delivery, error)
	// Redeliver attempts a delivery once more, with the same ID.
	Redeliver(ctx context.Context, id string) (webhook.Delivery, error)
}

// deliveriesLimit is how many deliveries the page lists.
const deliveriesLimit = 100

// deliveriesData is the deliveries page's data.
type deliveriesData struct {
	Deliveries []webhook.Delivery
	Limit      int
	// State is the state listed ("" for all).
	State webhook.DeliveryState
}

// deliveriesPage lists the webhook deliveries, of one state if the query
// names one. Without a sender it is 404.
func (c *Console) deliveriesPage(w http.ResponseWriter, r *http.Request, who string) {
	p := page{Title: "Webhook deliveries"}
	if c.deliveries == nil {
		p.Error = "This console sends no webhooks: the deliveries page needs subscriptions (markov serve --webhooks FILE)."
		c.render(w, r, http.StatusNotFound, "deliveries", p, who)
		return
	}
	state := webhook.DeliveryState(r.URL.Query().Get("state"))
	switch state {
	case "", webhook.Pending, webhook.Delivered, webhook.Dead:
	default:
		p.Error = "The state must be pending, delivered or dead."
		c.render(w, r, http.StatusBadRequest, "deliveries", p, who)
		return
	}
	ds, err := c.deliveries.Deliveries(r.Context(), state, deliveriesLimit)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if id := r.URL.Query().Get("redelivered"); id != "" {
		p.Notice = "Delivery " + id + " is sent again."
	}
	p.Refresh, p.Data = fleetRefresh, deliveriesData{Deliveries: ds, Limit: deliveriesLimit, State: state}
	c.render(w, r, http.StatusOK, "deliveries", p, who)
}

// redeliver sends a delivery again and goes back to the list.
func (c *Console) redeliver(w http.ResponseWriter, r *http.Request, who string) {
	if c.deliveries == nil {
		http.NotFound(w, r)
		return
	}
	id := r.PathValue("id")
	_, err := c.deliveries.Redeliver(context.WithoutCancel(r.Context()), id)
	switch {
	case errors.Is(err, webhook.ErrUnknownDelivery):
		c.render(w, r, http.StatusNotFound, "deliveries", page{Title: "Webhook deliveries",
			Error: "There is no delivery " + id + "."}, who)
	case err != nil:
		c.fail(w, r, err)
	default:
		c.log.InfoContext(r.Context(), "console: redelivery", "delivery_id", id, "by", who)
		http.Redirect(w, r, c.prefix+"deliveries?redelivered="+url.QueryEscape(id), http.StatusSeeOther)
	}
}
