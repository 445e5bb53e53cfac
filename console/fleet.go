package console

import (
	"context"
	"net/http"

	"github.com/markov-agents/markov/durable/fleet"
)

// FleetView is what the fleet view reads; *fleet.Fleet is one.
type FleetView interface {
	// Overview returns the fleet's work now, at most limit jobs a list.
	Overview(ctx context.Context, limit int) (fleet.Overview, error)
}

// fleetLimit is how many jobs each list of the fleet view shows.
const fleetLimit = 50

// fleetRefresh is how often the fleet view reloads itself, in seconds.
const fleetRefresh = 5

// fleetData is the fleet page's data.
type fleetData struct {
	fleet.Overview
	Limit int
}

// fleetPage shows what the fleet is doing. Without a fleet it is 404.
func (c *Console) fleetPage(w http.ResponseWriter, r *http.Request, who string) {
	if c.fleet == nil {
		c.render(w, r, http.StatusNotFound, "fleet", page{Title: "Fleet",
			Error: "This console runs without a fleet: the fleet view needs markov on PostgreSQL (markov serve --store postgres://…)."}, who)
		return
	}
	o, err := c.fleet.Overview(r.Context(), fleetLimit)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "fleet", page{Title: "Fleet", Refresh: fleetRefresh, Data: fleetData{o, fleetLimit}}, who)
}
