package instance_test

import (
	"errors"
	"testing"
	"time"

	"github.com/markov-agents/markov/instance"
)

var nine = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// remindCall is a pending call suspended at nine, reminding every every
// until its deadline an hour later.
func remindCall(every time.Duration) instance.SuspendedCall {
	c := instance.SuspendedCall{SuspendID: "s", Status: instance.StatusPending, SuspendedAt: nine, Deadline: nine.Add(time.Hour),
		Policy: &instance.Policy{Subjects: []string{"bo"}, Remind: every}}
	c.ScheduleReminder(nine)
	return c
}

// Reminders come every interval after the call, none at or after the
// deadline; one missed while nothing ran is not made up, and the rhythm
// is kept.
func TestScheduleReminder(t *testing.T) {
	c := remindCall(20 * time.Minute)
	var got []time.Time
	for now := nine; now.Before(nine.Add(2 * time.Hour)); now = now.Add(time.Minute) {
		if c.ReminderDue(now) {
			got = append(got, now)
			c.ScheduleReminder(now)
		}
	}
	want := []time.Time{nine.Add(20 * time.Minute), nine.Add(40 * time.Minute)}
	if len(got) != len(want) || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
		t.Fatalf("reminders at %v, want %v", got, want)
	}

	c = remindCall(10 * time.Minute)
	late := nine.Add(35 * time.Minute) // the 10, 20 and 30 minute reminders were missed
	if !c.ReminderDue(late) {
		t.Fatal("a missed reminder is due")
	}
	c.ScheduleReminder(late)
	if want := nine.Add(40 * time.Minute); !c.RemindAt.Equal(want) {
		t.Fatalf("after a late reminder the next is %v, want %v", c.RemindAt, want)
	}

	if c := remindCall(time.Hour); !c.RemindAt.IsZero() {
		t.Fatalf("a reminder at the deadline is none, got %v", c.RemindAt)
	}
	if c := remindCall(0); !c.RemindAt.IsZero() {
		t.Fatalf("a policy without Remind reminds no one, got %v", c.RemindAt)
	}
	c = remindCall(20 * time.Minute)
	if c.Expire(); c.ReminderDue(nine.Add(30 * time.Minute)) {
		t.Fatal("a call no longer pending is not reminded")
	}
}

// An escalation reminds under its own policy, from the escalation on.
func TestEscalationReminds(t *testing.T) {
	c := remindCall(20 * time.Minute)
	c.Policy.Escalation = &instance.Escalation{Policy: instance.Policy{Groups: []string{"directors"}, Remind: 5 * time.Minute}, Timeout: time.Hour}
	at := nine.Add(time.Hour)
	if ok, err := c.Escalate("till", at); !ok || err != nil {
		t.Fatalf("escalate: %v, %v", ok, err)
	}
	if want := at.Add(5 * time.Minute); !c.RemindAt.Equal(want) {
		t.Fatalf("after the escalation the first reminder is %v, want %v", c.RemindAt, want)
	}
}

// A negative Remind is a bad policy.
func TestRemindChecked(t *testing.T) {
	err := instance.Policy{Subjects: []string{"bo"}, Remind: -time.Minute}.Check()
	if !errors.Is(err, instance.ErrBadPolicy) {
		t.Fatalf("Check = %v, want ErrBadPolicy", err)
	}
}

// FuzzScheduleReminder: whatever the interval, the deadline and when
// the call is run, the next reminder is none or after now and before
// the deadline, and on the call's rhythm.
func FuzzScheduleReminder(f *testing.F) {
	f.Add(int64(20*time.Minute), int64(time.Hour), int64(35*time.Minute))
	f.Add(int64(time.Second), int64(0), int64(time.Hour))
	f.Add(int64(time.Hour), int64(time.Minute), int64(0))
	f.Fuzz(func(t *testing.T, every, deadline, after int64) {
		if every <= 0 || every > int64(1000*time.Hour) || deadline < 0 || deadline > int64(1000*time.Hour) || after < 0 || after > int64(1000*time.Hour) {
			return
		}
		c := instance.SuspendedCall{Status: instance.StatusPending, SuspendedAt: nine, Policy: &instance.Policy{Subjects: []string{"bo"}, Remind: time.Duration(every)}}
		if deadline > 0 {
			c.Deadline = nine.Add(time.Duration(deadline))
		}
		c.ScheduleReminder(nine)
		first := c.RemindAt
		now := nine.Add(time.Duration(after))
		if !c.ReminderDue(now) {
			return
		}
		c.ScheduleReminder(now)
		if c.RemindAt.IsZero() {
			return
		}
		if !c.RemindAt.After(now) || !c.Deadline.IsZero() && !c.RemindAt.Before(c.Deadline) {
			t.Fatalf("next reminder %v: not after %v and before %v", c.RemindAt, now, c.Deadline)
		}
		if c.RemindAt.Sub(first)%time.Duration(every) != 0 {
			t.Fatalf("next reminder %v is off the rhythm of %v from %v", c.RemindAt, time.Duration(every), first)
		}
	})
}
