package a2a

// This file keeps the SDK's tasks and push notification configurations
// in markov's store (store.RecordKeeper), so that every process on the
// same database sees them and a restart loses none.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/uuid"

	"github.com/markov-agents/markov/store"
)

// The record kinds of the server.
const (
	taskKind = "a2a.task"
	pushKind = "a2a.push"
)

// taskStore is taskstore.Store on a RecordKeeper: one record per task,
// its JSON, versioned by the record's version.
type taskStore struct{ records store.RecordKeeper }

var _ taskstore.Store = taskStore{}

// Create implements taskstore.Store.
func (s taskStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	return s.put(ctx, task, 0)
}

// Update implements taskstore.Store. A missing PrevVersion updates
// whatever version is stored.
func (s taskStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	prev := int64(req.PrevVersion)
	if req.PrevVersion == taskstore.TaskVersionMissing {
		r, err := s.records.GetRecord(ctx, taskKind, string(req.Task.ID))
		if err != nil {
			return 0, taskErr(err)
		}
		prev = r.Version
	}
	return s.put(ctx, req.Task, prev)
}

func (s taskStore) put(ctx context.Context, task *a2a.Task, prev int64) (taskstore.TaskVersion, error) {
	if task == nil || task.ID == "" || task.ContextID == "" {
		return 0, fmt.Errorf("task without an ID or a context ID: %w", a2a.ErrInvalidParams)
	}
	data, err := json.Marshal(task)
	if err != nil {
		return 0, err
	}
	v, err := s.records.PutRecord(ctx, store.Record{Kind: taskKind, Key: string(task.ID), Data: data}, prev)
	switch {
	case errors.Is(err, store.ErrConflict) && prev == 0:
		return 0, taskstore.ErrTaskAlreadyExists
	case errors.Is(err, store.ErrConflict):
		return 0, taskstore.ErrConcurrentModification
	case errors.Is(err, store.ErrInvalid):
		return 0, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	return taskstore.TaskVersion(v), err
}

// Get implements taskstore.Store.
func (s taskStore) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	r, err := s.records.GetRecord(ctx, taskKind, string(id))
	if err != nil {
		return nil, taskErr(err)
	}
	var t a2a.Task
	if err := json.Unmarshal(r.Data, &t); err != nil {
		return nil, fmt.Errorf("a2a: task %s: %w", id, err)
	}
	return &taskstore.StoredTask{Task: &t, Version: taskstore.TaskVersion(r.Version)}, nil
}

// taskErr is the SDK's error for a store error of a task lookup.
func taskErr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return a2a.ErrTaskNotFound
	}
	return err
}

// defaultPageSize is the page size of a tasks/list without one.
const defaultPageSize = 50

// List implements taskstore.Store: the tasks of a context or a state,
// the last updated first; the page token is the offset of the page.
func (s taskStore) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	size := cmp.Or(req.PageSize, defaultPageSize)
	if size < 1 || size > 100 {
		return nil, fmt.Errorf("page size %d: want 1 to 100: %w", req.PageSize, a2a.ErrInvalidParams)
	}
	offset := 0
	if req.PageToken != "" {
		n, err := strconv.Atoi(req.PageToken)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("page token %q: %w", req.PageToken, a2a.ErrInvalidParams)
		}
		offset = n
	}
	rs, err := s.records.ListRecords(ctx, taskKind, "")
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rs, func(a, b store.Record) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	var tasks []*a2a.Task
	for _, r := range rs {
		var t a2a.Task
		if json.Unmarshal(r.Data, &t) != nil {
			continue
		}
		if (req.ContextID != "" && t.ContextID != req.ContextID) || (req.Status != "" && t.Status.State != req.Status) ||
			(req.StatusTimestampAfter != nil && (t.Status.Timestamp == nil || !t.Status.Timestamp.After(*req.StatusTimestampAfter))) {
			continue
		}
		if req.HistoryLength != nil && len(t.History) > max(*req.HistoryLength, 0) {
			t.History = t.History[len(t.History)-max(*req.HistoryLength, 0):]
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		tasks = append(tasks, &t)
	}
	out := &a2a.ListTasksResponse{TotalSize: len(tasks), PageSize: size, Tasks: []*a2a.Task{}}
	if offset < len(tasks) {
		end := min(offset+size, len(tasks))
		out.Tasks = tasks[offset:end]
		if end < len(tasks) {
			out.NextPageToken = strconv.Itoa(end)
		}
	}
	return out, nil
}

// pushStore is push.ConfigStore on a RecordKeeper: one record per
// configuration, keyed "task/config". check refuses a URL a
// notification may not go to.
type pushStore struct {
	records store.RecordKeeper
	check   func(url string) error
}

var _ push.ConfigStore = pushStore{}

func pushKey(task a2a.TaskID, id string) string { return string(task) + "/" + id }

// Save implements push.ConfigStore.
func (s pushStore) Save(ctx context.Context, task a2a.TaskID, cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	if cfg == nil || cfg.URL == "" {
		return nil, fmt.Errorf("push config without a URL: %w", a2a.ErrInvalidParams)
	}
	if s.check != nil {
		if err := s.check(cfg.URL); err != nil {
			return nil, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
		}
	}
	saved := *cfg
	saved.TaskID = task
	if saved.ID == "" {
		saved.ID = uuid.NewString()
	}
	data, err := json.Marshal(&saved)
	if err != nil {
		return nil, err
	}
	key := pushKey(task, saved.ID)
	prev := int64(0)
	if r, err := s.records.GetRecord(ctx, pushKind, key); err == nil {
		prev = r.Version
	}
	if _, err := s.records.PutRecord(ctx, store.Record{Kind: pushKind, Key: key, Data: data}, prev); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
		}
		return nil, err
	}
	return &saved, nil
}

// Get implements push.ConfigStore.
func (s pushStore) Get(ctx context.Context, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	r, err := s.records.GetRecord(ctx, pushKind, pushKey(task, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, push.ErrPushConfigNotFound
	} else if err != nil {
		return nil, err
	}
	var c a2a.PushConfig
	return &c, json.Unmarshal(r.Data, &c)
}

// List implements push.ConfigStore.
func (s pushStore) List(ctx context.Context, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	rs, err := s.records.ListRecords(ctx, pushKind, pushKey(task, ""))
	if err != nil {
		return nil, err
	}
	out := make([]*a2a.PushConfig, 0, len(rs))
	for _, r := range rs {
		var c a2a.PushConfig
		if err := json.Unmarshal(r.Data, &c); err != nil {
			return nil, err
		}
		out = append(out, &c)
	}
	return out, nil
}

// Delete implements push.ConfigStore.
func (s pushStore) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	return s.records.DeleteRecord(ctx, pushKind, pushKey(task, id))
}

// DeleteAll implements push.ConfigStore.
func (s pushStore) DeleteAll(ctx context.Context, task a2a.TaskID) error {
	cs, err := s.List(ctx, task)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := s.Delete(ctx, task, c.ID); err != nil {
			return err
		}
	}
	return nil
}
