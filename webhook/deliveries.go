package webhook

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/markov-agents/markov/resumehttp"
)

// DeliveryList is the answer of GET /deliveries.
type DeliveryList struct {
	Deliveries []Delivery `json:"deliveries"`
}

// Handler serves the deliveries over HTTP, for operators:
//
//	GET  /deliveries?state=pending|delivered|dead&limit=N  → DeliveryList, newest first
//	GET  /deliveries/{id}                                  → Delivery
//	POST /deliveries/{id}/redeliver                        → Delivery, redelivered (Sender.Redeliver)
//
// It does no authentication: mount it behind the API's (markov serve
// mounts it under /webhooks behind resumehttp's signed requests).
func (s *Sender) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /deliveries", func(w http.ResponseWriter, r *http.Request) {
		state := DeliveryState(r.URL.Query().Get("state"))
		if state != "" && state != Pending && state != Delivered && state != Dead {
			writeBody(w, http.StatusBadRequest, resumehttp.ErrorBody{Code: "bad_request", Error: "state must be pending, delivered or dead"})
			return
		}
		limit := 0
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				writeBody(w, http.StatusBadRequest, resumehttp.ErrorBody{Code: "bad_request", Error: "limit must be a positive integer"})
				return
			}
			limit = n
		}
		list, err := s.Deliveries(r.Context(), state, limit)
		if err != nil {
			writeBody(w, http.StatusInternalServerError, resumehttp.ErrorBody{Code: "internal", Error: "internal error"})
			return
		}
		writeBody(w, http.StatusOK, DeliveryList{Deliveries: list})
	})
	mux.HandleFunc("GET /deliveries/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := s.Delivery(r.Context(), r.PathValue("id"))
		answerDelivery(w, d, err)
	})
	mux.HandleFunc("POST /deliveries/{id}/redeliver", func(w http.ResponseWriter, r *http.Request) {
		d, err := s.Redeliver(r.Context(), r.PathValue("id"))
		answerDelivery(w, d, err)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, http.StatusNotFound, resumehttp.ErrorBody{Code: "not_found", Error: "no such endpoint"})
	})
	return mux
}

func answerDelivery(w http.ResponseWriter, d Delivery, err error) {
	switch {
	case errors.Is(err, ErrUnknownDelivery):
		writeBody(w, http.StatusNotFound, resumehttp.ErrorBody{Code: "unknown_delivery", Error: "unknown delivery"})
	case err != nil:
		writeBody(w, http.StatusInternalServerError, resumehttp.ErrorBody{Code: "internal", Error: "internal error"})
	default:
		writeBody(w, http.StatusOK, d)
	}
}

func writeBody(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
