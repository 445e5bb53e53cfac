package message

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestText(t *testing.T) {
	tests := []struct {
		parts []Part
		want  string
	}{
		{nil, ""},
		{[]Part{Text("a")}, "a"},
		{[]Part{Thinking("hmm", "sig"), Text("a"), ToolUse("1", "x", nil), Text("b")}, "ab"},
	}
	for _, tt := range tests {
		if got := (Message{Parts: tt.parts}).Text(); got != tt.want {
			t.Errorf("Text(%v) = %q, want %q", tt.parts, got, tt.want)
		}
	}
}

func TestToolUses(t *testing.T) {
	m := Message{Parts: []Part{Text("a"), ToolUse("1", "x", json.RawMessage(`{}`)), ToolUse("2", "y", nil)}}
	uses := m.ToolUses()
	if len(uses) != 2 || uses[0].ID != "1" || uses[1].Name != "y" {
		t.Fatalf("ToolUses = %+v", uses)
	}
}

func TestVisibleTo(t *testing.T) {
	tests := []struct {
		m    Message
		id   string
		want bool
	}{
		{UserText("hi"), "a", true},
		{Message{Role: Assistant, Source: Source{To: "a"}}, "a", true},
		{Message{Role: Assistant, Source: Source{To: "a"}}, "b", false},
		{Message{Role: Record}, "a", false},
	}
	for i, tt := range tests {
		if got := tt.m.VisibleTo(tt.id); got != tt.want {
			t.Errorf("%d: VisibleTo(%q) = %v, want %v", i, tt.id, got, tt.want)
		}
	}
}

func TestCloneIsDeep(t *testing.T) {
	orig := []Message{{Role: Assistant, Parts: []Part{ToolUse("1", "x", json.RawMessage(`{"a":1}`)), Text("t")}}}
	cp := CloneAll(orig)
	if d := cmp.Diff(orig, cp); d != "" {
		t.Fatalf("clone differs:\n%s", d)
	}
	cp[0].Parts[0].Data[2] = 'b'
	cp[0].Parts[1].Text = "changed"
	if string(orig[0].Parts[0].Data) != `{"a":1}` || orig[0].Parts[1].Text != "t" {
		t.Fatalf("clone shares memory with the original: %+v", orig)
	}
	if CloneAll(nil) != nil {
		t.Fatal("CloneAll(nil) != nil")
	}
}

// TestCloneAllAsClone holds CloneAll, which carves its copies out of
// shared arrays, to what Clone gives message by message (nil and empty
// lists and data alike), and to copies that cannot reach one another.
func TestCloneAllAsClone(t *testing.T) {
	msgs := []Message{
		{Role: User},
		{Role: User, Parts: []Part{}},
		{Role: Assistant, Parts: []Part{ToolUse("1", "x", json.RawMessage(`{"a":1}`)), {Kind: KindStructured, Data: json.RawMessage{}}}},
		{Role: Tool, Parts: []Part{ToolResult("1", "ok", false)}, Source: Source{To: "a"}},
		{Role: Record, Parts: []Part{RecordPart("r", json.RawMessage(`[2]`))}},
	}
	got := CloneAll(msgs)
	for i := range msgs {
		if want := msgs[i].Clone(); !reflect.DeepEqual(got[i], want) {
			t.Errorf("message %d: CloneAll gives %#v, Clone %#v", i, got[i], want)
		}
	}
	_ = append(got[2].Parts, Text("more"))
	_ = append(got[2].Parts[0].Data, 'x')
	if got[3].Parts[0].Kind != KindToolResult || string(got[4].Parts[0].Data) != `[2]` {
		t.Errorf("appending to one copy reached the next: %#v", got[3:])
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindText: "text", KindToolUse: "tool_use", KindToolResult: "tool_result",
		KindThinking: "thinking", KindStructured: "structured", KindRecord: "record", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
